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


# -- 2. hybridize(**Gluon keywords) ----------------------------------------------------------
def _mlp():
    net = hybrid.nn.HybridSequential()
    net.add(hybrid.nn.Dense(8, activation="relu", in_units=4), hybrid.nn.Dense(3, in_units=8))
    net.initialize()
    return net


def test_hybridize_accepts_gluon_keywords_without_effect():
    x = np.random.RandomState(0).randn(5, 4).astype(np.float32)
    net = _mlp()
    expected = np.asarray(net(x))
    net.hybridize(static_alloc=True, static_shape=True, inline_limit=0, forward_bulk_size=15,
                  backward_bulk_size=15, partition_if_dynamic=False)
    np.testing.assert_allclose(np.asarray(net(x)), expected, rtol=1e-5, atol=1e-6)
    net.hybridize(True, inline_limit=10)
    np.testing.assert_allclose(np.asarray(net(x)), expected, rtol=1e-5, atol=1e-6)


def test_block_hybridize_forwards_gluon_keywords_to_children():
    class Outer(hybrid.Block):
        def __init__(self):
            super().__init__()
            self.body = _mlp()

        def forward(self, x):
            return self.body(x)

    x = np.ones((2, 4), np.float32)
    net = Outer()
    expected = np.asarray(net(x))
    net.hybridize(active=True, inline_limit=2, forward_bulk_size=None, backward_bulk_size=4)
    assert net.body._active
    np.testing.assert_allclose(np.asarray(net(x)), expected, rtol=1e-5, atol=1e-6)


def test_hybridize_still_rejects_unknown_keywords():
    with pytest.raises(TypeError):
        _mlp().hybridize(inline_limt=2)
