"""``hybrid.amp``: automatic mixed precision, MXNet's ``mxnet.amp`` API.

    amp.init("bfloat16")                 # matrix products and convolutions in bfloat16
    net = ...; trainer = Trainer(...)    # parameters stay float32 (master weights)

Under a policy, ops that gain from low precision (dense, convolution, attention, recurrent
layers) run in the target dtype, softmax and cross-entropy in float32, and the others in their
inputs' dtype; losses compute in float32. Block outputs come out in the target dtype, as in
MXNet. See :mod:`hybrid.graph.precision` for the lists.
"""
from __future__ import annotations

import contextlib
import dataclasses
from typing import Any, Iterable, Iterator

import jax
import jax.numpy as jnp
import numpy as np

from ._core import context as _context, lazy as _lazy, scopes as _scopes
from ._core.cells import LOSS_SCALER, Cell
from .block import HybridBlock
from .graph import precision
from .trainer import Trainer

__all__ = ["init", "convert_hybrid_block", "current_policy", "disable", "init_trainer", "scale_loss", "unscale",
           "LossScaler"]


def _policy(target_dtype: str, target_dtype_ops: Iterable[str] | None, fp32_ops: Iterable[str] | None,
            caller: str) -> precision.Policy:
    if target_dtype not in precision.TARGETS:
        raise ValueError(f"{caller}: target_dtype must be 'float16' or 'bfloat16', got {target_dtype!r}")
    low, high = frozenset(target_dtype_ops or ()), frozenset(fp32_ops or ())
    from .graph import ops
    unknown = sorted((low | high) - set(ops.registered()))
    if unknown:
        raise ValueError(f"{caller}: unknown ops {unknown}; the ops with a precision trait are {ops.registered()}")
    return precision.Policy(target_dtype, low, high)


def init(target_dtype: str = "float16", target_precision_ops: Iterable[str] | None = None,
         conditional_fp32_ops: Any = None, fp32_ops: Iterable[str] | None = None,
         layout_optimization: bool = False) -> None:
    """Turn mixed precision on for every block call from now on (``target_dtype`` ``'float16'`` or
    ``'bfloat16'``). ``target_precision_ops`` / ``fp32_ops`` name big ops (``'dense'``,
    ``'convolution'``, ``'softmax'`` ...) to move into or out of the low-precision list.
    ``conditional_fp32_ops`` and ``layout_optimization`` are accepted for MXNet code (no effect).
    Compiled programs are cached per policy. Raises ValueError for another dtype or unknown ops."""
    precision.set_global(_policy(target_dtype, target_precision_ops, fp32_ops, "amp.init"))


def disable() -> None:
    """Turn the process-wide policy of :func:`init` off (full precision again)."""
    precision.set_global(None)


def current_policy() -> precision.Policy | None:
    """The policy in force, or None."""
    return precision.current()


class _MixedPrecision(HybridBlock):
    """``block`` run under a mixed-precision policy of its own."""

    def __init__(self, block: Any, policy: precision.Policy):
        super().__init__()
        self.block = block
        self._policy = policy

    def forward(self, *args: Any) -> Any:
        with precision.use(self._policy):
            return self.block(*args)


def convert_hybrid_block(block: Any, target_dtype: str = "float16", target_dtype_ops: Iterable[str] | None = None,
                         fp32_ops: Iterable[str] | None = None, conditional_fp32_ops: Any = None,
                         excluded_sym_names: Any = None, device: Any = None, ctx: Any = None,
                         cast_params_offline: bool = False) -> HybridBlock:
    """A block computing as ``block`` does, under its own mixed-precision policy (whatever
    :func:`init` set); it shares ``block``'s parameters, which stay float32. The MXNet keywords
    ``conditional_fp32_ops``, ``excluded_sym_names``, ``device``/``ctx`` and ``cast_params_offline``
    are accepted (no effect). Raises ValueError for another dtype or unknown ops."""
    return _MixedPrecision(block, _policy(target_dtype, target_dtype_ops, fp32_ops, "amp.convert_hybrid_block"))


class LossScaler:
    """Dynamic loss scaling for float16: losses are multiplied by ``loss_scale`` before ``backward``
    so that small gradients do not flush to zero; a step whose gradients overflowed (inf or NaN) is
    skipped and the scale divided by ``scale_factor``, and after ``scale_window`` good steps in a row
    it is multiplied by it (never below ``min_scale``).

    The state (scale, good steps in a row, skipped steps) lives on the device and is updated inside
    the step's program, which also checks the gradients and keeps the old weights and optimizer
    states when they overflowed: no step waits for the host. Reading ``loss_scale``,
    ``good_steps`` or ``skipped_steps`` waits for the last step."""

    def __init__(self, init_scale: float = 2.0 ** 16, scale_factor: float = 2.0, scale_window: int = 2000,
                 min_scale: float = 1.0):
        if not (init_scale > 0 and scale_factor > 1 and scale_window >= 1 and min_scale > 0):
            raise ValueError("LossScaler: need init_scale > 0, scale_factor > 1, scale_window >= 1, min_scale > 0")
        self.scale_factor, self.scale_window, self.min_scale = float(scale_factor), int(scale_window), float(min_scale)
        self._state = tuple(jax.device_put((np.float32(init_scale), np.int32(0), np.int32(0))))
        self.scaled = False  # scale_loss was used since the last step: the step checks for overflow
        self.divide = False  # the gradients still carry the scale: the step divides them by it

    @property
    def loss_scale(self) -> float:
        return float(self._state[0])

    @property
    def good_steps(self) -> int:
        return int(self._state[1])

    @property
    def skipped_steps(self) -> int:
        return int(self._state[2])

    def state(self) -> tuple:
        """(scale float32, good steps int32, skipped steps int32): arrays, or cells of a ``hybrid.compile`` step."""
        return _context.current().store.read_cell(Cell(LOSS_SCALER, self), lambda: self._state)

    def set_state(self, state: tuple) -> None:
        """Replace the state (inside a ``hybrid.compile`` step: after each call)."""
        _context.current().store.write_cell(Cell(LOSS_SCALER, self), lambda: self._state, self._set_state,
                                            tuple(state))

    def _set_state(self, state: tuple) -> None:
        self._state = tuple(state)

    def state_dict(self) -> dict:
        """``{'loss_scale': float, 'good_steps': int, 'skipped_steps': int}`` (saved with the trainer's states)."""
        return {"loss_scale": self.loss_scale, "good_steps": self.good_steps, "skipped_steps": self.skipped_steps}

    def load_state_dict(self, values: dict) -> None:
        """Restore what :meth:`state_dict` gave. Raises ValueError (nothing changed) for anything else."""
        self._set_state(self.checked_state(values, "LossScaler.load_state_dict"))

    @staticmethod
    def checked_state(values: Any, where: str) -> tuple:
        """The state arrays of a :meth:`state_dict`; ValueError naming ``where`` when it is not one."""
        ok = (isinstance(values, dict) and set(values) == {"loss_scale", "good_steps", "skipped_steps"}
              and isinstance(values["loss_scale"], (int, float)) and not isinstance(values["loss_scale"], bool)
              and np.isfinite(values["loss_scale"]) and values["loss_scale"] > 0
              and all(type(values[k]) is int and 0 <= values[k] < 2 ** 31 for k in ("good_steps", "skipped_steps")))
        if not ok:
            raise ValueError(f"{where}: not a loss scaler state (expected loss_scale > 0, good_steps and "
                             f"skipped_steps as counts), got {values!r:.120}")
        return tuple(jax.device_put((np.float32(values["loss_scale"]), np.int32(values["good_steps"]),
                                     np.int32(values["skipped_steps"]))))

    def begin_step(self) -> "OverflowGuard | None":
        """At ``trainer.step``: how the update must treat the gradients (None when no loss was scaled
        since the last step); resets the flags for the next step."""
        if not self.scaled:
            return None
        guard = OverflowGuard(self.divide, self.scale_factor, self.scale_window, self.min_scale)
        self.scaled = self.divide = False
        return guard


@dataclasses.dataclass(frozen=True)
class OverflowGuard:
    """The in-program part of loss scaling, for one step's update (hashable: part of its cache key)."""

    divide: bool
    scale_factor: float
    scale_window: int
    min_scale: float

    def run(self, update: Any, weights: list, grads: list, states: list, lr: Any, rescale: Any,
            scaler_state: tuple) -> tuple:
        """``update(weights, grads, states, lr, rescale) -> (weights, states)`` when every gradient
        is finite, else the old weights and states; with the new scaler state. A conditional
        rather than a select, so that XLA updates the donated buffers in place."""
        finite = jnp.all(jnp.stack([jnp.all(jnp.isfinite(g)) for g in grads]))
        if self.divide:
            rescale = rescale / scaler_state[0]
        new_weights, new_states = jax.lax.cond(
            finite, update, lambda w, g, s, lr, r: (list(w), [tuple(leaves) for leaves in s]),
            weights, grads, states, lr, rescale)
        return new_weights, new_states, self._advance(finite, scaler_state)

    def _advance(self, finite: jax.Array, state: tuple) -> tuple:
        """The scaler state after a step with (``finite``) or without finite gradients."""
        scale, good, skipped = state
        good = good + 1
        grow = good >= self.scale_window
        grown = jnp.where(grow, scale * self.scale_factor, scale)
        shrunk = jnp.maximum(scale / self.scale_factor, self.min_scale)
        return (jnp.where(finite, grown, shrunk).astype(jnp.float32),
                jnp.where(finite & ~grow, good, 0).astype(jnp.int32),
                (skipped + jnp.where(finite, 0, 1)).astype(jnp.int32))


def init_trainer(trainer: Trainer, init_scale: float = 2.0 ** 16, scale_window: int = 2000) -> None:
    """Give ``trainer`` a dynamic :class:`LossScaler` (for float16; bfloat16 needs none): use
    ``scale_loss`` around ``backward``, and ``trainer.step`` unscales the gradients and skips a step
    whose gradients overflowed. Raises TypeError for anything but a Trainer."""
    if not isinstance(trainer, Trainer):
        raise TypeError(f"amp.init_trainer: expected a hybrid.Trainer, got {type(trainer).__name__}")
    trainer.loss_scaler = LossScaler(init_scale, scale_window=scale_window)


@contextlib.contextmanager
def scale_loss(loss: Any, trainer: Trainer) -> Iterator[Any]:
    """``with amp.scale_loss(loss, trainer) as scaled: autograd.backward(scaled)``: ``loss`` (an
    array or a list, computed inside ``record()``) times the trainer's loss scale, recorded (float32
    when ``loss`` has a lower precision). Raises ValueError for a trainer without :func:`init_trainer`."""
    scaler = _scaler(trainer, "amp.scale_loss")
    scale = scaler.state()[0]
    scaler.scaled = scaler.divide = True
    if isinstance(loss, (list, tuple)):
        yield type(loss)(_recorded(lambda value: value * scale, part) for part in loss)
    else:
        yield _recorded(lambda value: value * scale, loss)


def _recorded(fn: Any, value: Any) -> Any:
    """``fn(value)``, recorded on ``value``'s recording even outside its ``record()`` scope."""
    if isinstance(value, _lazy.LazyArray) and not value._tape.released:
        with _scopes.recording_on(value._tape):
            return fn(value)
    return fn(value)


def unscale(trainer: Trainer) -> None:
    """Divide the gradients by the loss scale now (e.g. before clipping them); ``step`` then does
    not divide again, and still skips the step if they overflowed. Raises ValueError for a trainer
    without :func:`init_trainer`."""
    scaler = _scaler(trainer, "amp.unscale")
    if scaler.divide:
        inverse = 1.0 / scaler.state()[0]
        for param in trainer.trainable_params():
            param.scale_grad(lambda g: _recorded(lambda g: g * inverse.astype(g.dtype), g))
        scaler.divide = False


def _scaler(trainer: Any, caller: str) -> LossScaler:
    scaler = getattr(trainer, "loss_scaler", None)
    if scaler is None:
        raise ValueError(f"{caller}: call amp.init_trainer(trainer) first")
    return scaler
