"""``nd.save`` / ``nd.load``: MXNet's binary NDArray list format, written and read without MXNet."""
from __future__ import annotations

import os
import struct
from typing import Any, Mapping, Sequence

import numpy as np

from ..formats.mxnet_params import LIST_MAGIC, is_mxnet_params, parse_mxnet_params
from ..formats.serialization import FormatError, atomic_write, read_limited

__all__ = ["save", "load"]

_V2 = 0xF993FAC9
_FLAGS = {"float32": 0, "float64": 1, "float16": 2, "uint8": 3, "int32": 4, "int8": 5, "int64": 6, "bool": 7,
          "int16": 8, "uint16": 9, "uint32": 10, "uint64": 11, "bfloat16": 12}


def _encode(names: Sequence[str], arrays: Sequence[Any], where: str) -> bytes:
    parts = [struct.pack("<QQQ", LIST_MAGIC, 0, len(arrays))]
    for i, value in enumerate(arrays):
        array = np.asarray(value)
        flag = _FLAGS.get(array.dtype.name)
        if flag is None:
            raise TypeError(f"{where}: array #{i} has dtype {array.dtype}, which MXNet files cannot hold "
                            f"({', '.join(_FLAGS)})")
        if array.ndim == 0:
            array = array.reshape(1)  # rank 0 means 'none' in MXNet's format; MXNet saves scalars as (1,)
        parts.append(struct.pack(f"<IiI{array.ndim}q", _V2, 0, array.ndim, *array.shape))
        parts.append(struct.pack("<iii", 1, 0, flag))
        parts.append(np.ascontiguousarray(array).astype(array.dtype.newbyteorder("<")).tobytes())
    parts.append(struct.pack("<Q", len(names)))
    for name in names:
        raw = name.encode("utf-8")
        parts.append(struct.pack("<Q", len(raw)) + raw)
    return b"".join(parts)


def save(fname: str | os.PathLike, data: Any) -> None:
    """Write an array, a list of arrays or a ``{name: array}`` dict in MXNet's ``.params`` format.

    MXNet's ``mx.nd.load`` reads the file. Raises TypeError for other values or keys that are not strings.
    """
    where = f"nd.save({os.fspath(fname)!r})"
    if isinstance(data, Mapping):
        if not all(isinstance(k, str) for k in data):
            raise TypeError(f"{where}: dict keys must be strings")
        names, arrays = list(data), list(data.values())
    elif isinstance(data, (list, tuple)):
        names, arrays = [], list(data)
    elif hasattr(data, "shape") and hasattr(data, "dtype"):
        names, arrays = [], [data]
    else:
        raise TypeError(f"{where}: expected an array, a list of arrays or a dict of them, got "
                        f"{type(data).__name__}")
    payload = _encode(names, arrays, where)
    atomic_write(fname, lambda f: f.write(payload))


def _parse_list(data: bytes, where: str) -> list[np.ndarray]:
    # An unnamed list: append empty names so the named parser can read it, then drop them.
    (count,) = struct.unpack_from("<Q", data, 16)
    if len(data) >= 8 and struct.unpack_from("<Q", data, len(data) - 8)[0] == 0:
        named = data[:-8] + struct.pack("<Q", count) + b"".join(
            struct.pack("<Q", len(str(i))) + str(i).encode() for i in range(count))
        return list(parse_mxnet_params(named, where).values())
    raise FormatError(f"{where}: not an unnamed MXNet array list")


def load(fname: str | os.PathLike) -> dict[str, Any] | list[Any]:
    """Read an MXNet ``.params``/NDArray file (as ``mx.nd.save`` or ``save_parameters`` wrote it).

    Returns ``{name: jax.Array}`` for a named file, else a list. Raises FormatError for other content.
    """
    import jax.numpy as jnp
    where = f"nd.load({os.fspath(fname)!r})"
    data = read_limited(fname, "MXNet NDArray file")
    if not is_mxnet_params(data[:8]):
        raise FormatError(f"{where}: not an MXNet NDArray file (hybrid's own .npz/.safetensors parameter files "
                          "load with net.load_parameters)")
    try:
        arrays = parse_mxnet_params(data, where)
    except FormatError:
        return [jnp.asarray(a) for a in _parse_list(data, where)]
    return {name: jnp.asarray(a) for name, a in arrays.items()}
