"""SGD with momentum and Nesterov momentum (MXNet's update rules)."""
from __future__ import annotations

import jax.numpy as jnp

from .._core import compat as _compat
from .optimizer import Optimizer, register

__all__ = ["SGD", "ccSGD"]


@register
class SGD(Optimizer):
    """Stochastic gradient descent.

    With ``g = grad + wd * weight``:
    ``momentum == 0``: ``weight -= lr * g``;
    otherwise ``mom = momentum * mom - lr * g`` and ``weight += mom``, or with
    ``nesterov``: ``weight += momentum * mom - lr * g``.
    """

    def __init__(self, learning_rate: float = 0.01, momentum: float = 0.0, nesterov: bool = False,
                 lazy_update: bool = False, **kwargs):
        super().__init__(learning_rate=learning_rate, **kwargs)
        if lazy_update:
            _compat.ignored_argument("SGD", "lazy_update", lazy_update, "gradients are dense arrays")
        if not 0.0 <= momentum < 1.0:
            raise ValueError(f"SGD: momentum must be in [0, 1), got {momentum}")
        self.momentum = float(momentum)
        self.nesterov = bool(nesterov)

    def create_state(self, weight):
        return (jnp.zeros_like(weight),) if self.momentum else ()

    def update_rule(self, weight, grad, state, lr, wd):
        grad = grad + wd * weight
        if not self.momentum:
            return weight - lr * grad, ()
        mom = self.momentum * state[0] - lr * grad
        if self.nesterov:
            return weight + (self.momentum * mom - lr * grad), (mom,)
        return weight + mom * _one_at_run_time(lr), (mom,)


@register
class ccSGD(SGD):  # noqa: N801  (MXNet's name)
    """MXNet's deprecated name of :class:`SGD`, kept for old scripts."""


def _one_at_run_time(lr):
    """1, computed from the (finite) learning rate when the program runs. ``weight + mom * one`` has the
    values of ``weight + mom`` bit for bit, but XLA:CPU does not compile it as a lone addition: mlp33's
    ``hybrid.compile`` step ran in 0.96-1.03x of the limit's time this way against 1.07-1.21x (four
    interleaved runs in one process)."""
    return lr * 0 + 1
