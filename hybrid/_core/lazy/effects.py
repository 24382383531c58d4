"""What running a tape does besides computing values: pending writes, donated buffers, packed outputs."""
from __future__ import annotations

import sys
from typing import Any, Callable, NamedTuple, Sequence

import jax
import numpy as np
from jax._src import core
from jax._src.array import ArrayImpl

from ..cells import Cell  # what a pending write stores into; two writes to one cell: the later one wins
from ...errors import AutogradError
from .slots import SlotRegistry
from .trace import LazyArray


class PackRef(NamedTuple):
    """The ``position``-th value of a :class:`Pack`."""

    pack: "Pack"
    position: int


class Replaced(NamedTuple):
    """What a write replaces: the input slots it overwrites, the slots of their new values, and how many
    references to each old array its setter drops (the cells holding it besides the parameter lists)."""

    holders: int
    olds: tuple
    news: tuple


class Write(NamedTuple):
    """A pending write: ``setter(list of the values of slots)`` at the next run."""

    slots: tuple
    setter: Callable[[list], None]


# Arrays of at least this many bytes are returned as they are rather than copied into a packed buffer:
# the copy costs more than the output it saves (a ResNet-18 step kept its gradients 11% slower packed).
PACK_BELOW_BYTES = 64 * 1024


class PackLayout:
    """Where each of a list of arrays lies in the outputs of a program: arrays smaller than
    :data:`PACK_BELOW_BYTES` in one flat buffer per dtype, larger ones as they are. ``pack(*arrays)``
    and ``unpack(outputs)`` convert between the two forms."""

    def __init__(self, avals: Sequence):
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
_LAYOUT_BY_LIST: dict[int, tuple] = {}  # id of a list of avals -> (the list, its layout)


def pack_layout(avals: list, fixed: bool = False) -> PackLayout:
    """The (cached) layout of arrays of ``avals``; found by the avals' identities (the common case: the
    same cached avals every step), else by their shapes and dtypes. A ``fixed`` list (one that is never
    changed, such as a compiled forward's parameter avals, passed every step) is found by its own
    identity first: 4.5 -> 0.1 us for mlp33's 68 (timeit)."""
    if not fixed:
        return _layout_by_avals(avals)
    hit = _LAYOUT_BY_LIST.get(id(avals))
    if hit is not None and hit[0] is avals:
        return hit[1]
    layout = _layout_by_avals(avals)
    if len(_LAYOUT_BY_LIST) > 256:
        _LAYOUT_BY_LIST.clear()
    _LAYOUT_BY_LIST[id(avals)] = (avals, layout)
    return layout


def _layout_by_avals(avals: list) -> PackLayout:
    ids = tuple([id(a) for a in avals])
    hit = _LAYOUT_BY_AVALS.get(ids)
    if hit is not None and all([a is b for a, b in zip(hit[0], avals)]):
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


class Pack:
    """Values that a tape program returns packed (small ones in one flat buffer per dtype instead of one
    output per array, which is cheaper for XLA and for dispatch); split, all together, on first need.

    Its members are referred to by :class:`PackRef`; :meth:`member` gives the value a reference stands
    for, so that no LazyArray is made for a member nobody reads."""

    __slots__ = ("layout", "buffers", "values", "on_split", "dropped", "tape", "slots", "avals")
    buffers: list | None
    values: list | None

    def __init__(self, layout: PackLayout, on_split: Callable[["Pack", list], None] | None, tape: Any,
                 slots: Sequence[int], avals: list):
        self.layout, self.buffers, self.values, self.on_split = layout, None, None, on_split
        self.dropped = "this value was recorded on a tape that ended before computing it"
        self.tape = tape  # which holds the pack (a pending write) only until it runs
        self.slots, self.avals = slots, avals

    def fill(self, buffers: list) -> None:
        self.buffers = buffers

    def member(self, index: int) -> Any:
        """The ``index``-th value: the array once the pack is split, else a LazyArray standing for it."""
        if self.values is not None:
            return self.values[index]
        return LazyArray(self.tape, self.avals[index], self.slots[index], PackRef(self, index))

    def value(self, index: int) -> Any:
        if self.values is None:
            if self.buffers is None:
                raise AutogradError(self.dropped)
            with core.set_current_trace(core.eval_trace):
                self.values = self.layout.unpack(self.buffers)
            self.buffers = None
            if self.on_split is not None:
                self.on_split(self, self.values)
        return self.values[index]


def is_member(value: Any) -> bool:
    """Whether ``value`` is a :class:`PackRef` (a reference to a packed value)."""
    return type(value) is PackRef


def resolve(value: Any) -> Any:
    """The value a :class:`PackRef` stands for (a LazyArray or an array); other values unchanged."""
    return value.pack.member(value.position) if type(value) is PackRef else value


def pack_of(value: Any) -> Pack | None:
    """The pack that ``value`` (a reference or a LazyArray) is a member of, else None."""
    if type(value) is PackRef:
        return value.pack
    packed = value._packed if type(value) is LazyArray else None
    return packed.pack if packed is not None else None


class Effects:
    """The pending writes of a tape and what they replace (which decides the buffers donated)."""

    __slots__ = ("slots", "writes", "replaced")

    def __init__(self, slots: SlotRegistry):
        self.slots = slots
        self.writes: dict[Any, Write] = {}
        self.replaced: dict[Any, Replaced] = {}

    def take(self) -> dict[Any, Write]:
        """The pending writes, leaving none."""
        writes, self.writes, self.replaced = self.writes, {}, {}
        return writes

    def write_group(self, cell: Any, slots: Sequence[int], setter: Callable[[list], None],
                    replaces: Sequence = (), holders: int = 0, replaced_slots: Sequence[int] = ()) -> None:
        """Call ``setter(list of data)`` with the values of ``slots`` at the next run. ``replaces[i]`` is
        the array that ``slots[i]``'s value replaces (or ``replaced_slots[i]`` its input slot); ``holders``
        counts the references to each replaced array that the setter itself drops (the cells still
        holding it). At the step boundary a replaced buffer is reused when nothing else holds it."""
        self.writes[cell] = Write(tuple(slots), setter)
        if replaced_slots:
            self.replaced[cell] = Replaced(holders, tuple(replaced_slots), tuple(slots[:len(replaced_slots)]))
            return
        ids = self.slots.input_ids
        pairs = [(ids[id(old)], new) for old, new in zip(replaces, slots) if id(old) in ids]
        if pairs:
            olds, news = zip(*pairs)
            self.replaced[cell] = Replaced(holders, olds, news)

    def drop_packed(self, values: Sequence, reason: str) -> None:
        """Do not compute the packs of the packed values among ``values`` (references or LazyArrays;
        nothing will read them): reading one later raises AutogradError(``reason``)."""
        for pack in {pack_of(v) for v in values}:
            if pack is not None and self.writes.pop(Cell("pack", pack), None) is not None:
                pack.dropped = reason

    def donation(self, write_cells: list) -> tuple[tuple[int, ...], list[int]]:
        """Positions (in the input list) of inputs that only the tape and a cell being overwritten hold,
        and the slots of the values replacing them. A group's list is donated when each of its arrays is."""
        position, values, refcount = self.slots.input_position, self.slots.input_values, sys.getrefcount
        donate: list[int] = []
        first: list[int] = []
        for cell in write_cells:
            entry = self.replaced.get(cell)
            if entry is None:
                continue
            ats = [position[s] for s in entry.olds]
            group = [values[at] for at in ats]
            # references to each: the input list, `group`, getrefcount's argument and the cells being
            # overwritten (map passes each item straight to getrefcount)
            limit = 3 + entry.holders
            counts = list(map(refcount, group))
            kinds = set(map(type, group))
            # the usual case, every one donated, checked with C loops: 17 -> 12 us for mlp33's 136 arrays
            if max(counts) <= limit and (kinds == _ARRAY or kinds == _ARRAYS_AND_GROUP and all(
                    [_unshared(v, entry.holders) for v in group if type(v) is list])):
                donate += ats
                first += entry.news
                continue
            for at, new, count, value in zip(ats, entry.news, counts, group):
                kind = type(value)
                # NumPy arrays and scalars have no buffer to give
                if count <= limit and (kind is ArrayImpl or kind is list and _unshared(value, entry.holders)):
                    donate.append(at)
                    first.append(new)
        if len(set(donate)) < len(donate):  # an input replaced by two writes: the last one's value
            chosen = dict(zip(donate, first))
            donate, first = list(chosen), list(chosen.values())
        return tuple(donate), first


_ARRAY = {ArrayImpl}
_ARRAYS_AND_GROUP = {ArrayImpl, list}


def _unshared(members: list, holders: int) -> bool:
    """Whether only a group's list and ``holders`` cells hold each of its arrays (references: the list,
    getrefcount's argument, the cells)."""
    return not members or (max(map(sys.getrefcount, members)) <= 2 + holders
                           and set(map(type, members)) == _ARRAY)
