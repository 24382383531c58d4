"""Parameter files: hybrid's ``.npz`` format or ``.safetensors`` (chosen by the extension when writing),
and MXNet's ``.params`` format (read always, written where :func:`set_write_format` asks for it); formats
are detected by content when reading."""
from __future__ import annotations

import os
from typing import Any, Callable, Mapping

import numpy as np

from .serialization import FormatError, atomic_write, parse_npz, read_limited, save_arrays
from .mxnet_params import TargetNames, encode_mxnet_params, is_mxnet_params, map_mxnet_names, parse_mxnet_params
from .safetensors_file import is_safetensors_path, looks_like_safetensors, parse_safetensors, save_safetensors

__all__ = ["load_parameter_file", "save_parameter_arrays", "set_write_format", "write_format"]

_WRITE_FORMATS = ("npz", "mxnet")
_write_format = ["npz"]


def set_write_format(name: str) -> str:
    """Choose the format of parameter files not named ``.safetensors``: ``'npz'`` (hybrid's, the default)
    or ``'mxnet'`` (MXNet's ``.params`` format, which MXNet's ``load_parameters`` and ``nd.load`` read).
    Returns the previous choice. Raises ValueError for another name."""
    if name not in _WRITE_FORMATS:
        raise ValueError(f"parameter file format must be one of {_WRITE_FORMATS}, got {name!r}")
    previous, _write_format[0] = _write_format[0], name
    return previous


def write_format() -> str:
    """The format :func:`save_parameter_arrays` writes for names other than ``.safetensors``."""
    return _write_format[0]


def save_parameter_arrays(path: str | os.PathLike, arrays: Mapping[str, Any], fmt: str | None = None) -> None:
    """Write ``{name: array}`` atomically: a ``.safetensors`` file when ``path`` ends so, else in the format
    ``fmt`` (``'npz'`` or ``'mxnet'``; None: :func:`write_format`, ``.npz`` unless set otherwise). Raises
    TypeError for a dtype MXNet's format cannot hold when writing it, ValueError for another ``fmt``."""
    if fmt is not None and fmt not in _WRITE_FORMATS:
        raise ValueError(f"parameter file format must be one of {_WRITE_FORMATS}, got {fmt!r}")
    if is_safetensors_path(path):
        save_safetensors(path, arrays)
    elif (fmt or _write_format[0]) == "mxnet":
        payload = encode_mxnet_params(list(arrays), list(arrays.values()), f"parameter file {os.fspath(path)!r}")
        atomic_write(path, lambda f: f.write(payload))
    else:
        save_arrays(path, arrays)


def load_parameter_file(path: str | os.PathLike, targets: TargetNames | None = None,
                        check: Callable[[dict[str, tuple]], None] | None = None,
                        data: bytes | None = None) -> dict[str, np.ndarray]:
    """``{name: array}`` from ``path``.

    hybrid ``.npz`` and ``.safetensors`` files are read as they are. MXNet files are renamed to the
    structural names of ``targets`` (a block's parameter names) by the rules of
    :func:`hybrid.formats.mxnet_params.map_mxnet_names`. ``check({name: (shape, dtype)})``
    may refuse the file (by raising) before the arrays of an ``.npz`` are decompressed. ``data``,
    the file's bytes when the caller has read them already.
    Raises FileNotFoundError, or FormatError (a ValueError) naming the file and the problem.
    """
    path = os.fspath(path)
    if data is None:
        data = read_limited(path, "parameter file")
    if data[:4] == b"PK\x03\x04":
        return parse_npz(data, path, check)
    if looks_like_safetensors(data):
        return parse_safetensors(data, path, check)
    if is_mxnet_params(data[:8]):
        arrays = parse_mxnet_params(data, f"parameter file {path!r}")
        if targets is not None:
            arrays = map_mxnet_names(arrays, targets, f"parameter file {path!r}")
        if check is not None:
            check({name: (a.shape, a.dtype) for name, a in arrays.items()})
        return arrays
    raise FormatError(f"{path!r} is not a hybrid parameter file (expected an .npz archive, a .safetensors "
                      "file or an MXNet .params file)")
