"""torchvision's ResNet, VGG and MobileNetV2 names on the model zoo's networks.

The zoo's ResNet v1, VGG and MobileNetV2 compute torchvision's functions, with two differences handled here:
the names (torchvision's ``layer1.0.bn1`` is the zoo's ``features.4.0.body.1``), and the bottleneck of
ResNet-50/101/152, whose stride torchvision puts on the 3x3 convolution (ResNet v1.5) and the zoo's
``BottleneckV1`` on the first 1x1 convolution (Gluon's ResNet v1).
"""
from __future__ import annotations

import re
from typing import Any, Callable

from .. import model_zoo, nn
from ..block import HybridBlock

_RESNETS = {"resnet18": 18, "resnet34": 34, "resnet50": 50, "resnet101": 101, "resnet152": 152}
_VGGS = {f"vgg{depth}{'_bn' if bn else ''}": (depth, bn) for depth in (11, 13, 16, 19) for bn in (False, True)}
ARCHS = tuple(_RESNETS) + tuple(_VGGS) + ("mobilenet_v2",)

_RESNET_BODY = re.compile(r"layer(\d)\.(\d+)\.(conv|bn)(\d)\.(.+)")
_RESNET_SHORTCUT = re.compile(r"layer(\d)\.(\d+)\.downsample\.(\d)\.(.+)")
_MOBILENET_BODY = re.compile(r"features\.(\d+)\.conv\.(\d+)\.(?:(\d)\.)?(.+)")
_MOBILENET_CONV_BN = re.compile(r"features\.(\d+)\.(\d)\.(.+)")


def _resnet_name(name: str) -> str:
    """``layer{s}.{b}.conv{i}`` -> ``features.{s+3}.{b}.body.{3(i-1)}``, ``bn{i}`` one further (the zoo's
    body is conv, BN, ReLU, conv, BN, ...); the stem's ``conv1``/``bn1`` -> ``features.0``/``.1``; ``fc`` ->
    ``output``."""
    match = _RESNET_BODY.fullmatch(name)
    if match:
        stage, block, kind, index, rest = match.groups()
        position = 3 * (int(index) - 1) + (kind == "bn")
        return f"features.{int(stage) + 3}.{block}.body.{position}.{rest}"
    match = _RESNET_SHORTCUT.fullmatch(name)
    if match:
        stage, block, index, rest = match.groups()
        return f"features.{int(stage) + 3}.{block}.downsample.{index}.{rest}"
    for torch_prefix, zoo_prefix in (("conv1.", "features.0."), ("bn1.", "features.1."), ("fc.", "output.")):
        if name.startswith(torch_prefix):
            return zoo_prefix + name[len(torch_prefix):]
    return name


def _vgg_mapping(depth: int, batch_norm: bool) -> Callable[[str], str]:
    """torchvision's ``features`` have the zoo's indices; its ``classifier.0``/``.3`` are the zoo's Dense
    layers after the adaptive pooling (``features.{n+1}``/``{n+3}``), ``classifier.6`` its ``output``."""
    convs = sum(model_zoo.vgg._SPECS[depth][0])
    pooled = convs * (3 if batch_norm else 2) + 5  # index of the zoo's AdaptiveAvgPool2D
    renames = {"classifier.0.": f"features.{pooled + 1}.", "classifier.3.": f"features.{pooled + 3}.",
               "classifier.6.": "output."}

    def rename(name: str) -> str:
        for torch_prefix, zoo_prefix in renames.items():
            if name.startswith(torch_prefix):
                return zoo_prefix + name[len(torch_prefix):]
        return name
    return rename


def _mobilenet_v2_name(name: str) -> str:
    """torchvision's ``features.{k}`` (k >= 1, an InvertedResidual) is the zoo's ``features.{k+2}`` (the
    zoo's stem is three layers, not one); inside, ``conv.{j}.{0|1}`` (convolution and BN of the j-th
    Conv2dNormActivation) is ``body.{3j}``/``{3j+1}`` and the final projection's ``conv.{m}``/``conv.{m+1}``
    is ``body.{3m}``/``{3m+1}``, with m = 1 in the first block (no expansion) and 2 elsewhere."""
    match = _MOBILENET_BODY.fullmatch(name)
    if match:
        block, index, sub, rest = int(match[1]), int(match[2]), match[3], match[4]
        if sub is not None:
            position = 3 * index + int(sub)
        else:
            activated = 1 if block == 1 else 2
            position = 3 * activated + (index - activated)
        return f"features.{block + 2}.body.{position}.{rest}"
    match = _MOBILENET_CONV_BN.fullmatch(name)
    if match:
        block, sub, rest = int(match[1]), int(match[2]), match[3]
        return f"features.{(block + 2 if block else 0) + sub}.{rest}"
    if name.startswith("classifier.1."):
        return "output.1." + name[len("classifier.1."):]
    return name


def torchvision_mapping(arch: str) -> Callable[[str], str]:
    """The ``mapping`` from torchvision's parameter names for ``arch`` to the zoo network's (see
    :func:`load_torch_state_dict`); a name it does not know is returned unchanged. Raises ValueError for an
    ``arch`` not in ``TORCHVISION_ARCHS``."""
    if arch in _RESNETS:
        return _resnet_name
    if arch in _VGGS:
        return _vgg_mapping(*_VGGS[arch])
    if arch == "mobilenet_v2":
        return _mobilenet_v2_name
    raise ValueError(f"unknown torchvision arch {arch!r}; expected one of {', '.join(ARCHS)}")


class TorchvisionBottleneck(model_zoo.BottleneckV1):
    """``BottleneckV1`` with the stride on the 3x3 convolution, as in torchvision's ResNet-50/101/152
    (ResNet v1.5). Arguments, shapes and children as :class:`~hybrid.model_zoo.BottleneckV1`."""

    def __init__(self, channels: int, stride: int, downsample: bool = False, in_channels: int = 0):
        super().__init__(channels, stride, downsample, in_channels)
        width = channels // 4
        body = nn.HybridSequential()
        body.add(nn.Conv2D(width, 1, use_bias=False, in_channels=in_channels), nn.BatchNorm(in_channels=width),
                 nn.Activation("relu"),
                 nn.Conv2D(width, 3, strides=stride, padding=1, use_bias=False, in_channels=width),
                 nn.BatchNorm(in_channels=width), nn.Activation("relu"),
                 nn.Conv2D(channels, 1, use_bias=False, in_channels=width), nn.BatchNorm(in_channels=channels))
        self.body = body


def torchvision_net(arch: str, **kwargs: Any) -> HybridBlock:
    """The model-zoo network with the structure of torchvision's ``arch`` (one of ``TORCHVISION_ARCHS``),
    ready for :func:`load_torchvision`: ``resnet18_v1``/``resnet34_v1``, a ResNetV1 of
    :class:`TorchvisionBottleneck` for ResNet-50/101/152, ``vgg*``/``vgg*_bn`` and ``mobilenet_v2_1_0``.
    ``kwargs`` go to the zoo's constructor (``classes``, ``in_channels``). Raises ValueError for an
    unknown ``arch``."""
    torchvision_mapping(arch)  # validates arch
    if arch in _RESNETS:
        depth = _RESNETS[arch]
        if depth < 50:
            return model_zoo.get_resnet(1, depth, **kwargs)
        _, layers, channels = model_zoo.resnet._IMAGENET_SPECS[depth]
        return model_zoo.ResNetV1(TorchvisionBottleneck, layers, channels, **kwargs)
    if arch in _VGGS:
        depth, batch_norm = _VGGS[arch]
        return model_zoo.get_vgg(depth, batch_norm=batch_norm, **kwargs)
    return model_zoo.get_mobilenet_v2(1.0, **kwargs)


def check_structure(net: HybridBlock, arch: str) -> None:
    """Refuse a network whose function differs from torchvision's ``arch`` although the weights would fit:
    a ResNet-50/101/152 whose bottlenecks stride the 1x1 convolution (the zoo's ``resnet50_v1``)."""
    if arch not in _RESNETS or _RESNETS[arch] < 50:
        return
    blocks: list = []
    net.apply(blocks.append)
    for block in blocks:
        if isinstance(block, model_zoo.BottleneckV1) and block.body._children["0"]._strides != (1, 1):
            raise ValueError(
                f"load_torchvision: torchvision's {arch} strides the 3x3 convolution of its bottlenecks (ResNet "
                f"v1.5), this {type(net).__name__} the first 1x1 one (model_zoo's {arch}_v1, Gluon's ResNet v1): "
                f"the weights would fit but the outputs differ. Build the network with "
                f"hybrid.interop.torch.torchvision_net({arch!r}) instead.")
