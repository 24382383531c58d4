"""FTRL-Proximal (McMahan et al., "Ad Click Prediction"; MXNet's update rule)."""
from __future__ import annotations

import jax.numpy as jnp

from .optimizer import Optimizer, register

__all__ = ["Ftrl"]


@register
class Ftrl(Optimizer):
    """FTRL with L1 (``lamda1``) and L2 (``wd``) regularization. With ``g`` the rescaled, clipped gradient:
    ``z += g - (sqrt(n + g**2) - sqrt(n)) * weight / lr``, ``n += g**2``,
    ``weight = (sign(z)*lamda1 - z) / ((beta + sqrt(n)) / lr + wd)`` where ``|z| > lamda1``, else 0.
    """

    def __init__(self, lamda1: float = 0.01, learning_rate: float = 0.1, beta: float = 1.0, **kwargs):
        super().__init__(learning_rate=learning_rate, **kwargs)
        self.lamda1, self.beta = float(lamda1), float(beta)

    def create_state(self, weight):
        return (jnp.zeros_like(weight), jnp.zeros_like(weight))

    def update_rule(self, weight, grad, state, lr, wd):
        z, n = state
        z = z + grad - (jnp.sqrt(n + jnp.square(grad)) - jnp.sqrt(n)) * weight / lr
        n = n + jnp.square(grad)
        weight = (jnp.sign(z) * self.lamda1 - z) / ((self.beta + jnp.sqrt(n)) / lr + wd)
        return jnp.where(jnp.abs(z) > self.lamda1, weight, 0), (z, n)
