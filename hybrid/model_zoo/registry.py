"""``get_model(name, **kwargs)``: models by Gluon-style name."""
from __future__ import annotations

import difflib
from typing import Any, Callable

from ..block import HybridBlock
from . import alexnet_model, classic, densenet, gpt, inception, mobilenet, resnet, squeezenet, transformer, vgg

__all__ = ["get_model", "get_model_list"]

_MODELS: dict[str, Callable[..., HybridBlock]] = {
    "mlp": classic.mlp, "lenet": classic.lenet,
    **{f"resnet{d}_v{v}": getattr(resnet, f"resnet{d}_v{v}") for v in (1, 2) for d in (18, 34, 50, 101, 152)},
    **{f"cifar_resnet{d}_v{v}": getattr(resnet, f"cifar_resnet{d}_v{v}") for v in (1, 2) for d in (20, 56, 110)},
    **{f"vgg{d}{bn}": getattr(vgg, f"vgg{d}{bn}") for bn in ("", "_bn") for d in (11, 13, 16, 19)},
    **{f"mobilenetv2_{m}": getattr(mobilenet, f"mobilenet_v2_{m.replace('.', '_')}")
       for m in ("1.0", "0.75", "0.5", "0.25")},
    **{f"mobilenet{m}": getattr(mobilenet, f"mobilenet{m.replace('.', '_')}") for m in ("1.0", "0.75", "0.5", "0.25")},
    "alexnet": alexnet_model.alexnet,
    **{f"densenet{d}": getattr(densenet, f"densenet{d}") for d in (121, 161, 169, 201)},
    "squeezenet1.0": squeezenet.squeezenet1_0, "squeezenet1.1": squeezenet.squeezenet1_1,
    "inceptionv3": inception.inception_v3,
    "transformer_classifier": transformer.transformer_classifier,
    "gpt_small": gpt.gpt_small,
}


def get_model_list() -> list[str]:
    """The names :func:`get_model` accepts, sorted."""
    return sorted(_MODELS)


def get_model(name: str, **kwargs: Any) -> HybridBlock:
    """Build the model called ``name`` (case-insensitive), e.g. ``'resnet18_v1'``, ``'resnet50_v2'``,
    ``'vgg16_bn'``, ``'mobilenet1.0'``, ``'mobilenetv2_1.0'``, ``'alexnet'``, ``'densenet121'``,
    ``'squeezenet1.1'``, ``'cifar_resnet20_v1'``, ``'lenet'``, ``'mlp'``,
    ``'transformer_classifier'``, ``'gpt_small'``; ``kwargs`` go to its constructor (``classes=10``,
    ``stem='cifar'``, ...; Gluon's ``pretrained``, ``root``, ``ctx`` and ``device`` too). Raises ValueError for
    an unknown name, listing the available ones."""
    key = name.lower() if isinstance(name, str) else name
    if key not in _MODELS:
        close = difflib.get_close_matches(str(key), _MODELS, n=3)
        hint = f" Did you mean {', '.join(map(repr, close))}?" if close else ""
        raise ValueError(f"model_zoo.get_model: unknown model {name!r}.{hint} "
                         f"Available models: {', '.join(get_model_list())}")
    return _MODELS[key](**kwargs)
