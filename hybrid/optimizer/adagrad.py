"""AdaGrad (Duchi et al.; MXNet's update rule)."""
from __future__ import annotations

import jax.numpy as jnp

from .optimizer import Optimizer, _alias, register

__all__ = ["AdaGrad"]


@register
class AdaGrad(Optimizer):
    """AdaGrad. With ``g = grad + wd * weight``: ``history += g**2`` and
    ``weight -= lr * g / (sqrt(history) + epsilon)``.

    ``eps``, MXNet 1.x's name of ``epsilon``, is accepted (the formula stays this one; 1.x adds ``eps``
    under the square root and ``wd * weight`` after it). Raises ValueError when both are given with
    different values.
    """

    def __init__(self, learning_rate: float = 0.01, epsilon: float = 1e-6, eps: float | None = None, **kwargs):
        super().__init__(learning_rate=learning_rate, **kwargs)
        self.epsilon = float(_alias(self, "epsilon", epsilon, 1e-6, "eps", eps))

    def create_state(self, weight):
        return (jnp.zeros_like(weight),)

    def update_rule(self, weight, grad, state, lr, wd):
        grad = grad + wd * weight
        history = state[0] + jnp.square(grad)
        return weight - lr * grad / (jnp.sqrt(history) + self.epsilon), (history,)
