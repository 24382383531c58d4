"""RMSProp (MXNet's: Tieleman & Hinton, or Graves' centered form)."""
from __future__ import annotations

import jax.numpy as jnp

from .optimizer import Optimizer, _alias, register

__all__ = ["RMSProp"]


@register
class RMSProp(Optimizer):
    """RMSProp. With ``g = grad + wd * weight`` and ``var = rho*var + (1-rho)*g**2``:

    ``centered=False``: ``weight -= lr * g / sqrt(var + epsilon)``;
    ``centered=True``: ``mean = rho*mean + (1-rho)*g``,
    ``mom = momentum*mom - lr * g / sqrt(var - mean**2 + epsilon)``, ``weight += mom``.
    ``clip_weights`` then clips the weight to ``[-clip_weights, clip_weights]``.

    MXNet 1.x's names are accepted: ``gamma1`` is ``rho`` and ``gamma2`` is ``momentum``. Raises
    ValueError when both names of one hyperparameter are given with different values.
    """

    def __init__(self, learning_rate: float = 0.001, rho: float = 0.9, momentum: float = 0.9,
                 epsilon: float = 1e-8, centered: bool = False, clip_weights: float | None = None,
                 gamma1: float | None = None, gamma2: float | None = None, **kwargs):
        super().__init__(learning_rate=learning_rate, **kwargs)
        rho = _alias(self, "rho", rho, 0.9, "gamma1", gamma1)
        momentum = _alias(self, "momentum", momentum, 0.9, "gamma2", gamma2)
        if not 0.0 <= rho < 1.0:
            raise ValueError(f"RMSProp: rho must be in [0, 1), got {rho}")
        if clip_weights is not None and clip_weights <= 0:
            raise ValueError(f"RMSProp: clip_weights must be positive, got {clip_weights}")
        self.rho, self.momentum, self.epsilon = float(rho), float(momentum), float(epsilon)
        self.centered = bool(centered)
        self.clip_weights = clip_weights

    def create_state(self, weight):
        count = 3 if self.centered else 1
        return tuple(jnp.zeros_like(weight) for _ in range(count))

    def update_rule(self, weight, grad, state, lr, wd):
        grad = grad + wd * weight
        var = self.rho * state[0] + (1 - self.rho) * jnp.square(grad)
        if self.centered:
            mean = self.rho * state[1] + (1 - self.rho) * grad
            mom = self.momentum * state[2] - lr * grad / jnp.sqrt(var - jnp.square(mean) + self.epsilon)
            weight, state = weight + mom, (var, mean, mom)
        else:
            weight, state = weight - lr * grad / jnp.sqrt(var + self.epsilon), (var,)
        if self.clip_weights is not None:
            weight = jnp.clip(weight, -self.clip_weights, self.clip_weights)
        return weight, state
