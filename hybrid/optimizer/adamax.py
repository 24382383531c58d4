"""AdaMax (Kingma & Ba, section 7; MXNet's update rule)."""
from __future__ import annotations

import jax.numpy as jnp

from ._clip_late import ClipLate
from .adamw import check_betas
from .optimizer import one_minus_power, register

__all__ = ["Adamax"]


@register
class Adamax(ClipLate):
    """Adam with the infinity norm. With per-parameter step ``t`` and
    ``g = clip(rescaled grad + wd * weight, clip_gradient)``:
    ``m = beta1*m + (1-beta1)*g``, ``u = max(beta2*u, |g|)``,
    ``weight -= lr / (1 - beta1**t) * m / u``.
    """

    def __init__(self, learning_rate: float = 0.002, beta1: float = 0.9, beta2: float = 0.999, **kwargs):
        super().__init__(learning_rate=learning_rate, **kwargs)
        check_betas("Adamax", beta1, beta2)
        self.beta1, self.beta2 = float(beta1), float(beta2)

    def create_state(self, weight):
        return (jnp.zeros_like(weight), jnp.zeros_like(weight), jnp.zeros((), jnp.int32))

    def update_rule(self, weight, grad, state, lr, wd):
        mean, norm, t = state
        t = t + 1
        grad = self.decayed(grad, weight, wd)
        mean = self.beta1 * mean + (1 - self.beta1) * grad
        norm = jnp.maximum(self.beta2 * norm, jnp.abs(grad))
        step = lr / one_minus_power(self.beta1, t.astype(weight.dtype))
        return weight - step * mean / norm, (mean, norm, t)
