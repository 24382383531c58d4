"""Graph passes: each module registers one ``Graph -> (Graph, stats dict)`` function."""
from __future__ import annotations

from typing import Callable

from ..ir import Graph

PassFn = Callable[[Graph], "tuple[Graph, dict]"]
PASSES: dict[str, PassFn] = {}


def register_pass(name: str) -> Callable[[PassFn], PassFn]:
    """Register ``fn`` under ``name`` for ``hybridize(passes=[...])``."""
    def deco(fn: PassFn) -> PassFn:
        PASSES[name] = fn
        return fn
    return deco


from . import attention, bn_fold, cse, dce, fold, fuse, horizontal, layout, recognize, simplify, softmax_ce  # noqa: E402,F401,E501
