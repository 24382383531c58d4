"""Exchanging models, parameters and arrays with other frameworks.

``hybrid.interop.torch``: PyTorch ``state_dict``s in hybrid networks (torch is an optional extra and is
imported only when used). Foreign inputs (PyTorch tensors, lists of numbers) are converted at a block's
call by ``hybrid._compiled.inputs``, below the blocks.
"""
from __future__ import annotations

import importlib
from typing import Any

__all__ = ["torch"]


def __getattr__(name: str) -> Any:
    # submodules load on first use, so that `import hybrid` imports none of the frameworks they bridge to
    if name in __all__:
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
