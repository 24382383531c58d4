"""GluonCV 0.10.5's model zoo (Gluon 1.x library code, unchanged) under ``hybrid.mxnet.install()``.

References are MXNet 1.9.1's: tests/fixtures/gluoncv/make_fixtures.py built the models with MXNet and
GluonCV, saved ``cifar_resnet20_v1``'s parameters with ``save_parameters`` and every model's outputs;
here hybrid loads that file (the other models get the same seeded values on both sides) and must give
MXNet's outputs, in inference (eager and hybridized) and training mode, and MXNet's losses over three
Adam fine-tuning steps. GluonCV installs without its dependencies (``.ci/run``).
"""
import os
import sys

import numpy as np
import pytest

FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", "gluoncv")
sys.path.insert(0, FIXTURES)
from seeded import MODELS, inputs, seeded_params  # noqa: E402

RTOL, ATOL = 1e-4, 1e-5


@pytest.fixture(scope="module")
def gluoncv():
    """GluonCV imported through the alias. Its ``__init__`` rejects any torch >= 2 it can import, so torch
    is hidden while it imports; the alias and GluonCV's modules are removed afterwards."""
    import hybrid.mxnet
    hybrid.mxnet.install()
    torch = sys.modules.get("torch", False)
    sys.modules["torch"] = None
    try:
        import gluoncv as module
    finally:
        if torch is False:
            del sys.modules["torch"]
        else:
            sys.modules["torch"] = torch
    assert module.model_zoo.get_model is not None
    yield module
    for name in [n for n in sys.modules if n == "gluoncv" or n.startswith("gluoncv.")]:
        del sys.modules[name]
    hybrid.mxnet.uninstall()


@pytest.fixture(scope="module")
def reference():
    return np.load(os.path.join(FIXTURES, "outputs.npz"))


def _outputs(results):
    return [r.asnumpy() for r in (results if isinstance(results, (list, tuple)) else [results])]


def _build(gluoncv, name):
    import mxnet as mx
    net = gluoncv.model_zoo.get_model(name, pretrained=False, **MODELS[name])
    if name == "cifar_resnet20_v1":
        net.load_parameters(os.path.join(FIXTURES, name + ".params"))
    else:
        net.initialize()
        net(mx.nd.array(inputs(name)))  # deferred shapes
        params = net._collect_params_with_prefix()
        for key, value in seeded_params({k: p.shape for k, p in params.items()}).items():
            params[key].set_data(mx.nd.array(value))
    return net


@pytest.mark.parametrize("name", list(MODELS))
def test_a_gluoncv_model_gives_mxnets_outputs(gluoncv, reference, name):
    import mxnet as mx
    from mxnet import autograd
    net = _build(gluoncv, name)
    x = mx.nd.array(inputs(name))
    for i, out in enumerate(_outputs(net(x))):
        np.testing.assert_allclose(out, reference[f"{name}/eval/{i}"], rtol=RTOL, atol=ATOL)
    net.hybridize()
    for i, out in enumerate(_outputs(net(x))):
        np.testing.assert_allclose(out, reference[f"{name}/hybridized/{i}"], rtol=RTOL, atol=ATOL)
    if f"{name}/train/0" in reference:  # BatchNorm normalises with the batch's statistics
        with autograd.record():
            out = net(x).asnumpy()
        # mobilenetv2's last stages normalise 8 values a channel (batch 2, 2x2 pixels): float32 rounding in
        # the batch variance reaches its outputs (|out| ~ 0.5) at ~1e-4
        atol = 1e-4 if name.startswith("mobilenet") else ATOL
        np.testing.assert_allclose(out, reference[f"{name}/train/0"], rtol=RTOL, atol=atol)


def test_loading_mxnets_params_file_sets_every_parameter(gluoncv):
    import mxnet as mx
    net = _build(gluoncv, "cifar_resnet20_v1")
    saved = mx.nd.load(os.path.join(FIXTURES, "cifar_resnet20_v1.params"))
    params = net._collect_params_with_prefix()
    assert sorted(saved) == sorted(params)
    for key, value in saved.items():
        np.testing.assert_array_equal(params[key].data().asnumpy(), value.asnumpy())


def test_fine_tuning_a_gluoncv_model_gives_mxnets_losses(gluoncv, reference):
    import mxnet as mx
    from mxnet import autograd, gluon
    name = "cifar_resnet20_v1"
    net = _build(gluoncv, name)
    x = mx.nd.array(inputs(name))
    labels = mx.nd.array(np.arange(x.shape[0]) % 10)
    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
    trainer = gluon.Trainer(net.collect_params(), "adam", {"learning_rate": 1e-3})
    losses = []
    for _ in range(3):
        with autograd.record():
            loss = loss_fn(net(x), labels)
        loss.backward()
        trainer.step(x.shape[0])
        losses.append(float(loss.mean().asscalar()))
    np.testing.assert_allclose(losses, reference[f"{name}/losses"], rtol=RTOL)
    # Adam moves a weight by about the learning rate wherever its gradient is near 0 whatever its size, so
    # float32 noise in such gradients reaches the outputs at ~lr (1e-3) after the steps
    np.testing.assert_allclose(net(x).asnumpy(), reference[f"{name}/after_steps"], rtol=RTOL, atol=1e-3)
