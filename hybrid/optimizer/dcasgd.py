"""DCASGD: SGD with delay compensation (Zheng et al.; MXNet's update rule)."""
from __future__ import annotations

import jax.numpy as jnp

from .optimizer import Optimizer, register

__all__ = ["DCASGD"]


@register
class DCASGD(Optimizer):
    """Delay-compensated SGD. With ``g`` the rescaled, clipped gradient and ``prev`` the weight before the
    last update: ``step = -lr * (g + wd*weight + lamda * g**2 * (weight - prev))``; with ``momentum``,
    ``mom = momentum*mom + step`` and ``weight += mom``, else ``weight += step``. (MXNet 1.9.1's own
    DCASGD raises for a momentum other than 0.)
    """

    def __init__(self, momentum: float = 0.0, lamda: float = 0.04, **kwargs):
        super().__init__(**kwargs)
        if not 0.0 <= momentum < 1.0:
            raise ValueError(f"DCASGD: momentum must be in [0, 1), got {momentum}")
        self.momentum, self.lamda = float(momentum), float(lamda)

    def create_state(self, weight):
        previous = jnp.array(weight, copy=True)
        return (jnp.zeros_like(weight), previous) if self.momentum else (previous,)

    def update_rule(self, weight, grad, state, lr, wd):
        previous = state[-1]
        step = -lr * (grad + wd * weight + self.lamda * jnp.square(grad) * (weight - previous))
        if not self.momentum:
            return weight + step, (weight,)
        mom = self.momentum * state[0] + step
        return weight + mom, (mom, weight)
