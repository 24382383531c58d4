"""``nd.save`` / ``nd.load``: MXNet's binary NDArray list format, written and read without MXNet."""
from __future__ import annotations

import os
import struct
from typing import Any, Mapping

import numpy as np

from ..formats.mxnet_params import encode_mxnet_params, is_mxnet_params, parse_mxnet_params
from ..formats.serialization import FormatError, atomic_write, read_limited

__all__ = ["save", "load"]

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
    payload = encode_mxnet_params(names, arrays, where)
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
