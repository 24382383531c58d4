"""LAMB: layer-wise adaptive moments (You et al., "Large Batch Optimization for Deep Learning")."""
from __future__ import annotations

import jax.numpy as jnp

from .adamw import adam_moments, check_betas
from .optimizer import Optimizer, register

__all__ = ["LAMB"]


@register
class LAMB(Optimizer):
    """LAMB. With per-parameter step ``t``:
    ``m = beta1*m + (1-beta1)*grad``, ``v = beta2*v + (1-beta2)*grad**2``,
    ``r = m_hat / (sqrt(v_hat) + epsilon) + wd * weight`` where ``m_hat = m / (1-beta1**t)`` and
    ``v_hat = v / (1-beta2**t)`` (``m``, ``v`` themselves when ``bias_correction=False``);
    ``r1 = ||weight||`` clipped to ``[lower_bound, upper_bound]`` (each bound optional),
    ``r2 = ||r||``, ``ratio = r1 / r2`` (1 when either norm is 0), ``weight -= lr * ratio * r``.
    Norms are over the whole parameter (one "layer").
    """

    def __init__(self, learning_rate: float = 0.001, beta1: float = 0.9, beta2: float = 0.999,
                 epsilon: float = 1e-6, lower_bound: float | None = None, upper_bound: float | None = None,
                 bias_correction: bool = True, **kwargs):
        super().__init__(learning_rate=learning_rate, **kwargs)
        check_betas("LAMB", beta1, beta2)
        if lower_bound is not None and upper_bound is not None and lower_bound > upper_bound:
            raise ValueError(f"LAMB: lower_bound {lower_bound} is above upper_bound {upper_bound}")
        self.beta1, self.beta2, self.epsilon = float(beta1), float(beta2), float(epsilon)
        self.lower_bound, self.upper_bound = lower_bound, upper_bound
        self.bias_correction = bool(bias_correction)

    def create_state(self, weight):
        return (jnp.zeros_like(weight), jnp.zeros_like(weight), jnp.zeros((), jnp.int32))

    def update_rule(self, weight, grad, state, lr, wd):
        mean_hat, var_hat, state = adam_moments(grad, state, self.beta1, self.beta2, self.bias_correction)
        direction = mean_hat / (jnp.sqrt(var_hat) + self.epsilon) + wd * weight
        r1 = jnp.linalg.norm(weight)
        if self.lower_bound is not None:
            r1 = jnp.maximum(r1, self.lower_bound)
        if self.upper_bound is not None:
            r1 = jnp.minimum(r1, self.upper_bound)
        r2 = jnp.linalg.norm(direction)
        ratio = jnp.where((r1 > 0) & (r2 > 0), r1 / jnp.where(r2 > 0, r2, 1), 1)
        return weight - lr * ratio * direction, state
