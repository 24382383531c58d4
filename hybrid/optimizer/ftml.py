"""FTML: Follow the Moving Leader (Zheng & Kwok; MXNet's update rule)."""
from __future__ import annotations

import jax.numpy as jnp

from ._clip_late import ClipLate
from .adamw import check_betas
from .optimizer import one_minus_power, register

__all__ = ["FTML"]


@register
class FTML(ClipLate):
    """FTML. With per-parameter step ``t`` and ``g = clip(rescaled grad + wd * weight, clip_gradient)``:
    ``v = beta2*v + (1-beta2)*g**2``,
    ``d_t = (1 - beta1**t) / lr * (sqrt(v / (1 - beta2**t)) + epsilon)``,
    ``z = beta1*z + (1-beta1)*g - (d_t - beta1*d_{t-1}) * weight``, ``weight = -z / d_t``.
    """

    def __init__(self, beta1: float = 0.6, beta2: float = 0.999, epsilon: float = 1e-8, **kwargs):
        super().__init__(**kwargs)
        check_betas("FTML", beta1, beta2)
        self.beta1, self.beta2, self.epsilon = float(beta1), float(beta2), float(epsilon)

    def create_state(self, weight):
        zeros = jnp.zeros_like(weight)
        return (zeros, zeros, zeros, jnp.zeros((), jnp.int32))

    def update_rule(self, weight, grad, state, lr, wd):
        prev_d, var, z, t = state
        t = t + 1
        tf = t.astype(weight.dtype)
        grad = self.decayed(grad, weight, wd)
        var = self.beta2 * var + (1 - self.beta2) * jnp.square(grad)
        d = one_minus_power(self.beta1, tf) / lr * (jnp.sqrt(var / one_minus_power(self.beta2, tf)) + self.epsilon)
        z = self.beta1 * z + (1 - self.beta1) * grad - (d - self.beta1 * prev_d) * weight
        return -z / d, (d, var, z, t)
