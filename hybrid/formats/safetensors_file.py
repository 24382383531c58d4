"""``.safetensors`` files, through the ``safetensors`` package (``pip install hybrid[safetensors]``).

Arrays are stored under their structural names (``features.0.weight``), so
``safetensors.numpy.load_file`` and PyTorch's ``safetensors.torch.load_file`` read them as they are.
"""
from __future__ import annotations

import os
from typing import Any, Callable, Mapping

import numpy as np
from jax import numpy as jnp

from .serialization import FormatError, atomic_write

__all__ = ["is_safetensors_path", "looks_like_safetensors", "encode_safetensors", "parse_safetensors"]

_DTYPES = {"F64": np.float64, "F32": np.float32, "F16": np.float16, "BF16": jnp.bfloat16, "I64": np.int64,
           "I32": np.int32, "I16": np.int16, "I8": np.int8, "U64": np.uint64, "U32": np.uint32,
           "U16": np.uint16, "U8": np.uint8, "BOOL": np.bool_}


def _library() -> Any:
    try:
        import safetensors
        import safetensors.numpy
    except ImportError as exc:
        raise ImportError("reading and writing .safetensors files needs the safetensors package: "
                          "pip install 'hybrid[safetensors]'") from exc
    return safetensors


def is_safetensors_path(path: str | os.PathLike) -> bool:
    """Whether ``path`` names a ``.safetensors`` file by its extension."""
    return os.fspath(path).lower().endswith(".safetensors")


def looks_like_safetensors(data: bytes) -> bool:
    """Whether ``data`` starts as a safetensors file does: an 8-byte header length, then a JSON object."""
    if len(data) < 10:
        return False
    size = int.from_bytes(data[:8], "little")
    return 2 <= size <= len(data) - 8 and data[8:9] == b"{"


def encode_safetensors(arrays: Mapping[str, Any]) -> bytes:
    """The bytes of a safetensors file holding ``{name: array}``."""
    library = _library()
    return library.numpy.save({name: np.ascontiguousarray(np.asarray(a)) for name, a in arrays.items()},
                              metadata={"format": "np"})


def save_safetensors(path: str | os.PathLike, arrays: Mapping[str, Any]) -> None:
    """Write ``{name: array}`` to ``path`` as a safetensors file, atomically."""
    data = encode_safetensors(arrays)
    atomic_write(path, lambda handle: handle.write(data))


def parse_safetensors(data: bytes, path: str,
                      check: Callable[[dict[str, tuple]], None] | None = None) -> dict[str, np.ndarray]:
    """``{name: array}`` from the bytes of a safetensors file; ``check({name: (shape, dtype)})`` may refuse
    it before the arrays are built. Raises FormatError naming ``path`` for a malformed file."""
    library = _library()
    try:
        entries = library.deserialize(data)
    except library.SafetensorError as exc:
        raise FormatError(f"{path!r} is not a valid safetensors file: {exc}") from exc
    declared = {}
    for name, entry in entries:
        dtype = _DTYPES.get(entry["dtype"])
        if dtype is None:
            raise FormatError(f"{path!r}: tensor {name!r} has dtype {entry['dtype']}, which hybrid does not read")
        declared[name] = (tuple(entry["shape"]), np.dtype(dtype))
    if check is not None:
        check(declared)
    return {name: np.frombuffer(entry["data"], declared[name][1]).reshape(declared[name][0])
            for name, entry in entries}
