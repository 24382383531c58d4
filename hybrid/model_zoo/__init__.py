"""Model zoo (``gluon.model_zoo.vision`` and more): ``hybrid.model_zoo.get_model('resnet18_v1', classes=10)``.

Models are built untrained (no pretrained weights are shipped); call ``net.initialize()`` before use.
"""
from .gpt import GPTModel, gpt_small
from .classic import MLP, LeNet, lenet, mlp
from .mobilenet import InvertedResidual, MobileNetV2, get_mobilenet_v2
from .registry import get_model, get_model_list
from .resnet import (BasicBlockV1, BasicBlockV2, BottleneckV1, BottleneckV2, ResNetV1, ResNetV2, get_cifar_resnet,
                     get_resnet)
from .transformer import TokenPositionEmbedding, TransformerClassifier, transformer_classifier
from .vgg import VGG, AdaptiveAvgPool2D, get_vgg

__all__ = ["get_model", "get_model_list", "MLP", "LeNet", "ResNetV1", "ResNetV2", "BasicBlockV1", "BottleneckV1",
           "BasicBlockV2", "BottleneckV2", "VGG", "AdaptiveAvgPool2D", "MobileNetV2", "InvertedResidual",
           "TransformerClassifier", "TokenPositionEmbedding", "GPTModel", "get_resnet", "get_cifar_resnet",
           "get_vgg", "get_mobilenet_v2", "mlp", "lenet", "transformer_classifier", "gpt_small"]
