"""Inception v3 (Szegedy et al., 2016) without the auxiliary classifier, in the layout of Gluon's model zoo:
branches of factorised convolutions concatenated on the channel axis."""
from __future__ import annotations

from typing import Any, Sequence

from .. import nn
from ..block import HybridBlock
from ._common import check_classes, no_pretrained

__all__ = ["Inception3", "inception_v3"]

# a convolution setting: (channels, kernel, strides or None, padding or None)
_Conv = tuple


def _basic_conv(in_channels: int, channels: int, kernel: Any, strides: Any = None,
                padding: Any = None) -> nn.HybridSequential:
    """Convolution without bias, BatchNorm (epsilon 0.001), ReLU."""
    out = nn.HybridSequential()
    out.add(nn.Conv2D(channels, kernel, strides=strides or 1, padding=padding or 0, use_bias=False,
                      in_channels=in_channels),
            nn.BatchNorm(epsilon=0.001, in_channels=channels), nn.Activation("relu"))
    return out


def _branch(in_channels: int, pool: str | None, *convs: _Conv) -> tuple[nn.HybridSequential, int]:
    """An optional pooling (``'avg'``: 3x3 stride 1 padding 1; ``'max'``: 3x3 stride 2) then convolutions;
    returns the branch and its output channels."""
    out = nn.HybridSequential()
    if pool == "avg":
        out.add(nn.AvgPool2D(3, 1, padding=1))
    elif pool == "max":
        out.add(nn.MaxPool2D(3, 2))
    channels = in_channels
    for setting in convs:
        out.add(_basic_conv(channels, *setting))
        channels = setting[0]
    return out, channels


def _concat(in_channels: int, branches: Sequence[tuple]) -> tuple[nn.HybridConcatenate, int]:
    """The branches (each ``(pool, *convs)``) applied to the same input and concatenated."""
    out, total = nn.HybridConcatenate(axis=1), 0
    for pool, *convs in branches:
        branch, channels = _branch(in_channels, pool, *convs)
        out.add(branch)
        total += channels
    return out, total


def _block_a(c: int, pool_features: int):
    return _concat(c, [(None, (64, 1)), (None, (48, 1), (64, 5, None, 2)),
                       (None, (64, 1), (96, 3, None, 1), (96, 3, None, 1)), ("avg", (pool_features, 1))])


def _block_b(c: int):
    out, total = _concat(c, [(None, (384, 3, 2)), (None, (64, 1), (96, 3, None, 1), (96, 3, 2))])
    out.add(_branch(c, "max")[0])
    return out, total + c


def _block_c(c: int, c7: int):
    return _concat(c, [(None, (192, 1)),
                       (None, (c7, 1), (c7, (1, 7), None, (0, 3)), (192, (7, 1), None, (3, 0))),
                       (None, (c7, 1), (c7, (7, 1), None, (3, 0)), (c7, (1, 7), None, (0, 3)),
                        (c7, (7, 1), None, (3, 0)), (192, (1, 7), None, (0, 3))),
                       ("avg", (192, 1))])


def _block_d(c: int):
    out, total = _concat(c, [(None, (192, 1), (320, 3, 2)),
                             (None, (192, 1), (192, (1, 7), None, (0, 3)), (192, (7, 1), None, (3, 0)),
                              (192, 3, 2))])
    out.add(_branch(c, "max")[0])
    return out, total + c


def _split(c: int) -> tuple[nn.HybridConcatenate, int]:
    """A 1x3 and a 3x1 convolution of 384 channels side by side."""
    return _concat(c, [(None, (384, (1, 3), None, (0, 1))), (None, (384, (3, 1), None, (1, 0)))])


def _block_e(c: int):
    out = nn.HybridConcatenate(axis=1)
    out.add(_branch(c, None, (320, 1))[0])
    for convs in [((384, 1),), ((448, 1), (384, 3, None, 1))]:
        path = nn.HybridSequential()
        path.add(_branch(c, None, *convs)[0], _split(384)[0])
        out.add(path)
    out.add(_branch(c, "avg", (192, 1))[0])
    return out, 320 + 768 + 768 + 192


class Inception3(HybridBlock):
    """Inception v3: a convolutional stem, three A blocks, a B (grid reduction), four C blocks (7x7
    factorised), a D (reduction) and two E blocks, 8x8 average pooling, dropout 0.5 and
    ``output = Dense(classes)``.

    Input ``(N, in_channels, 299, 299)``; output ``(N, classes)``. Children: ``features``, ``output``.
    Raises ValueError for bad ``classes``.
    """

    def __init__(self, classes: int = 1000, in_channels: int = 3):
        super().__init__()
        check_classes("Inception3", classes)
        self.features = nn.HybridSequential()
        self.features.add(_basic_conv(in_channels, 32, 3, 2), _basic_conv(32, 32, 3), _basic_conv(32, 64, 3, None, 1),
                          nn.MaxPool2D(3, 2), _basic_conv(64, 80, 1), _basic_conv(80, 192, 3), nn.MaxPool2D(3, 2))
        c = 192
        for build in ([lambda c: _block_a(c, 32), lambda c: _block_a(c, 64), lambda c: _block_a(c, 64), _block_b]
                      + [lambda c, c7=c7: _block_c(c, c7) for c7 in (128, 160, 160, 192)]
                      + [_block_d, _block_e, _block_e]):
            block, c = build(c)
            self.features.add(block)
        self.features.add(nn.AvgPool2D(8), nn.Dropout(0.5), nn.Flatten())
        self.output = nn.Dense(classes, in_units=c)

    def forward(self, x):
        return self.output(self.features(x))


def inception_v3(pretrained: bool = False, root: Any = None,
                 ctx: Any = None, device: Any = None, **kwargs: Any) -> Inception3:
    """Inception v3; ``kwargs`` go to :class:`Inception3`. Raises ValueError for ``pretrained=True``
    (``root``, ``ctx`` and ``device`` are accepted without effect)."""
    no_pretrained("inceptionv3", pretrained, root, ctx, device)
    return Inception3(**kwargs)
