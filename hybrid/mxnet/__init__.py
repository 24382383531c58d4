"""MXNet's module layout over hybrid, for model code written against MXNet 1.x.

    import hybrid.mxnet as mx
    from hybrid.mxnet import nd, sym, init, autograd
    from hybrid.mxnet.gluon import nn

``hybrid.mxnet.install()`` makes ``import mxnet`` (and ``mxnet.gluon``, ``mxnet.gluon.nn``, ...) resolve to
this package; ``uninstall()`` undoes it. The submodules load on first use, so that importing the operator
table (``hybrid.mxnet.ops``) costs nothing more.
``mx.nd`` and ``mx.np`` arrays are mutable handles over JAX values (:mod:`hybrid.mxnet.handle`): in-place
writes, ``attach_grad`` and ``.grad`` work as in MXNet, and blocks called with them return them.
"""
from __future__ import annotations

import importlib
from typing import Any

__version__ = "1.9.1"

# attribute -> submodule of hybrid.mxnet that serves it
_SUBMODULES = {
    "nd": "ndarray", "ndarray": "ndarray", "sym": "symbol", "symbol": "symbol", "gluon": "gluon",
    "init": "initializer", "initializer": "initializer", "autograd": "autograd", "context": "context",
    "random": "random", "base": "base", "metric": "metric", "optimizer": "optimizer",
    "lr_scheduler": "lr_scheduler", "ops": "ops", "operator": "operator", "array_methods": "array_methods",
    "recordio": "recordio", "np": "numpy", "numpy": "numpy", "npx": "numpy_extension",
    "numpy_extension": "numpy_extension", "handle": "handle", "image": "image", "io": "io",
    "kv": "kvstore", "kvstore": "kvstore", "profiler": "profiler", "test_utils": "test_utils",
    "contrib": "contrib", "util": "util",
}
# attribute -> (submodule, name in it)
_NAMES = {
    "cpu": ("context", "cpu"), "gpu": ("context", "gpu"), "Context": ("context", "Context"),
    "current_context": ("context", "current_context"), "num_gpus": ("context", "num_gpus"),
    "MXNetError": ("base", "MXNetError"), "install": ("install", "install"),
    "uninstall": ("install", "uninstall"), "is_installed": ("install", "is_installed"),
}

__all__ = sorted(set(_SUBMODULES) | set(_NAMES))


def __getattr__(name: str) -> Any:
    if name in _SUBMODULES:
        module = importlib.import_module(f"{__name__}.{_SUBMODULES[name]}")
        globals()[name] = module
        return module
    if name in _NAMES:
        module_name, attribute = _NAMES[name]
        value = getattr(importlib.import_module(f"{__name__}.{module_name}"), attribute)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'hybrid.mxnet' has no attribute {name!r}: the MXNet surface covers "
                         f"{', '.join(__all__)} (see docs/mxnet-alias.md)")


def __dir__() -> list[str]:
    return __all__ + ["__version__"]
