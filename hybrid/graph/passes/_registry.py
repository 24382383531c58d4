"""The registry of graph passes: ``register_pass`` and ``PASSES`` (each pass module registers itself)."""
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
