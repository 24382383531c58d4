"""Exception types raised by hybrid: every error class of the package is defined here (the modules
that raise them import them from here).

Every error raised while a block runs is located before it reaches the user:
our own errors get the block's path prefixed to their message (``HybridError``
subclasses), any other exception gets a note naming the block.
"""
from __future__ import annotations


class HybridError(Exception):
    """Base class of hybrid's own errors; its message is prefixed with the block path."""


class ShapeError(HybridError, ValueError):
    """An input or parameter has the wrong rank, size or dtype."""


class UninitializedParameterError(HybridError, RuntimeError):
    """A parameter's data was requested before ``initialize()``."""


class DeferredInitializationError(HybridError, RuntimeError):
    """A parameter waits for its shape, which the first forward call fills in."""


class HybridizeError(HybridError, RuntimeError):
    """A block's forward cannot be traced into a graph."""


class AutogradError(HybridError, RuntimeError):
    """``backward`` cannot compute the gradients it was asked for."""


class StaleGradientError(HybridError, RuntimeError):
    """``Trainer.step`` found a gradient not refreshed since the last step."""


class TransformStateError(HybridError, RuntimeError):
    """A block called inside a JAX transformation (``jax.jit``, ``grad``, ``vmap``...) would write state
    (running statistics, an attribute, a random key, a deferred initialisation) that would outlive the
    transformation; ``Block.apply`` is the pure call to use there."""


class GraphError(ValueError):
    """The graph violates an IR invariant (found by :meth:`Graph.verify`)."""


class AssignmentError(ValueError):
    """Two buffers that are live at the same step share bytes (or an offset is invalid)."""


class FormatError(ValueError):
    """A file is not in the expected format, or is truncated, corrupted or forged."""


class RecordIOError(FormatError):
    """A RecordIO file (``.rec``/``.idx``) or a packed record is damaged: the message names the file, the
    record (its position or key) and the byte offset."""


class ExportError(ValueError):
    """A block or graph cannot be written in the requested format (the message says why and what to use)."""


class WorkerError(RuntimeError):
    """A DataLoader worker failed in a way that cannot travel back as an exception of its own: an exception
    pickle cannot rebuild (its type, message and traceback, as text), a sample calling ``sys.exit``, or a
    worker process that died (killed, exited, crashed), named with its exit status and batch."""


class CompileError(HybridizeError):
    """A step function cannot be compiled into one program."""


def locate(exc: BaseException, where: str) -> None:
    """Attach ``where`` (e.g. ``"Conv2D 'features.3'"``) to ``exc`` once."""
    if getattr(exc, "_hybrid_located", False):
        return
    try:
        exc._hybrid_located = True
    except AttributeError:  # exceptions without a __dict__
        return
    if isinstance(exc, HybridError) and exc.args and isinstance(exc.args[0], str):
        exc.args = (f"{where}: {exc.args[0]}",) + exc.args[1:]
    elif hasattr(exc, "add_note"):
        exc.add_note(f"(raised in {where})")
