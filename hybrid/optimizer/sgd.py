"""SGD with momentum and Nesterov momentum (MXNet's update rules)."""
from __future__ import annotations

import jax.numpy as jnp

from .._core import compat as _compat
from .optimizer import Optimizer, register

__all__ = ["SGD"]


@register
class SGD(Optimizer):
    """Stochastic gradient descent.

    With ``g = grad + wd * weight``:
    ``momentum == 0``: ``weight -= lr * g``;
    otherwise ``mom = momentum * mom - lr * g`` and ``weight += mom``, or with
    ``nesterov``: ``weight += momentum * mom - lr * g``.
    """

    def __init__(self, learning_rate: float = 0.01, momentum: float = 0.0, nesterov: bool = False,
                 lazy_update: bool = False, **kwargs):
        super().__init__(learning_rate=learning_rate, **kwargs)
        if lazy_update:
            _compat.ignored_argument("SGD", "lazy_update", lazy_update, "gradients are dense arrays")
        if not 0.0 <= momentum < 1.0:
            raise ValueError(f"SGD: momentum must be in [0, 1), got {momentum}")
        self.momentum = float(momentum)
        self.nesterov = bool(nesterov)

    def create_state(self, weight):
        return (jnp.zeros_like(weight),) if self.momentum else ()

    def update_rule(self, weight, grad, state, lr, wd):
        grad = grad + wd * weight
        if not self.momentum:
            return weight - lr * grad, ()
        mom = self.momentum * state[0] - lr * grad
        step = self.momentum * mom - lr * grad if self.nesterov else mom
        return weight + step, (mom,)
