"""Graph passes: each module registers one pass, ``pass(graph, target) -> (graph, stats dict)``, under the
name of its module and function.

A pass declares the passes it must follow (``requires``, when both are in a pipeline) and whether it
must be the last one (``last``); the pipeline checks the order. A pass that leaves dead nodes behind
reports how many nodes it rewrote away as ``nodes_removed`` in its statistics, and the pipeline then
runs dead-code elimination after it: passes do not clean up after themselves.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from ..ir import Graph

PassFn = Callable[..., "tuple[Graph, dict]"]


@dataclass(frozen=True)
class PassInfo:
    """A registered pass: its function and its place constraints."""

    name: str
    fn: PassFn
    requires: tuple[str, ...] = ()
    last: bool = False


PASSES: dict[str, PassInfo] = {}


def register_pass(name: str, requires: tuple[str, ...] = (), last: bool = False) -> Callable[[PassFn], PassFn]:
    """Register ``fn`` as pass ``name`` for ``hybridize(passes=[...])``; ``requires``: passes that must run
    before it when they are in the same pipeline; ``last``: nothing may run after it."""
    def deco(fn: PassFn) -> PassFn:
        if fn.__name__ != name:
            raise ValueError(f"pass {name!r}: its function is named {fn.__name__!r}; a pass has one name")
        PASSES[name] = PassInfo(name, fn, tuple(requires), last)
        return fn
    return deco


from . import attention, bn_fold, cse, dce, fold, fuse, horizontal_fusion, layout, recognize, simplify  # noqa: E402,F401,E501
from . import softmax_ce  # noqa: E402,F401
