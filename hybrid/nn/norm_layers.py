"""Per-sample normalisation layers: GroupNorm and InstanceNorm (no running statistics)."""
from __future__ import annotations

from typing import Any

from ..block import HybridBlock
from ..errors import ShapeError
from ..graph import layer_ops
from ..parameter import Parameter
from .basic_layers import check_non_negative_int, check_positive_int

__all__ = ["GroupNorm", "InstanceNorm"]


class _GroupedNorm(HybridBlock):
    """Normalises each sample over channel groups and all non-batch axes; per-channel ``gamma``/``beta``."""

    def __init__(self, num_groups: int, axis: int, epsilon: float, center: bool, scale: bool,
                 beta_initializer: Any, gamma_initializer: Any, in_channels: int, dtype: Any):
        super().__init__()
        name = type(self).__name__
        if not epsilon > 0:
            raise ValueError(f"{name}: epsilon must be positive, got {epsilon!r}")
        in_channels = check_non_negative_int(name, "in_channels", in_channels)
        self._num_groups, self._axis, self._epsilon = num_groups, axis, float(epsilon)
        if in_channels % max(num_groups, 1):
            raise ValueError(f"{name}: in_channels ({in_channels}) must be divisible by num_groups ({num_groups})")
        self.gamma = Parameter("gamma", grad_req="write" if scale else "null", shape=(in_channels,),
                               init=gamma_initializer, allow_deferred_init=True, differentiable=scale, dtype=dtype)
        self.beta = Parameter("beta", grad_req="write" if center else "null", shape=(in_channels,),
                              init=beta_initializer, allow_deferred_init=True, differentiable=center, dtype=dtype)

    def _channel_axis(self, x) -> int:
        if x.ndim < 2 or not -x.ndim <= self._axis < x.ndim or self._axis % x.ndim == 0:
            raise ShapeError(f"expected an input (batch, ...) with channels on axis {self._axis}, got shape {x.shape}")
        return self._axis % x.ndim

    def _groups(self, channels: int) -> int:
        return self._num_groups or channels  # 0: one group per channel (instance norm)

    def infer_shape(self, x, *args) -> None:
        channels = x.shape[self._channel_axis(x)]
        self.gamma.shape = (channels,)
        self.beta.shape = (channels,)

    def forward(self, x):
        axis = self._channel_axis(x)
        channels, expected = x.shape[axis], self.gamma.shape[0]
        if expected and channels != expected:
            raise ShapeError(f"expected {expected} channels on axis {self._axis}, got input of shape {x.shape}")
        groups = self._groups(channels)
        if channels % groups:
            raise ShapeError(f"{channels} channels (input shape {x.shape}) cannot be split into {groups} groups")
        return layer_ops.group_norm(x, self.gamma.data(), self.beta.data(), num_groups=groups, axis=axis,
                                    eps=self._epsilon)

    def __repr__(self) -> str:
        groups = f"num_groups={self._num_groups}, " if self._num_groups else f"axis={self._axis}, "
        return f"{type(self).__name__}({groups}eps={self._epsilon}, in_channels={self.gamma.shape[0] or None})"


class GroupNorm(_GroupedNorm):
    """Group normalisation (Wu and He, 2018) over inputs ``(N, C, ...)``.

    The C channels are split into ``num_groups`` groups of consecutive channels; each sample is
    normalised over each group's channels and all spatial axes (biased variance), then scaled and
    shifted per channel by ``gamma``/``beta`` of shape ``(C,)``. Raises ValueError when
    ``in_channels`` is not divisible by ``num_groups``, ShapeError for such an input.
    """

    def __init__(self, num_groups: int = 1, epsilon: float = 1e-5, center: bool = True, scale: bool = True,
                 beta_initializer: Any = "zeros", gamma_initializer: Any = "ones", in_channels: int = 0,
                 dtype: Any = "float32"):
        num_groups = check_positive_int("GroupNorm", "num_groups", num_groups)
        super().__init__(num_groups, 1, epsilon, center, scale, beta_initializer, gamma_initializer, in_channels,
                         dtype)


class InstanceNorm(_GroupedNorm):
    """Instance normalisation (Ulyanov et al., 2016): each sample and channel normalised over the spatial axes.

    ``axis`` is the channel axis (1 for ``NC...``, -1 for channels-last); ``gamma``/``beta`` have shape
    ``(C,)``. As in Gluon, ``scale`` defaults to False (gamma stays 1 and is not trained).
    """

    def __init__(self, axis: int = 1, epsilon: float = 1e-5, center: bool = True, scale: bool = False,
                 beta_initializer: Any = "zeros", gamma_initializer: Any = "ones", in_channels: int = 0,
                 dtype: Any = "float32"):
        if isinstance(axis, bool) or not isinstance(axis, int):
            raise ValueError(f"InstanceNorm: axis must be an int, got {axis!r}")
        super().__init__(0, axis, epsilon, center, scale, beta_initializer, gamma_initializer, in_channels, dtype)
