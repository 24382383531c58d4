"""AlexNet (Krizhevsky et al., 2012), in the single-tower form of Gluon's model zoo."""
from __future__ import annotations

from typing import Any

from .. import nn
from ..block import HybridBlock
from ._common import check_classes, no_pretrained

__all__ = ["AlexNet", "alexnet"]


class AlexNet(HybridBlock):
    """Five convolutions (64, 192, 384, 256, 256 channels; ReLU; max pooling after the 1st, 2nd and 5th)
    and two Dense(4096) layers with dropout 0.5, then ``output = Dense(classes)``.

    Input ``(N, in_channels, 224, 224)``; output ``(N, classes)``. Children: ``features``, ``output``
    (the structural names of Gluon's AlexNet). Raises ValueError for bad ``classes``.
    """

    def __init__(self, classes: int = 1000, in_channels: int = 3):
        super().__init__()
        check_classes("AlexNet", classes)
        self.features = nn.HybridSequential()
        self.features.add(
            nn.Conv2D(64, 11, strides=4, padding=2, activation="relu", in_channels=in_channels),
            nn.MaxPool2D(3, 2),
            nn.Conv2D(192, 5, padding=2, activation="relu", in_channels=64),
            nn.MaxPool2D(3, 2),
            nn.Conv2D(384, 3, padding=1, activation="relu", in_channels=192),
            nn.Conv2D(256, 3, padding=1, activation="relu", in_channels=384),
            nn.Conv2D(256, 3, padding=1, activation="relu", in_channels=256),
            nn.MaxPool2D(3, 2),
            nn.Flatten(),
            nn.Dense(4096, activation="relu", in_units=256 * 6 * 6),
            nn.Dropout(0.5),
            nn.Dense(4096, activation="relu", in_units=4096),
            nn.Dropout(0.5))
        self.output = nn.Dense(classes, in_units=4096)

    def forward(self, x):
        return self.output(self.features(x))


def alexnet(pretrained: bool = False, root: Any = None, ctx: Any = None, device: Any = None, **kwargs: Any) -> AlexNet:
    """AlexNet; ``kwargs`` go to :class:`AlexNet`. Raises ValueError for ``pretrained=True`` (``root``, ``ctx``
    and ``device`` are accepted without effect: no weights are downloaded)."""
    no_pretrained("alexnet", pretrained, root, ctx, device)
    return AlexNet(**kwargs)
