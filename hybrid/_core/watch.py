"""Scoped invalidation: compiled things watch the blocks and parameters they were built from.

A :class:`Watched` object (Block, Parameter) keeps weak references to its watchers (a
block's compiled-call cache, a ``hybrid.compile`` step, a Trainer). A structural change
(a child added, a parameter replaced, ``cast``, a new ``grad_req``, new hybridize options)
calls ``invalidate()`` on exactly those watchers; nothing else is ever invalidated. A change that
leaves every forward as it was (a parameter's ``lr_mult`` or ``wd_mult``) skips the watchers that
cache forwards only (their ``forward_only`` is true).
"""
from __future__ import annotations

import weakref
from typing import Any, Iterable, Protocol

__all__ = ["Watched", "Watchable", "watch"]


class Watched:
    """Mixin: ``_changed()`` invalidates every registered watcher."""

    __slots__ = ()

    def _watchers(self) -> "weakref.WeakSet":
        watchers = self.__dict__.get("_watcher_set")
        if watchers is None:
            watchers = weakref.WeakSet()
            object.__setattr__(self, "_watcher_set", watchers)
        return watchers

    def __getstate__(self) -> dict:
        """The state without the watchers (links to this process's caches, never copied or pickled)."""
        state = dict(self.__dict__)
        state.pop("_watcher_set", None)
        return state

    def _changed(self, forward: bool = True) -> None:
        """Invalidate the watchers; ``forward=False`` when what blocks compute is unchanged."""
        watchers = self.__dict__.get("_watcher_set")
        if watchers:
            for watcher in list(watchers):
                if forward or not getattr(watcher, "forward_only", False):
                    watcher.invalidate()


class Watchable(Protocol):
    """What :func:`watch` needs of an object (a :class:`Watched`), for code that knows it by a protocol."""

    def _watchers(self) -> "weakref.WeakSet": ...


def watch(watcher: Any, objects: Iterable[Watchable]) -> None:
    """Make ``watcher.invalidate()`` run when any of ``objects`` changes."""
    for obj in objects:
        obj._watchers().add(watcher)
