"""Gluon keywords that hybrid accepts but that have no effect here: a warning, once per keyword."""
from __future__ import annotations

import warnings
from typing import Any

_WARNED: set = set()


def ignored_argument(owner: str, name: str, value: Any, why: str) -> None:
    """Warn once per ``owner.name`` that ``name=value`` has no effect, saying ``why``."""
    if (owner, name) in _WARNED:
        return
    _WARNED.add((owner, name))
    warnings.warn(f"{owner}: {name}={value!r} has no effect in hybrid ({why})", UserWarning, stacklevel=3)
