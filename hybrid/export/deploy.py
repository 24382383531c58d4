"""Deployment export through ``jax.export``: serialised StableHLO that runs with only ``jax`` installed.

``export_deployment(net, "net.jaxexport", x)`` writes the predict-mode forward,
parameters embedded as constants, to ``net.jaxexport`` and its SHA-256 to
``net.jaxexport.sha256`` (``sha256sum -c`` format). Anywhere with jax::

    exported = jax.export.deserialize(bytearray(open("net.jaxexport", "rb").read()))
    y = exported.call(x)
"""
from __future__ import annotations

import os
from typing import Any, Callable, Sequence

import jax

from .. import autograd, functional
from ..serialization import FormatError, atomic_write, read_limited
from .jsonfile import sha256_hex

__all__ = ["export_deployment", "load_deployment"]


def export_deployment(block: Any, path: str | os.PathLike, *example_inputs: Any, dynamic_batch: bool = False,
                      platforms: Sequence[str] | None = None) -> str:
    """Serialise ``block``'s predict-mode forward for inputs shaped like ``example_inputs``.

    With ``dynamic_batch`` the leading axis of every input is the symbolic dimension
    ``b`` (any batch size at run time). ``platforms`` (e.g. ``('cpu', 'cuda')``)
    defaults to the current backend. Returns ``path``. Raises RuntimeError for
    uninitialised parameters; JAX's errors for code that cannot take a symbolic batch.
    """
    params = block._unique_params()
    uninitialised = [p.name for p in params if p._data is None]
    if uninitialised:
        raise RuntimeError(f"export_deployment: parameters {uninitialised[:5]} are not initialised; initialise the "
                           "block and call it once first")
    values = {p: p._data for p in params}

    def forward(*inputs: Any) -> Any:
        with functional.frame(values, frame_type=functional.TraceFrame):
            return block(*inputs)

    batch = jax.export.symbolic_shape("b") if dynamic_batch else None
    specs = []
    for x in example_inputs:
        shape = tuple(x.shape)
        if batch is not None:
            if not shape:
                raise ValueError("export_deployment: dynamic_batch needs inputs with a leading batch axis")
            shape = batch + shape[1:]
        specs.append(jax.ShapeDtypeStruct(shape, x.dtype))
    with autograd.pause():
        exported = jax.export.export(jax.jit(forward), platforms=platforms)(*specs)
    try:
        data = bytes(exported.serialize())
    except ImportError as exc:
        raise ImportError(f"export_deployment needs the 'flatbuffers' package (pip install 'hybrid[deploy]'): "
                          f"{exc}") from exc
    path = os.fspath(path)
    atomic_write(path, lambda handle: handle.write(data))
    line = f"{sha256_hex(data)}  {os.path.basename(path)}\n"
    atomic_write(path + ".sha256", lambda handle: handle.write(line.encode()))
    return path


def load_deployment(path: str | os.PathLike) -> Callable:
    """The exported function (``jax.export.Exported.call``) after checking the ``.sha256`` file.

    Raises FileNotFoundError, or FormatError when the checksum does not match or the
    file is not a serialised export.
    """
    path = os.fspath(path)
    data = read_limited(path, "deployment file")
    recorded = read_limited(path + ".sha256", "checksum file", max_bytes=4096).decode("ascii", "replace").split()
    if not recorded or recorded[0] != sha256_hex(data):
        raise FormatError(f"deployment file {path!r} does not match its checksum in {path + '.sha256'!r}")
    try:
        exported = jax.export.deserialize(bytearray(data))
    except Exception as exc:  # the checksum matched, so this is a file from another tool or version
        raise FormatError(f"deployment file {path!r} is not a serialised jax.export: {exc}") from None
    return exported.call
