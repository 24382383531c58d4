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
from typing import Any, Iterable, Iterator

import jax
import jax.numpy as jnp

from . import _lazy
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
    skipped and the scale halved, and after ``scale_window`` good steps in a row it doubles."""

    def __init__(self, init_scale: float = 2.0 ** 16, scale_factor: float = 2.0, scale_window: int = 2000,
                 min_scale: float = 1.0):
        if not (init_scale > 0 and scale_factor > 1 and scale_window >= 1 and min_scale > 0):
            raise ValueError("LossScaler: need init_scale > 0, scale_factor > 1, scale_window >= 1, min_scale > 0")
        self.loss_scale = float(init_scale)
        self.scale_factor, self.scale_window, self.min_scale = float(scale_factor), int(scale_window), float(min_scale)
        self.good_steps = 0
        self.pending_scale = 1.0  # the scale the current gradients carry (1 after unscale)
        self.scaled = False  # scale_loss was used since the last step
        self.skipped_steps = 0

    def before_step(self, grads: list) -> float | None:
        """At ``trainer.step``: None when the gradients of a scaled loss overflowed (the step is
        skipped and the scale shrinks), else what the gradients must still be divided by. Reads
        the gradients' finiteness on the host: one wait per scaled step."""
        divisor, scaled = self.pending_scale, self.scaled
        self.pending_scale, self.scaled = 1.0, False
        if not scaled:
            return 1.0
        if not bool(_all_finite([_lazy.concrete(g) for g in grads if g is not None])):
            self.loss_scale = max(self.loss_scale / self.scale_factor, self.min_scale)
            self.good_steps = 0
            self.skipped_steps += 1
            return None
        self.good_steps += 1
        if self.good_steps >= self.scale_window:
            self.loss_scale *= self.scale_factor
            self.good_steps = 0
        return divisor


@jax.jit
def _all_finite(arrays: list) -> Any:
    return jnp.all(jnp.asarray([jnp.all(jnp.isfinite(a)) for a in arrays]))


def init_trainer(trainer: Trainer, init_scale: float = 2.0 ** 16, scale_window: int = 2000) -> None:
    """Give ``trainer`` a dynamic :class:`LossScaler` (for float16; bfloat16 needs none): use
    ``scale_loss`` around ``backward``, and ``trainer.step`` unscales the gradients and skips a step
    whose gradients overflowed. Raises TypeError for anything but a Trainer."""
    if not isinstance(trainer, Trainer):
        raise TypeError(f"amp.init_trainer: expected a hybrid.Trainer, got {type(trainer).__name__}")
    trainer._amp_loss_scaler = LossScaler(init_scale, scale_window=scale_window)


@contextlib.contextmanager
def scale_loss(loss: Any, trainer: Trainer) -> Iterator[Any]:
    """``with amp.scale_loss(loss, trainer) as scaled: autograd.backward(scaled)``: ``loss`` (an
    array or a list, computed inside ``record()``) times the trainer's loss scale, recorded. Raises
    ValueError for a trainer without :func:`init_trainer`."""
    scaler = _scaler(trainer, "amp.scale_loss")
    scale = scaler.loss_scale
    scaler.pending_scale, scaler.scaled = scale, True
    if isinstance(loss, (list, tuple)):
        yield type(loss)(_times(l, scale) for l in loss)
    else:
        yield _times(loss, scale)


def _times(loss: Any, scale: float) -> Any:
    """``loss * scale``, recorded on the loss's recording even outside its ``record()`` scope."""
    if isinstance(loss, _lazy.LazyArray) and not loss._tape.released:
        with _lazy.recording_trace(loss._tape):
            return loss * scale
    return loss * scale


def unscale(trainer: Trainer) -> None:
    """Divide the gradients by the loss scale now (e.g. before clipping them); ``step`` then does
    not divide again. Raises ValueError for a trainer without :func:`init_trainer`."""
    scaler = _scaler(trainer, "amp.unscale")
    if scaler.pending_scale != 1.0:
        inverse = 1.0 / scaler.pending_scale
        for param in trainer._trainable():
            grad = param._grad
            if grad is not None:
                param._assign_grad(grad * jnp.asarray(inverse, grad.dtype), param._grad_fresh)
        scaler.pending_scale = 1.0


def _scaler(trainer: Any, caller: str) -> LossScaler:
    scaler = getattr(trainer, "_amp_loss_scaler", None)
    if scaler is None:
        raise ValueError(f"{caller}: call amp.init_trainer(trainer) first")
    return scaler
