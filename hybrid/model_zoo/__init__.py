"""Model zoo (``gluon.model_zoo.vision`` and more): ``hybrid.model_zoo.get_model('resnet18_v1', classes=10)``.

Models are built untrained (no pretrained weights are shipped); call ``net.initialize()`` before use.
"""
from . import classic, gpt, mobilenet, resnet, transformer, vgg
from .classic import *  # noqa: F401,F403
from .gpt import *  # noqa: F401,F403
from .mobilenet import *  # noqa: F401,F403
from .registry import get_model, get_model_list
from .resnet import *  # noqa: F401,F403
from .transformer import *  # noqa: F401,F403
from .vgg import *  # noqa: F401,F403

__all__ = ["get_model", "get_model_list"] + [name for module in (classic, resnet, vgg, mobilenet, transformer, gpt)
                                             for name in module.__all__]
