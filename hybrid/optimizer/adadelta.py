"""AdaDelta (Zeiler; MXNet's update rule)."""
from __future__ import annotations

import jax.numpy as jnp

from .optimizer import Optimizer, register

__all__ = ["AdaDelta"]


@register
class AdaDelta(Optimizer):
    """AdaDelta as MXNet 1.9.1 computes it (its code; its docstring adds ``wd * weight`` to the gradient):
    ``acc_g = rho*acc_g + (1-rho)*grad**2``,
    ``delta = sqrt(acc_delta + epsilon) / sqrt(acc_g + epsilon) * grad``,
    ``acc_delta = rho*acc_delta + (1-rho)*delta**2``, ``weight -= lr * (delta + wd * weight)``.
    MXNet 1.9.1 has no learning rate here: the default ``learning_rate=1.0`` gives its numbers.
    """

    def __init__(self, learning_rate: float = 1.0, rho: float = 0.9, epsilon: float = 1e-5, **kwargs):
        super().__init__(learning_rate=learning_rate, **kwargs)
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
        return weight - lr * (delta + wd * weight), (acc_grad, acc_delta)
