"""Model zoo (``gluon.model_zoo.vision`` and more): ``hybrid.model_zoo.get_model('resnet18_v1', classes=10)``.

Models are built untrained (no pretrained weights are shipped); call ``net.initialize()`` before use.
"""
from . import alexnet_model, classic, densenet, gpt, inception, mobilenet, resnet, squeezenet, transformer, vgg
from .alexnet_model import *  # noqa: F401,F403
from .classic import *  # noqa: F401,F403
from .densenet import *  # noqa: F401,F403
from .gpt import *  # noqa: F401,F403
from .inception import *  # noqa: F401,F403
from .mobilenet import *  # noqa: F401,F403
from .registry import get_model, get_model_list
from .resnet import *  # noqa: F401,F403
from .squeezenet import *  # noqa: F401,F403
from .transformer import *  # noqa: F401,F403
from .vgg import *  # noqa: F401,F403

_FAMILIES = (classic, resnet, vgg, mobilenet, alexnet_model, densenet, inception, squeezenet, transformer, gpt)
__all__ = ["get_model", "get_model_list"] + [name for module in _FAMILIES for name in module.__all__]
