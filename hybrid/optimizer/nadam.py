"""Nadam: Adam with Nesterov momentum (Dozat; MXNet's update rule)."""
from __future__ import annotations

import jax.numpy as jnp

from ._clip_late import ClipLate
from .adamw import check_betas
from .optimizer import one_minus_power, register

__all__ = ["Nadam"]


@register
class Nadam(ClipLate):
    """Nadam. With per-parameter step ``t``, ``g = clip(rescaled grad + wd * weight, clip_gradient)`` and the
    momentum schedule ``mu_t = beta1 * (1 - 0.5 * 0.96**(t * schedule_decay))``, ``M_t = mu_1 ... mu_t``:
    ``m = beta1*m + (1-beta1)*g``, ``v = beta2*v + (1-beta2)*g**2``,
    ``m_bar = (1 - mu_t) * g / (1 - M_t) + mu_{t+1} * m / (1 - M_t * mu_{t+1})``,
    ``weight -= lr * m_bar / (sqrt(v / (1 - beta2**t)) + epsilon)``.
    ``M_t`` is kept per parameter (MXNet keeps one product for all parameters, multiplied at every
    parameter's update, so the two agree for a network of one parameter).
    """

    def __init__(self, learning_rate: float = 0.001, beta1: float = 0.9, beta2: float = 0.999,
                 epsilon: float = 1e-8, schedule_decay: float = 0.004, **kwargs):
        super().__init__(learning_rate=learning_rate, **kwargs)
        check_betas("Nadam", beta1, beta2)
        self.beta1, self.beta2, self.epsilon = float(beta1), float(beta2), float(epsilon)
        self.schedule_decay = float(schedule_decay)

    def create_state(self, weight):
        return (jnp.zeros_like(weight), jnp.zeros_like(weight), jnp.ones((), weight.dtype), jnp.zeros((), jnp.int32))

    def update_rule(self, weight, grad, state, lr, wd):
        mean, var, schedule, t = state
        t = t + 1
        tf = t.astype(weight.dtype)
        grad = self.decayed(grad, weight, wd)
        mu_t = self.beta1 * (1.0 - 0.5 * 0.96 ** (tf * self.schedule_decay))
        mu_next = self.beta1 * (1.0 - 0.5 * 0.96 ** ((tf + 1) * self.schedule_decay))
        schedule = schedule * mu_t
        mean = self.beta1 * mean + (1 - self.beta1) * grad
        var = self.beta2 * var + (1 - self.beta2) * jnp.square(grad)
        mean_bar = (1 - mu_t) * grad / (1 - schedule) + mu_next * mean / (1 - schedule * mu_next)
        var_hat = var / one_minus_power(self.beta2, tf)
        return weight - lr * mean_bar / (jnp.sqrt(var_hat) + self.epsilon), (mean, var, schedule, t)
