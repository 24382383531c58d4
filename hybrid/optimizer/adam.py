"""Adam (MXNet's form: bias correction folded into the step size)."""
from __future__ import annotations

import jax.numpy as jnp

from .adamw import check_betas
from .._core import compat as _compat
from .optimizer import Optimizer, one_minus_power, register

__all__ = ["Adam"]


@register
class Adam(Optimizer):
    """Adam. With ``g = grad + wd * weight`` and per-parameter step ``t``:
    ``m = b1*m + (1-b1)*g``, ``v = b2*v + (1-b2)*g**2``,
    ``weight -= lr * sqrt(1-b2**t) / (1-b1**t) * m / (sqrt(v) + epsilon)``.
    """

    def __init__(self, learning_rate: float = 0.001, beta1: float = 0.9, beta2: float = 0.999,
                 epsilon: float = 1e-8, lazy_update: bool = False, **kwargs):
        super().__init__(learning_rate=learning_rate, **kwargs)
        if lazy_update:
            _compat.ignored_argument("Adam", "lazy_update", lazy_update, "gradients are dense arrays")
        check_betas("Adam", beta1, beta2)
        self.beta1, self.beta2, self.epsilon = float(beta1), float(beta2), float(epsilon)

    def create_state(self, weight):
        return (jnp.zeros_like(weight), jnp.zeros_like(weight), jnp.zeros((), jnp.int32))

    def update_rule(self, weight, grad, state, lr, wd):
        mean, var, t = state
        t = t + 1
        grad = grad + wd * weight
        mean = self.beta1 * mean + (1 - self.beta1) * grad
        var = self.beta2 * var + (1 - self.beta2) * jnp.square(grad)
        tf = t.astype(weight.dtype)
        step = lr * jnp.sqrt(one_minus_power(self.beta2, tf)) / one_minus_power(self.beta1, tf)
        return weight - step * mean / (jnp.sqrt(var) + self.epsilon), (mean, var, t)
