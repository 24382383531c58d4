"""Signum and signSGD (Bernstein et al.; MXNet's update rules)."""
from __future__ import annotations

import jax.numpy as jnp

from .optimizer import Optimizer, register

__all__ = ["Signum"]


@register
class Signum(Optimizer):
    """Steps of size ``lr`` along the sign of the momentum (``momentum == 0``: of the gradient).

    With ``g`` the rescaled, clipped gradient:
    ``mom = momentum*mom - (1-momentum) * (g + wd*weight)``,
    ``weight = (1 - lr*wd_lh) * weight + lr * sign(mom)``;
    with ``momentum == 0`` (signSGD): ``weight = (1 - lr*wd) * weight - lr * sign(g)``.
    ``wd_lh`` is decoupled weight decay (Loshchilov & Hutter). Raises ValueError for a momentum
    outside [0, 1).
    """

    def __init__(self, learning_rate: float = 0.01, momentum: float = 0.9, wd_lh: float = 0.0, **kwargs):
        super().__init__(learning_rate=learning_rate, **kwargs)
        if not 0.0 <= momentum < 1.0:
            raise ValueError(f"Signum: momentum must be in [0, 1), got {momentum}")
        self.momentum, self.wd_lh = float(momentum), float(wd_lh)

    def create_state(self, weight):
        return (jnp.zeros_like(weight),) if self.momentum else ()

    def update_rule(self, weight, grad, state, lr, wd):
        if not self.momentum:
            return (1 - lr * wd) * weight - lr * jnp.sign(grad), ()
        mom = self.momentum * state[0] - (1 - self.momentum) * (grad + wd * weight)
        return (1 - lr * self.wd_lh) * weight + lr * jnp.sign(mom), (mom,)
