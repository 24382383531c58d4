"""AdamW: Adam with decoupled weight decay (Loshchilov & Hutter)."""
from __future__ import annotations

import jax.numpy as jnp

from .optimizer import Optimizer, one_minus_power, register

__all__ = ["AdamW", "adam_moments", "check_betas"]


def check_betas(owner: str, beta1: float, beta2: float) -> None:
    """ValueError naming ``owner`` unless both decay rates are in [0, 1)."""
    for name, value in (("beta1", beta1), ("beta2", beta2)):
        if not 0.0 <= value < 1.0:
            raise ValueError(f"{owner}: {name} must be in [0, 1), got {value}")


def adam_moments(grad, state: tuple, beta1: float, beta2: float, correct_bias: bool):
    """Adam's moment estimates after one more step.

    ``state`` is ``(m, v, t)``; returns ``(m_hat, v_hat, new_state)`` with
    ``m_hat = m / (1 - beta1**t)`` and ``v_hat = v / (1 - beta2**t)`` (``m``, ``v`` when
    ``correct_bias`` is false).
    """
    mean, var, t = state
    t = t + 1
    mean = beta1 * mean + (1 - beta1) * grad
    var = beta2 * var + (1 - beta2) * jnp.square(grad)
    if not correct_bias:
        return mean, var, (mean, var, t)
    tf = t.astype(grad.dtype)
    return mean / one_minus_power(beta1, tf), var / one_minus_power(beta2, tf), (mean, var, t)


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
        check_betas("AdamW", beta1, beta2)
        self.beta1, self.beta2, self.epsilon = float(beta1), float(beta2), float(epsilon)
        self.correct_bias = bool(correct_bias)

    def create_state(self, weight):
        return (jnp.zeros_like(weight), jnp.zeros_like(weight), jnp.zeros((), jnp.int32))

    def update_rule(self, weight, grad, state, lr, wd):
        mean_hat, var_hat, state = adam_moments(grad, state, self.beta1, self.beta2, self.correct_bias)
        return weight - lr * (mean_hat / (jnp.sqrt(var_hat) + self.epsilon) + wd * weight), state
