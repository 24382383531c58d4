"""SyncBatchNorm: batch statistics over the whole global batch, whichever way the step is partitioned."""
from __future__ import annotations

from typing import Any

import jax.numpy as jnp
from jax import lax

from .. import autograd
from ..errors import ShapeError
from .basic_layers import BatchNorm, _norm_axis

__all__ = ["SyncBatchNorm", "axis_is_bound"]


def axis_is_bound(axis_name: str) -> bool:
    """Whether collectives over ``axis_name`` are possible here (inside ``jax.shard_map``,
    ``jax.pmap`` or ``jax.vmap(..., axis_name=...)`` over that axis)."""
    try:
        lax.axis_size(axis_name)
    except NameError:
        return False
    return True


class SyncBatchNorm(BatchNorm):
    """BatchNorm whose training statistics cover every device's part of the batch.

    Args:
        in_channels: number of channels, 0 to infer it (Gluon's first argument).
        num_devices: optional check: inside per-device code, the size of ``axis_name``
            must equal it (ValueError otherwise). Gluon needs it; here it may be left None.
        axis_name: the mesh axis the batch is split over.
        Other arguments as :class:`hybrid.nn.BatchNorm` (``axis`` defaults to 1, channels).

    In a jit-partitioned step (``Trainer(devices=...)`` with a batch from ``shard_batch``)
    every BatchNorm already normalises with global statistics: the mean over a sharded
    batch axis is global, and XLA inserts the all-reduce. SyncBatchNorm adds the same
    guarantee for per-device code, where each program sees only its own slice
    (``jax.shard_map``, ``jax.pmap``, ``jax.vmap(axis_name=...)``): there the per-channel
    sum and sum of squared deviations are summed over ``axis_name`` with ``lax.psum``
    (two passes: global mean, then global biased variance) and gradients flow through
    those sums. Outside such code it computes exactly what BatchNorm does.
    """

    def __init__(self, in_channels: int = 0, num_devices: int | None = None, momentum: float = 0.9,
                 epsilon: float = 1e-5, center: bool = True, scale: bool = True, use_global_stats: bool = False,
                 beta_initializer: Any = "zeros", gamma_initializer: Any = "ones",
                 running_mean_initializer: Any = "zeros", running_variance_initializer: Any = "ones",
                 axis: int = 1, axis_name: str = "data", dtype: Any = "float32"):
        super().__init__(axis=axis, momentum=momentum, epsilon=epsilon, center=center, scale=scale,
                         use_global_stats=use_global_stats, beta_initializer=beta_initializer,
                         gamma_initializer=gamma_initializer, running_mean_initializer=running_mean_initializer,
                         running_variance_initializer=running_variance_initializer, in_channels=in_channels,
                         dtype=dtype)
        if num_devices is not None and (not isinstance(num_devices, int) or num_devices < 1):
            raise ValueError(f"SyncBatchNorm: num_devices must be a positive integer or None, got {num_devices!r}")
        if not isinstance(axis_name, str) or not axis_name:
            raise ValueError(f"SyncBatchNorm: axis_name must be a mesh axis name, got {axis_name!r}")
        self._num_devices, self._axis_name = num_devices, axis_name

    def forward(self, x):
        training = autograd.is_training() and not self._use_global_stats
        if not training or not axis_is_bound(self._axis_name):
            return super().forward(x)
        devices = lax.axis_size(self._axis_name)
        if self._num_devices is not None and devices != self._num_devices:
            raise ValueError(f"SyncBatchNorm was built for num_devices={self._num_devices}, but axis "
                             f"{self._axis_name!r} has {devices} devices")
        axis = _norm_axis("SyncBatchNorm", self._axis, x)
        expected = self.gamma.shape[0]
        if expected and x.shape[axis] != expected:
            raise ShapeError(f"expected {expected} channels on axis {self._axis}, got input of shape {x.shape}")
        reduce_axes = tuple(i for i in range(x.ndim) if i != axis)
        shape = [1] * x.ndim
        shape[axis] = x.shape[axis]
        xf = x.astype(jnp.promote_types(x.dtype, jnp.float32))
        count = lax.psum(xf.size // x.shape[axis], self._axis_name)
        mean = lax.psum(jnp.sum(xf, axis=reduce_axes), self._axis_name) / count
        centred = xf - mean.reshape(shape)
        var = lax.psum(jnp.sum(jnp.square(centred), axis=reduce_axes), self._axis_name) / count
        scale = self.gamma.data() * lax.rsqrt(var + self._epsilon)
        y = centred * scale.reshape(shape) + self.beta.data().reshape(shape)
        for param, stat in ((self.running_mean, mean), (self.running_var, var)):
            old = param.data()
            param.set_data(self._momentum * old + (1 - self._momentum) * lax.stop_gradient(stat).astype(old.dtype))
        return y.astype(x.dtype)

    def __repr__(self) -> str:
        return super().__repr__().replace("BatchNorm(", f"SyncBatchNorm(axis_name={self._axis_name!r}, ", 1)
