"""Activation layers."""
from __future__ import annotations

from typing import Any

import jax

from ..block import HybridBlock
from ..errors import ShapeError
from ..graph import layer_ops
from ..init import Constant
from ..parameter import Parameter

__all__ = ["Activation", "LeakyReLU", "PReLU", "ELU", "SELU", "GELU", "SiLU", "Swish"]


class Activation(HybridBlock):
    """Elementwise activation by name.

    Args:
        activation: one of ``relu``, ``sigmoid``, ``tanh``, ``softrelu``,
            ``softsign`` (Gluon's names), or ``gelu``, ``silu``/``swish``, ``elu``, ``selu``.
    Raises ValueError for an unknown name.
    """

    def __init__(self, activation: str):
        super().__init__()
        if not isinstance(activation, str) or activation not in layer_ops.ACTIVATIONS:
            raise ValueError(f"Activation: unknown activation {activation!r}; "
                             f"expected one of {sorted(layer_ops.ACTIVATIONS)}")
        self._act_type = activation

    def forward(self, x):
        return layer_ops.activation(x, act_type=self._act_type)

    def __repr__(self) -> str:
        return f"Activation({self._act_type})"


def _check_float(layer: str, name: str, value: Any, minimum: float | None = None) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or \
            (minimum is not None and value < minimum):
        bound = f" >= {minimum}" if minimum is not None else ""
        raise ValueError(f"{layer}: {name} must be a number{bound}, got {value!r}")
    return float(value)


class LeakyReLU(HybridBlock):
    """``x`` for ``x >= 0``, ``alpha * x`` below; ``alpha >= 0`` (ValueError otherwise)."""

    def __init__(self, alpha: float):
        super().__init__()
        self._alpha = _check_float("LeakyReLU", "alpha", alpha, 0.0)

    def forward(self, x):
        return layer_ops.leaky_relu(x, act_type="leaky", slope=self._alpha)

    def __repr__(self) -> str:
        return f"LeakyReLU({self._alpha})"


class PReLU(HybridBlock):
    """Leaky ReLU with a learned slope ``alpha`` of shape ``(in_channels,)``.

    With ``in_channels=1`` (the default) one slope is shared by all elements; otherwise
    the input's axis 1 must have ``in_channels`` entries, each with its own slope.
    ``alpha`` starts at 0.25 unless ``alpha_initializer`` says otherwise.
    """

    def __init__(self, alpha_initializer: Any = Constant(0.25), in_channels: int = 1):
        super().__init__()
        if isinstance(in_channels, bool) or not isinstance(in_channels, int) or in_channels < 1:
            raise ValueError(f"PReLU: in_channels must be a positive integer, got {in_channels!r}")
        self.alpha = Parameter("alpha", shape=(in_channels,), init=alpha_initializer)

    def forward(self, x):
        channels = self.alpha.shape[0]
        if channels > 1 and (x.ndim < 2 or x.shape[1] != channels):
            raise ShapeError(f"expected {channels} channels on axis 1 (in_channels={channels}), "
                             f"got input of shape {x.shape}")
        return layer_ops.leaky_relu(x, self.alpha.data(), act_type="prelu")

    def __repr__(self) -> str:
        return f"PReLU(in_channels={self.alpha.shape[0]})"


class ELU(HybridBlock):
    """``x`` for ``x > 0``, ``alpha * (exp(x) - 1)`` otherwise."""

    def __init__(self, alpha: float = 1.0):
        super().__init__()
        self._alpha = _check_float("ELU", "alpha", alpha)

    def forward(self, x):
        return layer_ops.leaky_relu(x, act_type="elu", slope=self._alpha)

    def __repr__(self) -> str:
        return f"ELU({self._alpha})"


class SELU(Activation):
    """Scaled ELU with the fixed constants of Klambauer et al. (2017): ``scale * elu(x, alpha)``."""

    def __init__(self):
        super().__init__("selu")


class GELU(Activation):
    """Gaussian error linear unit ``x * Phi(x)``; ``approximation='tanh'`` uses the tanh formula.

    Raises ValueError for an approximation other than ``'erf'`` (exact) or ``'tanh'``.
    """

    def __init__(self, approximation: str = "erf"):
        if approximation not in ("erf", "tanh"):
            raise ValueError(f"GELU: approximation must be 'erf' or 'tanh', got {approximation!r}")
        super().__init__("gelu" if approximation == "erf" else "gelu_tanh")


class SiLU(Activation):
    """Sigmoid linear unit ``x * sigmoid(x)``."""

    def __init__(self):
        super().__init__("silu")


class Swish(HybridBlock):
    """``x * sigmoid(beta * x)`` (Ramachandran et al., 2017); ``beta=1`` is SiLU."""

    def __init__(self, beta: float = 1.0):
        super().__init__()
        self._beta = _check_float("Swish", "beta", beta)

    def forward(self, x):
        return x * jax.nn.sigmoid(self._beta * x)

    def __repr__(self) -> str:
        return f"Swish({self._beta})"
