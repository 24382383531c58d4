"""AdaGrad (Duchi et al.; MXNet's update rule)."""
from __future__ import annotations

import jax.numpy as jnp

from .optimizer import Optimizer, register

__all__ = ["AdaGrad"]


@register
class AdaGrad(Optimizer):
    """AdaGrad. With ``g = grad + wd * weight``: ``history += g**2`` and
    ``weight -= lr * g / (sqrt(history) + epsilon)``.
    """

    def __init__(self, learning_rate: float = 0.01, epsilon: float = 1e-6, **kwargs):
        super().__init__(learning_rate=learning_rate, **kwargs)
        self.epsilon = float(epsilon)

    def create_state(self, weight):
        return (jnp.zeros_like(weight),)

    def update_rule(self, weight, grad, state, lr, wd):
        grad = grad + wd * weight
        history = state[0] + jnp.square(grad)
        return weight - lr * grad / (jnp.sqrt(history) + self.epsilon), (history,)
