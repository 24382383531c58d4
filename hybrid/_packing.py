"""Many small arrays as few buffers: the arrays under :data:`PACK_BELOW_BYTES` go into one flat buffer
per dtype, larger ones stay as they are. A program that returns or takes many small arrays (gradients,
optimizer states) then has a few inputs or outputs instead of one per array, which is cheaper to
dispatch (about half a microsecond per array on CPU) and for XLA."""
from __future__ import annotations

import operator
from typing import Any, Sequence

import jax
import numpy as np
from jax import core

__all__ = ["PACK_BELOW_BYTES", "PackLayout", "pack_layout"]


# Arrays of at least this many bytes are returned as they are rather than copied into a packed buffer:
# the copy costs more than the output it saves (a ResNet-18 step kept its gradients 11% slower packed).
PACK_BELOW_BYTES = 64 * 1024


class PackLayout:
    """Where each of a list of arrays lies in the outputs of a program: arrays smaller than
    :data:`PACK_BELOW_BYTES` in one flat buffer per dtype, larger ones as they are. ``pack(*arrays)``
    and ``unpack(outputs)`` convert between the two forms."""

    def __init__(self, avals: Sequence):
        self.avals = list(avals)
        dtypes: list = []
        self.places = []  # (buffer, start, stop, shape) per packed array
        self.packed: list[int] = []  # indices of the packed arrays
        self.direct: list[int] = []  # indices of the arrays returned as they are
        ends: list[int] = []
        for index, aval in enumerate(avals):
            dtype = np.dtype(aval.dtype)
            size = int(np.prod(aval.shape, dtype=np.int64))
            if size * dtype.itemsize >= PACK_BELOW_BYTES:
                self.direct.append(index)
                continue
            if dtype not in dtypes:
                dtypes.append(dtype)
                ends.append(0)
            buffer = dtypes.index(dtype)
            start = ends[buffer]
            ends[buffer] = start + size
            self.places.append((buffer, start, ends[buffer], tuple(aval.shape)))
            self.packed.append(index)
        self.groups = [[self.packed[i] for i, place in enumerate(self.places) if place[0] == b]
                       for b in range(len(dtypes))]
        self.buffer_avals = ([core.ShapedArray((n,), d) for n, d in zip(ends, dtypes)]
                             + [avals[i] for i in self.direct])
        self.split = jax.jit(self._split)

    def pack(self, *arrays: Any) -> list:
        return ([jax.numpy.concatenate([arrays[i].ravel() for i in group]) for group in self.groups]
                + [arrays[i] for i in self.direct])

    def _split(self, buffers: list) -> list:
        return [buffers[b][start:stop].reshape(shape) for b, start, stop, shape in self.places]

    def pack_on_host(self, arrays: Sequence) -> list:
        """:meth:`pack` of concrete arrays without compiling a program: the small ones are joined by NumPy
        and put on the device of the first of them; the large ones are returned as they are."""
        buffers = []
        for group in self.groups:
            device = next(iter(arrays[group[0]].devices()))
            joined = np.concatenate([np.asarray(arrays[i]).ravel() for i in group])
            buffers.append(jax.device_put(joined, device))
        return buffers + [arrays[i] for i in self.direct]

    def unpack(self, outputs: list) -> list:
        """The arrays, in order, from the outputs of :meth:`pack` (one program call splits the buffers)."""
        n = len(self.groups)
        values = [None] * (len(self.packed) + len(self.direct))
        if n:
            for index, value in zip(self.packed, self.split(outputs[:n])):
                values[index] = value
        for index, value in zip(self.direct, outputs[n:]):
            values[index] = value
        return values


_LAYOUTS: dict[tuple, PackLayout] = {}
_LAYOUT_BY_AVALS: dict[tuple, tuple] = {}  # ids of aval objects -> (the avals, their layout)


def pack_layout(avals: list) -> PackLayout:
    """The (cached) layout of arrays of ``avals``; found by the avals' identities first (the common
    case: the same cached avals every step), else by their shapes and dtypes."""
    ids = tuple(map(id, avals))
    hit = _LAYOUT_BY_AVALS.get(ids)
    if hit is not None and all(map(operator.is_, hit[0], avals)):
        return hit[1]
    key = tuple((a.shape, a.dtype) for a in avals)
    layout = _LAYOUTS.get(key)
    if layout is None:
        if len(_LAYOUTS) > 256:
            _LAYOUTS.clear()
        layout = _LAYOUTS[key] = PackLayout(avals)
    if len(_LAYOUT_BY_AVALS) > 256:
        _LAYOUT_BY_AVALS.clear()
    _LAYOUT_BY_AVALS[ids] = (list(avals), layout)
    return layout
