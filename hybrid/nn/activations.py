"""Activation layers."""
from __future__ import annotations

from ..block import HybridBlock
from ..graph import layer_ops

__all__ = ["Activation"]


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
        return layer_ops.activation(x, self._act_type)

    def __repr__(self) -> str:
        return f"Activation({self._act_type})"
