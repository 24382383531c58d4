"""``mxnet.optimizer``: hybrid's optimizers (``hybrid.optimizer``), with MXNet 1.x's ``AdaGrad``, ``AdaDelta``,
``NAG``, ``Adam`` and ``RMSProp``, whose formulas or defaults differ from Gluon 2.0's (hybrid's own).

``create(name, **kwargs)`` and ``gluon.Trainer(params, name, ...)`` give these for ``'adagrad'``,
``'adadelta'``, ``'nag'``, ``'adam'`` and ``'rmsprop'``, and hybrid's optimizer for every other name.
"""
from __future__ import annotations

from typing import Any

import jax.numpy as jnp

from .. import optimizer as _hybrid
from ..optimizer import (DCASGD, FTML, LAMB, SGD, Adamax, AdamW, Ftrl, Nadam, Optax, Optimizer,  # noqa: F401
                         Signum, ccSGD, register)
from ..optimizer import create as _create

__all__ = ["Optimizer", "SGD", "ccSGD", "NAG", "Adam", "AdamW", "RMSProp", "AdaGrad", "AdaDelta", "LAMB", "Signum",
           "FTML", "Ftrl", "Adamax", "Nadam", "DCASGD", "Optax", "create", "register"]


class AdaGrad(Optimizer):
    """MXNet 1.x's AdaGrad. With ``g`` the rescaled, clipped gradient: ``history += g**2``,
    ``weight -= lr * (g / sqrt(history + eps) + wd * weight)``."""

    def __init__(self, eps: float = 1e-7, **kwargs: Any):
        super().__init__(**kwargs)
        self.float_stable_eps = float(eps)

    def create_state(self, weight):
        return (jnp.zeros_like(weight),)

    def update_rule(self, weight, grad, state, lr, wd):
        history = state[0] + jnp.square(grad)
        return weight - lr * (grad / jnp.sqrt(history + self.float_stable_eps) + wd * weight), (history,)


class AdaDelta(Optimizer):
    """MXNet 1.x's AdaDelta, which has no learning rate (``learning_rate`` is accepted and unused). With ``g``
    the rescaled, clipped gradient: ``acc_g = rho*acc_g + (1-rho)*g**2``,
    ``delta = sqrt(acc_delta + epsilon) / sqrt(acc_g + epsilon) * g``,
    ``acc_delta = rho*acc_delta + (1-rho)*delta**2``, ``weight -= delta + wd * weight``."""

    def __init__(self, rho: float = 0.90, epsilon: float = 1e-5, **kwargs: Any):
        super().__init__(**kwargs)
        if not 0.0 <= rho < 1.0:
            raise ValueError(f"AdaDelta: rho must be in [0, 1), got {rho}")
        self.rho, self.epsilon = float(rho), float(epsilon)

    def create_state(self, weight):
        return (jnp.zeros_like(weight), jnp.zeros_like(weight))

    def update_rule(self, weight, grad, state, lr, wd):
        acc_grad, acc_delta = state
        acc_grad = self.rho * acc_grad + (1 - self.rho) * jnp.square(grad)
        delta = jnp.sqrt(acc_delta + self.epsilon) / jnp.sqrt(acc_grad + self.epsilon) * grad
        acc_delta = self.rho * acc_delta + (1 - self.rho) * jnp.square(delta)
        return weight - (delta + wd * weight), (acc_grad, acc_delta)


class NAG(Optimizer):
    """MXNet 1.x's NAG (``momentum=0.0`` and ``learning_rate=0.01`` by default), as its kernel computes it. With
    ``g`` the rescaled, clipped gradient and ``m = momentum * mom``:
    ``new_weight = weight - m + (momentum + 1) * (m - lr * (g + wd * weight))`` and
    ``mom = m - lr * (g + wd * new_weight)`` (the kernel writes the weight before it reads it for the
    momentum's decay term); ``momentum == 0``: ``weight -= lr * (g + wd * weight)``.
    Raises ValueError for a momentum outside [0, 1)."""

    def __init__(self, momentum: float = 0.0, **kwargs: Any):
        super().__init__(**kwargs)
        if not 0.0 <= momentum < 1.0:
            raise ValueError(f"NAG: momentum must be in [0, 1), got {momentum}")
        self.momentum = float(momentum)

    def create_state(self, weight):
        return (jnp.zeros_like(weight),) if self.momentum else ()

    def update_rule(self, weight, grad, state, lr, wd):
        if not self.momentum:
            return weight - lr * (grad + wd * weight), ()
        mom = self.momentum * state[0]
        new_weight = weight - mom + (self.momentum + 1) * (mom - lr * (grad + wd * weight))
        return new_weight, (mom - lr * (grad + wd * new_weight),)


class _ClipAfterDecay:
    """MXNet 1.x's fused ``adam_update``, ``rmsprop_update`` and ``rmspropalex_update`` clip the rescaled
    gradient plus ``wd * weight``, where hybrid's optimizers clip the rescaled gradient alone."""

    clip_gradient: float | None

    def preprocess(self, grad, rescale):
        return grad * rescale.astype(grad.dtype)

    def update_rule(self, weight, grad, state, lr, wd):
        grad = grad + wd * weight
        if self.clip_gradient is not None:
            grad = jnp.clip(grad, -self.clip_gradient, self.clip_gradient)
        return super().update_rule(weight, grad, state, lr, 0 * wd)


class Adam(_ClipAfterDecay, _hybrid.Adam):
    """MXNet 1.x's Adam: :class:`hybrid.optimizer.Adam` with ``clip_gradient`` applied to ``g + wd * weight``."""


class RMSProp(_ClipAfterDecay, _hybrid.RMSProp):
    """MXNet 1.x's RMSProp: :class:`hybrid.optimizer.RMSProp` (``gamma1``, ``gamma2``, ``centered``,
    ``clip_weights``) with ``clip_gradient`` applied to ``g + wd * weight``."""


_MXNET1 = {"adagrad": AdaGrad, "adadelta": AdaDelta, "nag": NAG, "adam": Adam, "rmsprop": RMSProp}


def create(name: Any, **kwargs: Any) -> Optimizer:
    """The optimizer called ``name`` (case-insensitive) made with MXNet's keywords ``kwargs``; an Optimizer
    instance is returned as it is. Raises ValueError for an unknown name (naming what to use for MXNet's
    optimizers hybrid does not have)."""
    if isinstance(name, Optimizer):
        if kwargs:
            raise ValueError(f"create: {name!r} is already an optimizer; keywords {sorted(kwargs)} are for a name")
        return name
    if isinstance(name, str) and name.lower() in _MXNET1:
        return _MXNET1[name.lower()](**kwargs)
    return _create(name, **kwargs)


_LEFT_OUT = {"LARS": "lars", "LBSGD": "lbsgd", "SGLD": "sgld", "Test": "test", "GroupAdaGrad": "groupadagrad"}


def __getattr__(name: str) -> Any:
    if name in _LEFT_OUT:
        _create(_LEFT_OUT[name])  # raises ValueError saying what to use
    if name in ("Updater", "get_updater"):
        raise AttributeError(f"mx.optimizer.{name} is not provided by hybrid: gluon.Trainer compiles the update of "
                             "all parameters into one program; kv.set_optimizer(opt) updates a store's values")
    raise AttributeError(f"module 'mx.optimizer' has no attribute {name!r}")
