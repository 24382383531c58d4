"""Optimizers that clip the gradient after adding ``wd * weight`` (MXNet's Adamax, Nadam, FTML)."""
from __future__ import annotations

import jax
import jax.numpy as jnp

from .optimizer import Optimizer

__all__ = ["ClipLate"]


class ClipLate(Optimizer):
    """``preprocess`` only rescales; :meth:`decayed` adds the weight decay and then clips."""

    def preprocess(self, grad: jax.Array, rescale: jax.Array) -> jax.Array:
        return grad * rescale.astype(grad.dtype)

    def decayed(self, grad: jax.Array, weight: jax.Array, wd: jax.Array) -> jax.Array:
        """``clip(grad + wd * weight, clip_gradient)``."""
        grad = grad + wd * weight
        if self.clip_gradient is not None:
            grad = jnp.clip(grad, -self.clip_gradient, self.clip_gradient)
        return grad
