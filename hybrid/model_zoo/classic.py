"""Multi-layer perceptron and LeNet-5 (LeCun et al., 1998) for small images such as MNIST."""
from __future__ import annotations

from typing import Any, Sequence

from .. import nn
from ..block import HybridBlock
from ._common import check_classes, no_pretrained

__all__ = ["MLP", "LeNet", "mlp", "lenet"]


class MLP(HybridBlock):
    """Dense layers with an activation (and optional dropout) between them.

    Args:
        hidden: sizes of the hidden layers, e.g. ``(256, 128)``.
        classes: number of outputs.
        activation: any :class:`hybrid.nn.Activation` name.
        dropout: dropout rate after each hidden layer (training mode only); 0 for none.
        in_units: input features (0: inferred at the first call).
    Input ``(N, ...)``, flattened to ``(N, features)``; output ``(N, classes)``. Children: ``features``
    (hidden layers), ``output``. Raises ValueError for bad sizes or rates.
    """

    def __init__(self, hidden: Sequence[int] = (256, 128), classes: int = 10, activation: str = "relu",
                 dropout: float = 0.0, in_units: int = 0):
        super().__init__()
        check_classes("MLP", classes)
        self.features = nn.HybridSequential()
        units = in_units
        for size in hidden:
            self.features.add(nn.Dense(size, activation=activation, in_units=units))
            if dropout:
                self.features.add(nn.Dropout(dropout))
            units = size
        self.output = nn.Dense(classes, in_units=units)

    def forward(self, x):
        return self.output(self.features(x))


class LeNet(HybridBlock):
    """LeNet-5: two 5x5 convolutions (6 and 16 channels; the first padded by 2 so that 28x28 MNIST digits
    keep the paper's 32x32 geometry) each followed by the activation and 2x2 pooling, then Dense layers of
    120 and 84 units and the output.

    Args:
        classes: number of outputs.
        activation: ``'relu'`` (default) or ``'tanh'``, ``'sigmoid'`` for the historical network.
        pooling: ``'max'`` (default) or ``'avg'`` (the paper's subsampling).
        in_channels: image channels (0: inferred at the first call).
    Input ``(N, C, 28, 28)``; output ``(N, classes)``. Children: ``features``, ``output``. Raises ValueError
    for bad arguments.
    """

    def __init__(self, classes: int = 10, activation: str = "relu", pooling: str = "max", in_channels: int = 0):
        super().__init__()
        check_classes("LeNet", classes)
        if pooling not in ("max", "avg"):
            raise ValueError(f"LeNet: pooling must be 'max' or 'avg', got {pooling!r}")
        pool = nn.MaxPool2D if pooling == "max" else nn.AvgPool2D
        self.features = nn.HybridSequential()
        self.features.add(nn.Conv2D(6, 5, padding=2, activation=activation, in_channels=in_channels), pool(2, 2),
                          nn.Conv2D(16, 5, activation=activation, in_channels=6), pool(2, 2),
                          nn.Flatten(),
                          nn.Dense(120, activation=activation, in_units=16 * 5 * 5),
                          nn.Dense(84, activation=activation, in_units=120))
        self.output = nn.Dense(classes, in_units=84)

    def forward(self, x):
        return self.output(self.features(x))


def mlp(pretrained: bool = False, root: Any = None, ctx: Any = None, device: Any = None, **kwargs: Any) -> MLP:
    """An :class:`MLP` (hidden layers 256 and 128, 10 classes by default). ``pretrained=True`` raises
    ValueError (no weights are shipped); ``root``, ``ctx`` and ``device`` are accepted without effect."""
    no_pretrained("mlp", pretrained, root, ctx, device)
    return MLP(**kwargs)


def lenet(pretrained: bool = False, root: Any = None, ctx: Any = None, device: Any = None, **kwargs: Any) -> LeNet:
    """A :class:`LeNet` (10 classes by default). ``pretrained=True`` raises ValueError (no weights are
    shipped); ``root``, ``ctx`` and ``device`` are accepted without effect."""
    no_pretrained("lenet", pretrained, root, ctx, device)
    return LeNet(**kwargs)
