"""AdamW: Adam with decoupled weight decay (Loshchilov & Hutter)."""
from __future__ import annotations

import jax.numpy as jnp

from .optimizer import Optimizer, register

__all__ = ["AdamW"]


@register
class AdamW(Optimizer):
    """Adam whose weight decay is not part of the gradient. With per-parameter step ``t``:
    ``m = beta1*m + (1-beta1)*grad``, ``v = beta2*v + (1-beta2)*grad**2``,
    ``m_hat = m / (1-beta1**t)``, ``v_hat = v / (1-beta2**t)`` (both skipped when
    ``correct_bias=False``), ``weight -= lr * (m_hat / (sqrt(v_hat) + epsilon) + wd * weight)``.
    This is the paper's form and ``optax.adamw``'s; MXNet folds the bias correction into the
    step size, which also scales its decay term.
    """

    def __init__(self, learning_rate: float = 0.001, beta1: float = 0.9, beta2: float = 0.999,
                 epsilon: float = 1e-6, correct_bias: bool = True, **kwargs):
        super().__init__(learning_rate=learning_rate, **kwargs)
        for name, value in (("beta1", beta1), ("beta2", beta2)):
            if not 0.0 <= value < 1.0:
                raise ValueError(f"AdamW: {name} must be in [0, 1), got {value}")
        self.beta1, self.beta2, self.epsilon = float(beta1), float(beta2), float(epsilon)
        self.correct_bias = bool(correct_bias)

    def create_state(self, weight):
        return (jnp.zeros_like(weight), jnp.zeros_like(weight), jnp.zeros((), jnp.int32))

    def update_rule(self, weight, grad, state, lr, wd):
        mean, var, t = state
        t = t + 1
        mean = self.beta1 * mean + (1 - self.beta1) * grad
        var = self.beta2 * var + (1 - self.beta2) * jnp.square(grad)
        mean_hat, var_hat = mean, var
        if self.correct_bias:
            tf = t.astype(weight.dtype)
            mean_hat = mean / (1 - self.beta1 ** tf)
            var_hat = var / (1 - self.beta2 ** tf)
        step = mean_hat / (jnp.sqrt(var_hat) + self.epsilon) + wd * weight
        return weight - lr * step, (mean, var, t)
