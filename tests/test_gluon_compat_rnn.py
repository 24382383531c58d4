"""Gluon compatibility (issue #14): model zoo ``root=``, ``hybridize`` keywords, GRUCell activations,
``begin_state(ctx=)``, ``infer_shape``, and the ResidualCell / ZoneoutCell / HybridSequentialRNNCell cells."""
import os

import numpy as np
import pytest

import hybrid
from hybrid import model_zoo


# -- 1. model zoo root= ----------------------------------------------------------------------
@pytest.mark.parametrize("name", ["resnet18_v1", "cifar_resnet20_v2", "vgg11", "mobilenetv2_0.25", "lenet", "mlp",
                                  "transformer_classifier", "gpt_small"])
def test_get_model_accepts_root(name, tmp_path):
    net = model_zoo.get_model(name, pretrained=False, root=str(tmp_path))
    assert isinstance(net, hybrid.HybridBlock)
    assert os.listdir(tmp_path) == []  # nothing is downloaded or written


def test_get_resnet_and_builders_accept_root(tmp_path):
    net = model_zoo.get_resnet(1, 18, root=tmp_path, classes=7)
    net.initialize()
    assert net(np.zeros((1, 3, 32, 32), np.float32)).shape == (1, 7)
    assert isinstance(model_zoo.resnet18_v2(root="~/.mxnet/models"), model_zoo.ResNetV2)
    assert isinstance(model_zoo.vgg11_bn(root=None), model_zoo.VGG)
    assert isinstance(model_zoo.get_cifar_resnet(2, 20, root=tmp_path), model_zoo.ResNetV2)
    assert isinstance(model_zoo.get_mobilenet_v2(0.5, root=tmp_path), model_zoo.MobileNetV2)


def test_root_is_checked_and_pretrained_still_raises(tmp_path):
    with pytest.raises(TypeError, match="root must be a directory path"):
        model_zoo.get_model("resnet18_v1", root=3)
    with pytest.raises(ValueError, match="no pretrained weights"):
        model_zoo.get_model("resnet18_v1", pretrained=True, root=str(tmp_path))
    with pytest.raises(ValueError, match="no pretrained weights"):
        model_zoo.get_model("lenet", pretrained=True)
