"""ResNet v1 (He et al., 2015, "Deep Residual Learning") and v2 (He et al., 2016, "Identity Mappings in
Deep Residual Networks", pre-activation), with an ImageNet or a CIFAR stem.

Layouts follow ``gluon.model_zoo.vision``: a model has ``features`` (a HybridSequential: stem, one
HybridSequential per stage, global pooling) and ``output`` (a Dense layer).
"""
from __future__ import annotations

from typing import Any

from .. import nn
from ..block import HybridBlock
from ..graph import layer_ops
from ._common import check_classes, named_builder, no_pretrained

__all__ = ["BasicBlockV1", "BottleneckV1", "BasicBlockV2", "BottleneckV2", "ResNetV1", "ResNetV2", "get_resnet",
           "resnet18_v1", "resnet34_v1", "resnet50_v1", "resnet101_v1", "resnet152_v1",
           "resnet18_v2", "resnet34_v2", "resnet50_v2", "resnet101_v2", "resnet152_v2",
           "get_cifar_resnet", "cifar_resnet20_v1", "cifar_resnet56_v1", "cifar_resnet110_v1",
           "cifar_resnet20_v2", "cifar_resnet56_v2", "cifar_resnet110_v2"]

STEMS = ("imagenet", "cifar")


def _conv(channels: int, kernel: int, stride: int, in_channels: int) -> nn.Conv2D:
    return nn.Conv2D(channels, kernel, strides=stride, padding=kernel // 2, use_bias=False, in_channels=in_channels)


def _bn(channels: int) -> nn.BatchNorm:
    return nn.BatchNorm(in_channels=channels)


def _relu(x):
    return layer_ops.activation(x, act_type="relu")


class _BlockV1(HybridBlock):
    """A post-activation residual block: ``relu(body(x) + shortcut(x))``; the shortcut is the input, or
    with ``downsample`` a strided 1x1 convolution and BatchNorm."""

    def __init__(self, body: list, channels: int, stride: int, downsample: bool, in_channels: int):
        super().__init__()
        self.body = nn.HybridSequential()
        self.body.add(*body)
        self.downsample = _projection(channels, stride, in_channels, batch_norm=True) if downsample else None

    def forward(self, x):
        shortcut = x if self.downsample is None else self.downsample(x)
        return _relu(self.body(x) + shortcut)


class BasicBlockV1(_BlockV1):
    """Two 3x3 convolutions with BatchNorm; the sum with the shortcut goes through ReLU.

    ``downsample`` projects the shortcut with a strided 1x1 convolution and BatchNorm (needed when
    ``stride > 1`` or the channels change). Input ``(N, in_channels, H, W)``; output
    ``(N, channels, ceil(H / stride), ceil(W / stride))``. Children: ``body``, ``downsample``.
    """

    def __init__(self, channels: int, stride: int, downsample: bool = False, in_channels: int = 0):
        super().__init__([_conv(channels, 3, stride, in_channels), _bn(channels), nn.Activation("relu"),
                          _conv(channels, 3, 1, channels), _bn(channels)], channels, stride, downsample, in_channels)


class BottleneckV1(_BlockV1):
    """1x1 (reduce to ``channels // 4``, strided as in the paper), 3x3, 1x1 (expand to ``channels``)
    convolutions with BatchNorm; the sum with the shortcut goes through ReLU. Shapes as BasicBlockV1."""

    def __init__(self, channels: int, stride: int, downsample: bool = False, in_channels: int = 0):
        width = channels // 4
        super().__init__([_conv(width, 1, stride, in_channels), _bn(width), nn.Activation("relu"),
                          _conv(width, 3, 1, width), _bn(width), nn.Activation("relu"),
                          _conv(channels, 1, 1, width), _bn(channels)], channels, stride, downsample, in_channels)


class _BlockV2(HybridBlock):
    """A pre-activation residual block: convolutions ``conv1``, ``conv2``, ... each preceded by BatchNorm
    (``bn1``, ``bn2``, ...) and ReLU, plus the shortcut; with ``downsample`` the shortcut is a strided 1x1
    convolution of the pre-activated input. ``convs`` lists ``(channels, kernel, stride)`` per convolution."""

    def __init__(self, convs: list[tuple[int, int, int]], channels: int, stride: int, downsample: bool,
                 in_channels: int):
        super().__init__()
        width = in_channels
        for i, (out, kernel, conv_stride) in enumerate(convs, start=1):
            setattr(self, f"bn{i}", _bn(width))
            setattr(self, f"conv{i}", _conv(out, kernel, conv_stride, width))
            width = out
        self._depth = len(convs)
        self.downsample = _projection(channels, stride, in_channels, batch_norm=False) if downsample else None

    def forward(self, x):
        shortcut = x
        x = _relu(self.bn1(x))
        if self.downsample is not None:
            shortcut = self.downsample(x)
        x = self.conv1(x)
        for i in range(2, self._depth + 1):
            x = getattr(self, f"conv{i}")(_relu(getattr(self, f"bn{i}")(x)))
        return x + shortcut


class BasicBlockV2(_BlockV2):
    """Pre-activation basic block: ``BN -> ReLU -> conv3x3 -> BN -> ReLU -> conv3x3``, plus the shortcut
    (no activation after the sum). ``downsample`` projects the pre-activated input with a strided 1x1
    convolution. Shapes as BasicBlockV1. Children: ``bn1``, ``conv1``, ``bn2``, ``conv2``, ``downsample``.
    """

    def __init__(self, channels: int, stride: int, downsample: bool = False, in_channels: int = 0):
        super().__init__([(channels, 3, stride), (channels, 3, 1)], channels, stride, downsample, in_channels)


class BottleneckV2(_BlockV2):
    """Pre-activation bottleneck: ``BN -> ReLU -> conv1x1 -> BN -> ReLU -> conv3x3 (strided) -> BN ->
    ReLU -> conv1x1``, plus the shortcut. Shapes as BasicBlockV1; children ``bn1`` ... ``conv3``,
    ``downsample``."""

    def __init__(self, channels: int, stride: int, downsample: bool = False, in_channels: int = 0):
        width = channels // 4
        super().__init__([(width, 1, 1), (width, 3, stride), (channels, 1, 1)], channels, stride, downsample,
                         in_channels)


def _projection(channels: int, stride: int, in_channels: int, batch_norm: bool) -> nn.HybridSequential:
    shortcut = nn.HybridSequential()
    shortcut.add(nn.Conv2D(channels, 1, strides=stride, use_bias=False, in_channels=in_channels))
    if batch_norm:
        shortcut.add(_bn(channels))
    return shortcut


def _check_args(name: str, layers: Any, channels: Any, classes: int, stem: str) -> None:
    if len(channels) != len(layers) + 1:
        raise ValueError(f"{name}: channels needs one entry for the stem and one per stage "
                         f"({len(layers) + 1}), got {len(channels)}")
    check_classes(name, classes)
    if stem not in STEMS:
        raise ValueError(f"{name}: stem must be one of {STEMS}, got {stem!r}")


class _ResNet(HybridBlock):
    """Shared constructor of ResNetV1 and ResNetV2: the stem, the stages, global pooling and the output."""

    _version = 1

    def __init__(self, block: type, layers: list[int], channels: list[int], classes: int = 1000,
                 thumbnail: bool = False, stem: str = "imagenet", in_channels: int = 0):
        super().__init__()
        name = type(self).__name__
        stem = "cifar" if thumbnail else stem
        _check_args(name, layers, channels, classes, stem)
        self.features = nn.HybridSequential()
        if stem == "imagenet":
            self.features.add(_conv(channels[0], 7, 2, in_channels), _bn(channels[0]), nn.Activation("relu"),
                              nn.MaxPool2D(3, 2, 1))
        else:
            self.features.add(_conv(channels[0], 3, 1, in_channels))
            if self._version == 1:  # v2 blocks start with their own BN -> ReLU
                self.features.add(_bn(channels[0]), nn.Activation("relu"))
        for i, count in enumerate(layers):
            stride = 1 if i == 0 else 2
            stage = nn.HybridSequential()
            stage.add(block(channels[i + 1], stride, stride != 1 or channels[i + 1] != channels[i],
                            in_channels=channels[i]))
            for _ in range(count - 1):
                stage.add(block(channels[i + 1], 1, False, in_channels=channels[i + 1]))
            self.features.add(stage)
        if self._version == 2:
            self.features.add(_bn(channels[-1]), nn.Activation("relu"))
        self.features.add(nn.GlobalAvgPool2D(), nn.Flatten())
        self.output = nn.Dense(classes, in_units=channels[-1])

    def forward(self, x):
        return self.output(self.features(x))


class ResNetV1(_ResNet):
    """ResNet v1 (He et al., 2015): post-activation residual blocks.

    Args:
        block: ``BasicBlockV1`` or ``BottleneckV1``.
        layers: blocks per stage, e.g. ``[2, 2, 2, 2]`` for ResNet-18.
        channels: stem channels, then the output channels of each stage.
        classes: number of outputs.
        stem: ``'imagenet'`` (7x7 convolution with stride 2, BatchNorm, ReLU, 3x3 max pooling with
            stride 2: the input is reduced 4x) or ``'cifar'`` (3x3 convolution with stride 1,
            BatchNorm, ReLU, no pooling) for small images.
        thumbnail: Gluon's name for ``stem='cifar'``.
        in_channels: image channels (0: inferred at the first call).
    Input ``(N, C, H, W)`` float32; output ``(N, classes)`` scores. Children: ``features``, ``output``.
    Raises ValueError for inconsistent arguments.
    """

    _version = 1


class ResNetV2(_ResNet):
    """ResNet v2 (He et al., 2016): pre-activation blocks (``BasicBlockV2``, ``BottleneckV2``), with a
    final BatchNorm and ReLU before the global pooling. Arguments, shapes and errors as
    :class:`ResNetV1`; the CIFAR stem is a single 3x3 convolution (the first block activates it)."""

    _version = 2


# depth -> (block kind, layers per stage, channels)
_IMAGENET_SPECS = {18: ("basic", [2, 2, 2, 2], [64, 64, 128, 256, 512]),
                   34: ("basic", [3, 4, 6, 3], [64, 64, 128, 256, 512]),
                   50: ("bottleneck", [3, 4, 6, 3], [64, 256, 512, 1024, 2048]),
                   101: ("bottleneck", [3, 4, 23, 3], [64, 256, 512, 1024, 2048]),
                   152: ("bottleneck", [3, 8, 36, 3], [64, 256, 512, 1024, 2048])}
_BLOCKS = {(1, "basic"): BasicBlockV1, (1, "bottleneck"): BottleneckV1,
           (2, "basic"): BasicBlockV2, (2, "bottleneck"): BottleneckV2}


def get_resnet(version: int, num_layers: int, pretrained: bool = False, root: Any = None,
               ctx: Any = None, device: Any = None, **kwargs: Any) -> _ResNet:
    """ResNet ``version`` (1 or 2) with ``num_layers`` in 18, 34, 50, 101, 152; ``kwargs`` go to
    :class:`ResNetV1` / :class:`ResNetV2` (``classes``, ``stem``, ``thumbnail``, ``in_channels``).
    Raises ValueError for other versions or depths, and for ``pretrained=True`` (no weights are shipped);
    ``root``, ``ctx`` and ``device`` are accepted without effect."""
    if version not in (1, 2):
        raise ValueError(f"get_resnet: version must be 1 or 2, got {version!r}")
    if num_layers not in _IMAGENET_SPECS:
        raise ValueError(f"get_resnet: num_layers must be one of {sorted(_IMAGENET_SPECS)}, got {num_layers!r}")
    no_pretrained(f"resnet{num_layers}_v{version}", pretrained, root, ctx, device)
    kind, layers, channels = _IMAGENET_SPECS[num_layers]
    return (ResNetV1, ResNetV2)[version - 1](_BLOCKS[version, kind], layers, channels, **kwargs)


def get_cifar_resnet(version: int, num_layers: int, pretrained: bool = False, root: Any = None, ctx: Any = None,
                     device: Any = None, **kwargs: Any) -> _ResNet:
    """The CIFAR ResNets of He et al. (2015, section 4.2): ``num_layers = 6n + 2``, three stages of ``n``
    basic blocks with 16, 32 and 64 channels, a CIFAR stem and 10 classes by default. Shortcuts that change
    shape are 1x1 projections (the paper's option B). Raises ValueError when ``num_layers`` is not 6n + 2, and
    for ``pretrained=True``; ``root``, ``ctx`` and ``device`` are accepted without effect."""
    if version not in (1, 2):
        raise ValueError(f"get_cifar_resnet: version must be 1 or 2, got {version!r}")
    if not isinstance(num_layers, int) or num_layers < 8 or (num_layers - 2) % 6:
        raise ValueError(f"get_cifar_resnet: num_layers must be 6n + 2 (20, 32, 44, 56, 110, ...), got {num_layers!r}")
    no_pretrained(f"cifar_resnet{num_layers}_v{version}", pretrained, root, ctx, device)
    kwargs.setdefault("classes", 10)
    kwargs.setdefault("stem", "cifar")
    n = (num_layers - 2) // 6
    return (ResNetV1, ResNetV2)[version - 1](_BLOCKS[version, "basic"], [n] * 3, [16, 16, 32, 64], **kwargs)


def _named(getter: Any, version: int, depth: int) -> Any:
    cifar = getter is get_cifar_resnet
    name = f"{'cifar_' if cifar else ''}resnet{depth}_v{version}"
    doc = f"{'CIFAR ResNet' if cifar else 'ResNet'}-{depth} v{version}; keyword arguments as :func:`{getter.__name__}`."
    return named_builder(name, doc, getter, version=version, num_layers=depth)


resnet18_v1, resnet34_v1, resnet50_v1, resnet101_v1, resnet152_v1 = (
    _named(get_resnet, 1, d) for d in (18, 34, 50, 101, 152))
resnet18_v2, resnet34_v2, resnet50_v2, resnet101_v2, resnet152_v2 = (
    _named(get_resnet, 2, d) for d in (18, 34, 50, 101, 152))
cifar_resnet20_v1, cifar_resnet56_v1, cifar_resnet110_v1 = (_named(get_cifar_resnet, 1, d) for d in (20, 56, 110))
cifar_resnet20_v2, cifar_resnet56_v2, cifar_resnet110_v2 = (_named(get_cifar_resnet, 2, d) for d in (20, 56, 110))
