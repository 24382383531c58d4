"""MXNet's binary NDArray list format (``.params`` files), parsed with NumPy; no MXNet needed.

Layout (all little-endian)::

    uint64 0x112 (list magic), uint64 reserved
    uint64 n, then n arrays:
        uint32 magic: 0xF993FAC9 (V2) or 0xF993FACA (V3), then int32 storage type (0 = dense);
                      0xF993FAC8 (V1) has no storage type; any other value is the legacy
                      format, where this word is ndim and dims follow as uint32
        shape: uint32 ndim, int64 dims[ndim]            (ndim 0 = an empty array; nothing follows)
        context: int32 device type, int32 device id
        int32 type flag (0 f32, 1 f64, 2 f16, 3 u8, 4 i32, 5 i8, 6 i64, 7 bool, 8 i16, 9 u16,
                         10 u32, 11 u64, 12 bf16)
        raw data, prod(dims) * itemsize bytes
    uint64 m (0 or n), then m names: uint64 length, UTF-8 bytes

Every count and size is checked against the bytes that remain before anything is
allocated, so a forged header cannot make the reader allocate more than the file holds.
"""
from __future__ import annotations

import math
import struct
from dataclasses import dataclass
from typing import Any, Sequence

import jax.numpy as jnp
import numpy as np

from .serialization import FormatError

__all__ = ["LIST_MAGIC", "is_mxnet_params", "parse_mxnet_params", "encode_mxnet_params", "map_mxnet_names",
           "TargetNames"]

LIST_MAGIC = 0x112
_V1, _V2, _V3 = 0xF993FAC8, 0xF993FAC9, 0xF993FACA
_TYPE_FLAGS = {0: "float32", 1: "float64", 2: "float16", 3: "uint8", 4: "int32", 5: "int8", 6: "int64",
               7: "bool", 8: "int16", 9: "uint16", 10: "uint32", 11: "uint64", 12: "bfloat16"}
_MAX_NDIM = 32
_MAX_ELEMENTS = 2 ** 48
_STATE_ALIASES = {"running_mean": ("running_mean", "moving_mean"), "running_var": ("running_var", "moving_var")}


_FLAGS = {name: flag for flag, name in _TYPE_FLAGS.items()}


def encode_mxnet_params(names: Sequence[str], arrays: Sequence[Any], where: str) -> bytes:
    """The bytes of an MXNet NDArray list (V2 dense arrays on the CPU) holding ``arrays``, named by ``names``
    (one per array, or none for an unnamed list). A rank-0 array is stored as shape ``(1,)``, as MXNet
    stores scalars. Raises TypeError, naming ``where``, for a dtype the format has no flag for."""
    parts = [struct.pack("<QQQ", LIST_MAGIC, 0, len(arrays))]
    for i, value in enumerate(arrays):
        array = np.asarray(value)
        flag = _FLAGS.get(array.dtype.name)
        if flag is None:
            raise TypeError(f"{where}: array #{i} has dtype {array.dtype}, which MXNet files cannot hold "
                            f"({', '.join(_FLAGS)})")
        if array.ndim == 0:
            array = array.reshape(1)  # rank 0 means 'none' in MXNet's format
        parts.append(struct.pack(f"<IiI{array.ndim}q", _V2, 0, array.ndim, *array.shape))
        parts.append(struct.pack("<iii", 1, 0, flag))
        parts.append(np.ascontiguousarray(array).astype(array.dtype.newbyteorder("<")).tobytes())
    parts.append(struct.pack("<Q", len(names)))
    for name in names:
        raw = name.encode("utf-8")
        parts.append(struct.pack("<Q", len(raw)) + raw)
    return b"".join(parts)


def is_mxnet_params(head: bytes) -> bool:
    """True if ``head`` (the first 8 bytes of a file) is MXNet's NDArray-list magic."""
    return len(head) >= 8 and struct.unpack_from("<Q", head)[0] == LIST_MAGIC


class _Reader:
    def __init__(self, data: bytes, where: str):
        self.data, self.pos, self.where = memoryview(data), 0, where

    def need(self, n: int, what: str) -> None:
        if n < 0 or self.pos + n > len(self.data):
            raise FormatError(f"{self.where}: truncated or corrupted MXNet file ({what} needs {n} bytes at offset "
                              f"{self.pos}, {len(self.data) - self.pos} remain)")

    def unpack(self, fmt: str, what: str) -> tuple:
        size = struct.calcsize(fmt)
        self.need(size, what)
        values = struct.unpack_from(fmt, self.data, self.pos)
        self.pos += size
        return values

    def take(self, n: int, what: str) -> memoryview:
        self.need(n, what)
        chunk = self.data[self.pos:self.pos + n]
        self.pos += n
        return chunk


def _read_shape(reader: _Reader, dim_format: str, ndim: int | None = None) -> tuple[int, ...]:
    if ndim is None:
        (ndim,) = reader.unpack("<i", "shape rank")
    if not 0 <= ndim <= _MAX_NDIM:
        raise FormatError(f"{reader.where}: array rank {ndim} is out of range (0..{_MAX_NDIM})")
    dims = reader.unpack(f"<{ndim}{dim_format}", "shape")
    if any(d < 0 for d in dims) or math.prod(max(d, 1) for d in dims) > _MAX_ELEMENTS:
        raise FormatError(f"{reader.where}: invalid shape {dims}")
    return tuple(int(d) for d in dims)


def _read_array(reader: _Reader, index: int) -> np.ndarray:
    (magic,) = reader.unpack("<I", "array magic")
    if magic in (_V2, _V3):
        (stype,) = reader.unpack("<i", "storage type")
        if stype != 0:
            raise FormatError(f"{reader.where}: array #{index} uses sparse storage (type {stype}); only dense "
                              "arrays are supported")
        shape = _read_shape(reader, "q")
    elif magic == _V1:
        shape = _read_shape(reader, "q")
    else:  # legacy: the word is the rank, dims are uint32
        shape = _read_shape(reader, "I", ndim=magic if magic <= _MAX_NDIM else -1)
    if len(shape) == 0:
        raise FormatError(f"{reader.where}: array #{index} is empty (rank 0 means 'none' in MXNet files)")
    reader.unpack("<ii", "context")
    (flag,) = reader.unpack("<i", "type flag")
    if flag not in _TYPE_FLAGS:
        raise FormatError(f"{reader.where}: array #{index} has unknown type flag {flag}")
    dtype = np.dtype(jnp.dtype(_TYPE_FLAGS[flag]))
    nbytes = math.prod(shape) * dtype.itemsize
    raw = reader.take(nbytes, f"array #{index} of shape {shape}")
    return np.frombuffer(raw, dtype=dtype.newbyteorder("<") if dtype.kind != "V" else dtype).astype(
        dtype, copy=True).reshape(shape)


def parse_mxnet_params(data: bytes, where: str) -> dict[str, np.ndarray]:
    """``{name: array}`` from the bytes of an MXNet ``.params`` file (names as stored, e.g. ``'arg:fc_weight'``).

    Raises FormatError for truncated, corrupted or unsupported content.
    """
    reader = _Reader(data, where)
    magic, _reserved = reader.unpack("<QQ", "header")
    if magic != LIST_MAGIC:
        raise FormatError(f"{where}: not an MXNet NDArray file (magic {magic:#x})")
    (count,) = reader.unpack("<Q", "array count")
    if count > (len(data) - reader.pos) // 8:
        raise FormatError(f"{where}: declares {count} arrays, more than the file can hold")
    arrays = [_read_array(reader, i) for i in range(count)]
    (n_names,) = reader.unpack("<Q", "name count")
    if n_names != count:
        raise FormatError(f"{where}: {n_names} names for {count} arrays (unnamed lists cannot be loaded "
                          "into a block)")
    names = []
    for i in range(n_names):
        (length,) = reader.unpack("<Q", "name length")
        try:
            names.append(bytes(reader.take(length, f"name #{i}")).decode("utf-8"))
        except UnicodeDecodeError:
            raise FormatError(f"{where}: name #{i} is not UTF-8") from None
    if reader.pos != len(data):
        raise FormatError(f"{where}: {len(data) - reader.pos} unexpected bytes after the names")
    if len(set(names)) != len(names):
        raise FormatError(f"{where}: duplicate array names")
    return dict(zip(names, arrays))


def _strip(name: str) -> str:
    return name.split(":", 1)[1] if name.startswith(("arg:", "aux:")) else name


@dataclass(frozen=True)
class TargetNames:
    """The names an MXNet file's arrays may be given.

    ``names``: every structural name of the block (a shared parameter under each of its names).
    ``ordered``: one ``(structural name, Gluon 1.x name or None)`` per distinct parameter, in creation order.
    """

    names: frozenset[str]
    ordered: tuple[tuple[str, str | None], ...]


def map_mxnet_names(arrays: dict[str, np.ndarray], targets: TargetNames, where: str) -> dict[str, np.ndarray]:
    """Rename MXNet's arrays to the block's structural names.

    1. ``arg:``/``aux:`` prefixes (module checkpoints, ``export``) are dropped.
    2. If any name is then a structural name of the block (``targets.names``; Gluon 2, or Gluon 1.x
       ``save_parameters``: ``'features.0.weight'``), names are used as they are.
    3. Otherwise the file holds Gluon 1.x prefixed names (``'dense0_weight'``,
       ``'hybridsequential0_batchnorm0_moving_mean'``), in parameter creation order:
       they are matched to ``targets.ordered`` in order, each name must end
       with ``_`` + the parameter's own name (``moving_mean``/``moving_var`` stand
       for ``running_mean``/``running_var``; a parameter made by Gluon 1.x's ``self.params.get(name)``
       may end with that ``name``, its Gluon 1.x name), and the counts must agree.
    Raises FormatError naming ``where``.
    """
    stripped: dict[str, np.ndarray] = {}
    for name, array in arrays.items():
        key = _strip(name)
        if key in stripped:
            raise FormatError(f"{where}: {key!r} appears twice (with and without an arg:/aux: prefix)")
        stripped[key] = array
    if any(key in targets.names for key in stripped):
        return stripped
    if len(targets.ordered) != len(stripped):
        raise FormatError(f"{where}: the MXNet file holds {len(stripped)} arrays with prefixed names "
                          f"({list(stripped)[:4]}...), the block has {len(targets.ordered)} parameters; prefixed names "
                          "are matched in creation order, so the counts must agree")
    mapped = {}
    for position, ((name, array), (target, gluon1_name)) in enumerate(zip(stripped.items(), targets.ordered)):
        own = target.rsplit(".", 1)[-1]
        aliases = _STATE_ALIASES.get(own, (own,)) + (gluon1_name or own,)
        if not any(name.endswith("_" + alias) or name == alias for alias in aliases):
            raise FormatError(f"{where}: cannot match MXNet name {name!r} (position {position}) to parameter "
                              f"{target!r}: the names are matched in creation order and must end in '_{own}'")
        mapped[target] = array
    return mapped
