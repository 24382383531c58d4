"""What the modes and state stores call on the objects they are given.

A mode or store (:mod:`hybrid._core.modes`, :mod:`hybrid._core.functional`) acts on a parameter, a
block, a block's compiled calls, a trainer or a ``backward``'s gradients through their own methods.
These protocols name those methods, so that the modes and stores say what they expect of those
objects without importing ``hybrid.parameter``, ``hybrid.block``, ``hybrid.trainer`` or ``hybrid.autograd``.
"""
from __future__ import annotations

from typing import Any, Callable, Protocol, Sequence, runtime_checkable

from .cells import Cell
from .watch import Watchable

__all__ = ["GradFlags", "StoredParam", "GradParam",
           "BlockCall", "CompiledCall", "GradWrite", "UpdateTarget", "StateStore",
           "StepStore"]


class GradFlags(Protocol):
    """A parameter's gradient state (``hybrid.parameter.GradState``), as far as freshness goes."""

    fresh: bool


@runtime_checkable
class StoredParam(Protocol):
    """A parameter (``hybrid.parameter.Parameter``) as the modes read and write it."""

    @property
    def grad_state(self) -> GradFlags: ...

    @property
    def name(self) -> str | None: ...

    @property
    def own_data(self) -> Any:
        """The array the parameter holds itself, or None."""

    @property
    def is_initialized(self) -> bool: ...

    def no_data_error(self) -> Exception:
        """The error to raise while the parameter holds no data."""

    def store_data(self, value: Any) -> None:
        """``set_data`` outside frames."""

    def assign_data(self, value: Any) -> None:
        """Replace the data by a computed array of the same shape and dtype."""


@runtime_checkable
class GradParam(Protocol):
    """A parameter (``hybrid.parameter.Parameter``) as the backward engine gives it its gradient. The two
    static methods take all the parameters of one ``backward`` at once."""

    @property
    def grad_state(self) -> Any: ...

    @staticmethod
    def grad_reqs(params: Sequence[Any]) -> list[str]: ...

    @staticmethod
    def set_grads(params: Sequence[Any], grads: Sequence) -> None: ...

    def accumulate_grad(self, grad: Any) -> Any: ...


@runtime_checkable
class CompiledCall(Protocol):
    """A block's compiled calls (``hybrid._core.cached_op.CachedOp``), run as the current mode says.
    ``entry`` is the op's own compiled forward for the call's signature, ``mode`` and ``frame`` the
    mode that runs it (a ``RecordingMode``, a ``Frame``)."""

    def __call__(self, packed: tuple, /) -> Any: ...

    def init_deferred(self, args: tuple) -> None:
        """Initialise, concretely, the parameters whose shapes wait for ``args``."""

    def _run_eager(self, entry: Any, arrays: list) -> Any: ...

    def _run_recorded(self, entry: Any, arrays: list, mode: Any) -> Any: ...

    def _call_in_frame(self, entry: Any, arrays: list, frame: Any) -> Any: ...


@runtime_checkable
class BlockCall(Watchable, Protocol):
    """A block (``hybrid.block.Block``) as the modes call it; a compiled step being traced watches the
    blocks it calls (:meth:`StateStore.depends_on`)."""

    _active: bool  # hybridized

    def _uses_compiled(self) -> bool:
        """Whether a call outside frames runs the compiled forward."""

    def _compiled_op(self) -> CompiledCall: ...

    def _get_cached_op(self) -> CompiledCall: ...

    def _run_python(self, args: tuple, kwargs: dict) -> Any: ...

    def _run_forward(self, packed: tuple) -> Any: ...

    def _call_in_transform(self, args: tuple, kwargs: dict) -> Any:
        """A call inside a JAX transformation without ``apply``."""

    def _traced_attribute_error(self, name: str) -> Exception: ...


@runtime_checkable
class GradWrite(Protocol):
    """The gradients of one ``backward`` (``hybrid.autograd._GradWrite``), stored as the state store says."""

    def outside(self) -> None:
        """On the parameters."""

    def in_step(self, frame: StepStore) -> None:
        """As cells of the compiled step ``frame``."""


@runtime_checkable
class UpdateTarget(Protocol):
    """A trainer (``hybrid.trainer.Trainer``) whose optimizer update the state store applies.
    ``program`` is the trainer's own update program; ``rescale`` its gradient scale."""

    def update_now(self, program: Any, active: list, rescale: Any) -> None: ...

    def update_in_trace(self, frame: StepStore, program: Any, active: list, rescale: Any) -> None: ...


@runtime_checkable
class StateStore(Protocol):
    """Who owns state writes in a context (``Context.store``): the eager store (state lives on its
    objects) or the compiled step being traced (state is cells: inputs and outputs of the step)."""

    def read_cell(self, cell: Cell, getter: Callable[[], Any], outside: Callable[[], Any] | None = None) -> Any:
        """The value of ``cell``: ``getter()``, or ``outside()`` when given (how it is read outside a
        compiled step, where ``getter`` is the step's input)."""

    def write_cell(self, cell: Cell, getter: Callable[[], Any], setter: Callable[[Any], None], value: Any) -> None:
        """Set ``cell`` to ``value`` (``setter(value)``; in a compiled step, after every call)."""

    def fresh_grads(self, params: Sequence[StoredParam]) -> Sequence[StoredParam]:
        """Those of ``params`` whose gradient ``backward`` wrote since their last optimizer step."""

    def set_grad_fresh(self, param: StoredParam, fresh: bool) -> None:
        """Mark ``param``'s gradient fresh (written by backward) or consumed (by an optimizer step)."""

    def store_grads(self, write: GradWrite) -> None:
        """Store the gradients of a ``backward``."""

    def apply_update(self, trainer: UpdateTarget, program: Any, active: list, rescale: Any) -> None:
        """``trainer``'s optimizer update of ``active``."""

    def host_call(self, fn: Callable, *args: Any) -> bool:
        """Schedule ``fn(*args)`` on the host with a compiled step's concrete values and return True;
        False: the caller runs it now."""

    def depends_on(self, watched: Watchable) -> None:
        """The compiled step depends on ``watched`` (a block, an optimizer): its change compiles it again;
        nothing outside a step."""


@runtime_checkable
class StepStore(StateStore, Protocol):
    """The store of a compiled step being traced (``hybrid._core.functional.CompileFrame``), as the
    callbacks it makes see it."""

    def host_input(self, key: Cell, compute: Callable[[], Any], shape: tuple, dtype: Any) -> Any:
        """A value computed on the host by ``compute()`` before each call, as an input of the step."""
