"""Optimizer base class and registry.

An optimizer describes the math of one parameter's update as a pure function,
``update_rule(weight, grad, state, lr, wd) -> (new_weight, new_state)``; the
Trainer traces it for all parameters into one compiled program.
"""
from __future__ import annotations

import math
from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np

from .._core.watch import Watched

__all__ = ["Optimizer", "register", "create"]

_REGISTRY: dict[str, type] = {}


def register(cls: type) -> type:
    """Register an Optimizer subclass under its lower-case class name."""
    _REGISTRY[cls.__name__.lower()] = cls
    return cls


# MXNet 1.9.1's registered optimizers that hybrid leaves out, and what to use instead
_NOT_PROVIDED = {
    "lars": "its layer-wise rate needs each parameter's name; use 'lamb', or optax.lars through "
            "Trainer(params, optax.lars(...))",
    "lbsgd": "use 'sgd' with an lr_scheduler for the warm-up (hybrid.lr_scheduler), or 'lamb'",
    "sgld": "its update draws noise; write the step with hybrid.random, or use optax.noisy_sgd",
    "groupadagrad": "use 'adagrad' (per element), or optax.adagrad",
    "test": "it is MXNet's optimizer for its own tests (weight += rescale_grad * grad)",
}


def create(name: Any, **kwargs: Any) -> "Optimizer":
    """Instantiate a registered optimizer by name (``'sgd'``, ``'adam'``, ...), or wrap an
    optax ``GradientTransformation`` in :class:`~hybrid.optimizer.Optax`."""
    if not isinstance(name, str) and callable(getattr(name, "init", None)) and callable(getattr(name, "update", None)):
        return _REGISTRY["optax"](name, **kwargs)
    cls = _REGISTRY.get(name.lower()) if isinstance(name, str) else None
    if cls is None and isinstance(name, str) and name.lower() in _NOT_PROVIDED:
        raise ValueError(f"optimizer {name!r} (MXNet's) is not provided by hybrid: {_NOT_PROVIDED[name.lower()]}")
    if cls is None:
        raise ValueError(f"unknown optimizer {name!r}; available: {sorted(_REGISTRY)}")
    return cls(**kwargs)


def _finite(optimizer: Any, name: str, value: Any, minimum: float | None = None) -> float:
    """``value`` as a float; TypeError for a non-number (a string, say), ValueError for NaN, infinity or a
    value below ``minimum``, naming the optimizer and the hyperparameter."""
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise TypeError(f"{type(optimizer).__name__}: {name} must be a number, got {value!r} "
                        f"({type(value).__name__})")
    value = float(value)
    if not math.isfinite(value) or (minimum is not None and value < minimum):
        bound = f" >= {minimum:g}" if minimum is not None else ""
        raise ValueError(f"{type(optimizer).__name__}: {name} must be a finite number{bound}, got {value}")
    return value


def one_minus_power(beta: float, t: jax.Array) -> jax.Array:
    """``1 - beta**t`` for a step count ``t`` (a float array), accurate in float32 where ``beta`` is near 1
    (``-expm1(t * log(beta))``, the logarithm taken in double precision on the host: float32's
    ``1 - 0.999**t`` is off by 1e-5 relative at ``t = 1``)."""
    if beta <= 0.0:
        return jnp.ones_like(t)
    return -jnp.expm1(t * math.log(beta))


def _low_precision(dtype: Any) -> bool:
    return jnp.dtype(dtype) in (jnp.dtype(jnp.float16), jnp.dtype(jnp.bfloat16))


def _upcast(value: jax.Array) -> jax.Array:
    return value.astype(jnp.float32) if _low_precision(value.dtype) else value


def _alias(optimizer: Any, name: str, value: Any, default: Any, old_name: str, old_value: Any) -> Any:
    """``value``, or ``old_value`` given under MXNet 1.x's name ``old_name``; ValueError when both were
    given (``value`` is not ``default``) and differ."""
    if old_value is None:
        return value
    if value != default and value != old_value:
        raise ValueError(f"{type(optimizer).__name__}: {old_name}={old_value} (MXNet 1.x's name of {name}) "
                         f"contradicts {name}={value}; give one of them")
    return old_value


# Fields read at every update as program inputs (or used on the host); every other number, flag or string
# is a hyperparameter, baked into the compiled update.
_PER_STEP = frozenset({"lr", "num_update", "begin_num_update", "rescale_grad", "lr_scheduler"})
_BAKED = (int, float, bool, str, type(None))
_UNSET = object()


class Optimizer(Watched):
    """Base optimizer.

    Args:
        learning_rate: base step size (overridden by ``lr_scheduler`` when given).
        wd: L2 weight decay, added to the gradient as ``wd * weight``.
        rescale_grad: multiplies gradients (Trainer sets it to ``1 / batch_size``).
        clip_gradient: clip rescaled gradients to ``[-clip, clip]`` when set.
        lr_scheduler: callable ``num_update -> learning rate``.
        aggregate_num, use_fused_step: Gluon 2.0's choices of how many parameters one MXNet kernel
            updates and whether to use fused kernels; accepted and ignored, since the Trainer compiles
            the update of all parameters into one XLA program.
    """

    def __init__(self, learning_rate: float = 0.01, wd: float = 0.0, rescale_grad: float = 1.0,
                 clip_gradient: float | None = None, lr_scheduler: Callable[[int], float] | None = None,
                 begin_num_update: int = 0, multi_precision: bool = False, param_dict: Any = None,
                 aggregate_num: int | None = None, use_fused_step: bool | None = None):
        if learning_rate is not None:
            learning_rate = _finite(self, "learning_rate", learning_rate, minimum=0.0)
        if clip_gradient is not None and _finite(self, "clip_gradient", clip_gradient) <= 0:
            raise ValueError(f"{type(self).__name__}: clip_gradient must be positive, got {clip_gradient}")
        self.lr = learning_rate
        self.wd = _finite(self, "wd", wd)
        self.rescale_grad = _finite(self, "rescale_grad", rescale_grad)
        self.clip_gradient = clip_gradient
        self.lr_scheduler = lr_scheduler
        if lr_scheduler is not None and learning_rate is not None and hasattr(lr_scheduler, "base_lr"):
            lr_scheduler.base_lr = learning_rate
        self.num_update = int(begin_num_update)
        self.begin_num_update = int(begin_num_update)
        self.multi_precision = multi_precision

    @property
    def learning_rate(self) -> float:
        """The learning rate for the current update count."""
        if self.lr_scheduler is not None:
            return float(self.lr_scheduler(self.num_update))
        return float(self.lr)

    def set_learning_rate(self, lr: float) -> None:
        """Set the base learning rate; not allowed when an lr_scheduler drives it."""
        if self.lr_scheduler is not None:
            raise RuntimeError(f"{type(self).__name__} has an lr_scheduler; set_learning_rate cannot override it")
        self.lr = _finite(self, "learning_rate", lr, minimum=0.0)

    # -- the math ---------------------------------------------------------------------
    def create_state(self, weight: jax.Array) -> tuple:
        """Optimizer state for one weight (a tuple of arrays, possibly empty)."""
        return ()

    def update_rule(self, weight: jax.Array, grad: jax.Array, state: tuple, lr: jax.Array,
                    wd: jax.Array) -> tuple[jax.Array, tuple]:
        """Pure update of one weight; ``grad`` is already rescaled and clipped."""
        raise NotImplementedError

    def update_all(self, weights: list, grads: list, states: list, lrs: list,
                   wds: list) -> tuple[list, list]:
        """Update all parameters of one Trainer step at once (traced into one program).

        Lists are aligned per parameter; ``grads`` are already rescaled and clipped.
        The default applies ``update_rule`` to each parameter; override it for
        transformations that need every parameter together.
        """
        results = [self.update_rule(*args) for args in zip(weights, grads, states, lrs, wds)]
        return [w for w, _ in results], [s for _, s in results]

    def create_state_multi_precision(self, weight: jax.Array) -> tuple:
        """``create_state``; with ``multi_precision``, a float16/bfloat16 weight's state starts with
        its float32 master copy, which the updates change (the weight is its rounded value)."""
        if self.multi_precision and _low_precision(weight.dtype):
            master = weight.astype(jnp.float32)
            return (master,) + tuple(self.create_state(master))
        return tuple(self.create_state(weight))

    def update_all_multi_precision(self, weights: list, grads: list, states: list, lrs: list,
                                   wds: list) -> tuple[list, list]:
        """``update_all`` with float16/bfloat16 weights updated in float32: on their master copy
        (``multi_precision``), else on upcast values rounded back (so that an epsilon such as Adam's
        1e-8, zero in float16, keeps its value)."""
        f32 = jnp.float32
        args = []
        for weight, grad, state, lr, wd in zip(weights, grads, states, lrs, wds):
            if not _low_precision(weight.dtype):
                args.append((weight, grad, state, lr, wd))
            elif self.multi_precision:
                args.append((state[0], grad.astype(f32), tuple(state[1:]), jnp.asarray(lr, f32), jnp.asarray(wd, f32)))
            else:
                args.append((weight.astype(f32), grad.astype(f32), tuple(map(_upcast, state)),
                             jnp.asarray(lr, f32), jnp.asarray(wd, f32)))
        new_weights, new_states = self.update_all(*map(list, zip(*args))) if args else ([], [])
        out_weights, out_states = [], []
        for weight, state, new_weight, new_state in zip(weights, states, new_weights, new_states):
            if not _low_precision(weight.dtype):
                out_weights.append(new_weight)
                out_states.append(tuple(new_state))
            elif self.multi_precision:
                out_weights.append(new_weight.astype(weight.dtype))
                out_states.append((new_weight,) + tuple(new_state))
            else:
                out_weights.append(new_weight.astype(weight.dtype))
                out_states.append(tuple(n.astype(o.dtype) for n, o in zip(new_state, state)))
        return out_weights, out_states

    def preprocess(self, grad: jax.Array, rescale: jax.Array) -> jax.Array:
        """Rescale and clip a raw gradient (traced inside the update program)."""
        grad = grad * rescale.astype(grad.dtype)
        if self.clip_gradient is not None:
            grad = jnp.clip(grad, -self.clip_gradient, self.clip_gradient)
        return grad

    def hyperparameters(self) -> tuple:
        """Static values baked into the compiled update; changing one recompiles."""
        return tuple(sorted((k, v) for k, v in vars(self).items() if k not in _PER_STEP and isinstance(v, _BAKED)))

    def __setattr__(self, name: str, value: Any) -> None:
        old = self.__dict__.get(name, _UNSET)
        object.__setattr__(self, name, value)
        if name not in _PER_STEP and old is not _UNSET and isinstance(value, _BAKED) and (
                type(old) is not type(value) or old != value):
            self._changed()  # trainers and compiled steps baked the old value into their updates

    def __repr__(self) -> str:
        return f"{type(self).__name__}(learning_rate={self.lr}, {dict(self.hyperparameters())})"
