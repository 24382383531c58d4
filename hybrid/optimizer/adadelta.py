"""AdaDelta (Zeiler; MXNet's update rule)."""
from __future__ import annotations

import jax.numpy as jnp

from .optimizer import Optimizer, register

__all__ = ["AdaDelta"]


@register
class AdaDelta(Optimizer):
    """AdaDelta. With ``g = grad + wd * weight``:
    ``acc_g = rho*acc_g + (1-rho)*g**2``,
    ``delta = sqrt(acc_delta + epsilon) / sqrt(acc_g + epsilon) * g``,
    ``acc_delta = rho*acc_delta + (1-rho)*delta**2``, ``weight -= lr * delta``.
    """

    def __init__(self, learning_rate: float = 1.0, rho: float = 0.9, epsilon: float = 1e-6, **kwargs):
        super().__init__(learning_rate=learning_rate, **kwargs)
        if not 0.0 <= rho < 1.0:
            raise ValueError(f"AdaDelta: rho must be in [0, 1), got {rho}")
        self.rho, self.epsilon = float(rho), float(epsilon)

    def create_state(self, weight):
        return (jnp.zeros_like(weight), jnp.zeros_like(weight))

    def update_rule(self, weight, grad, state, lr, wd):
        acc_grad, acc_delta = state
        grad = grad + wd * weight
        acc_grad = self.rho * acc_grad + (1 - self.rho) * jnp.square(grad)
        delta = jnp.sqrt(acc_delta + self.epsilon) / jnp.sqrt(acc_grad + self.epsilon) * grad
        acc_delta = self.rho * acc_delta + (1 - self.rho) * jnp.square(delta)
        return weight - lr * delta, (acc_grad, acc_delta)
