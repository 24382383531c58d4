"""Visible compilation: a log line for every compile, and a warning for a block that keeps compiling.

Everything goes to Python's ``logging`` under the ``hybrid`` logger:

- INFO ``hybrid.compile``: each trace of a hybridized block and each XLA compile (a hybridized
  block's first call for an input signature, a recorded step's program, a ``hybrid.compile`` step),
  with what was compiled, for which inputs, and the seconds it took;
- WARNING ``hybrid.compile``: a block or compiled step has compiled for more than
  ``recompile_limit`` input signatures (8 unless set), naming it and the shapes seen.

``set_verbosity('INFO')`` shows the INFO lines on stderr; Python's default shows warnings only.
"""
from __future__ import annotations

import logging
import time
from contextlib import contextmanager
from typing import Any, Iterable, Iterator

__all__ = ["set_verbosity", "recompile_limit"]

log = logging.getLogger("hybrid.compile")
_ROOT = logging.getLogger("hybrid")
_settings = {"recompile_limit": 8}


def set_verbosity(level: int | str = "INFO", recompile_limit: int | None = None) -> None:
    """Show hybrid's log lines of ``level`` and above (``'DEBUG'``, ``'INFO'``, ``'WARNING'`` ... or a
    ``logging`` level) on stderr; ``recompile_limit`` changes how many input signatures one block may
    compile for before a warning. Raises ValueError for an unknown level or a limit below 1."""
    if isinstance(level, str):
        name = level.upper()
        if not isinstance(logging.getLevelName(name), int):
            raise ValueError(f"set_verbosity: unknown level {level!r}; "
                             "expected DEBUG, INFO, WARNING, ERROR or CRITICAL")
        level = logging.getLevelName(name)
    _ROOT.setLevel(level)
    if not _ROOT.handlers:
        handler = logging.StreamHandler()
        handler.setFormatter(logging.Formatter("hybrid: %(message)s"))
        _ROOT.addHandler(handler)
    if recompile_limit is not None:
        if isinstance(recompile_limit, bool) or not isinstance(recompile_limit, int) or recompile_limit < 1:
            raise ValueError(f"set_verbosity: recompile_limit must be a positive integer, got {recompile_limit!r}")
        _settings["recompile_limit"] = recompile_limit


def recompile_limit() -> int:
    """How many input signatures one block or compiled step may compile for before a warning."""
    return _settings["recompile_limit"]


def describe(parts: Iterable) -> str:
    """A call signature (``_cached_op.signature``'s parts) as text: ``float32[32,64], 'static'``."""
    out = []
    for part in parts:
        if len(part) == 2:
            shape, dtype = part
            out.append(f"{getattr(dtype, 'name', dtype)}[{','.join(map(str, shape))}]")
        else:
            out.append(repr(part[2]))
    return "(" + ", ".join(out) + ")"


def name_of(owner: Any) -> str:
    """How a log line names a block or a step function."""
    name = getattr(owner, "name", None) or getattr(owner, "__name__", None)
    kind = type(owner).__name__
    return f"{kind} {name!r}" if name and name != kind else kind


@contextmanager
def timed(what: str, signature: str) -> Iterator[None]:
    """Log ``what`` with ``signature`` and the seconds the body took (INFO)."""
    if not log.isEnabledFor(logging.INFO):
        yield
        return
    start = time.perf_counter()
    yield
    log.info("%s for %s in %.2f s", what, signature, time.perf_counter() - start)


def warn_if_recompiling(owner: Any, signatures: list[str]) -> bool:
    """Warn (once: the caller keeps the returned flag) when ``owner`` has compiled for more input
    signatures than the limit; returns whether it warned."""
    if len(signatures) <= _settings["recompile_limit"]:
        return False
    log.warning("%s has compiled for %d different input signatures (the last: %s); each new shape traces and "
                "compiles again. Pad or bucket the inputs to a few shapes (batchify.Pad(round_to=...) rounds "
                "lengths up, or group batches by length), and drop or pad the last partial batch "
                "(DataLoader(..., last_batch='discard')). set_verbosity(recompile_limit=...) moves this warning.",
                name_of(owner), len(signatures), ", ".join(signatures[-4:]))
    return True
