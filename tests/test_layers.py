"""Every layer: forward against NumPy, hybridized against eager (outputs and gradients, train and
predict mode), and gradients against finite differences of the NumPy reference."""
from dataclasses import dataclass
from typing import Callable

import numpy as np
import pytest

import hybrid
from hybrid import autograd, init, nn
from hybrid.errors import ShapeError

import references as ref
from conftest import assert_close
from helpers import clone_params, run_with_grads


@dataclass
class Case:
    name: str
    make: Callable
    shape: tuple
    reference: Callable  # (dict of float64 arrays: 'x' and parameter names) -> output
    integer_input: int = 0  # > 0: integer inputs in [0, integer_input)

    def input(self, rng):
        if self.integer_input:
            return rng.integers(0, self.integer_input, self.shape).astype(np.int32)
        return rng.standard_normal(self.shape).astype(np.float32)


def _conv_nhwc(a, **kw):
    x = a["x"].transpose(0, 3, 1, 2)
    w = a["weight"].transpose(0, 3, 1, 2)
    return ref.conv2d(x, w, a["bias"], **kw).transpose(0, 2, 3, 1)


CASES = [
    Case("dense", lambda: nn.Dense(5, in_units=12), (3, 12), lambda a: ref.dense(a["x"], a["weight"], a["bias"])),
    Case("dense_deferred_flatten", lambda: nn.Dense(4), (2, 3, 4),
         lambda a: ref.dense(a["x"], a["weight"], a["bias"])),
    Case("dense_no_flatten", lambda: nn.Dense(4, flatten=False, use_bias=False), (2, 3, 6),
         lambda a: ref.dense(a["x"], a["weight"], flatten=False)),
    Case("dense_relu", lambda: nn.Dense(6, activation="relu"), (4, 5),
         lambda a: np.maximum(ref.dense(a["x"], a["weight"], a["bias"]), 0)),
    *[Case(f"activation_{name}", (lambda n=name: nn.Activation(n)), (3, 7), (lambda a, f=fn: f(a["x"])))
      for name, fn in ref.ACTIVATIONS.items()],
    Case("conv2d", lambda: nn.Conv2D(6, 3, padding=1, in_channels=4), (2, 4, 7, 7),
         lambda a: ref.conv2d(a["x"], a["weight"], a["bias"], (1, 1), (1, 1), (1, 1), 1)),
    Case("conv2d_strided_dilated_grouped", lambda: nn.Conv2D(6, (3, 2), strides=(2, 1), padding=(2, 1),
                                                             dilation=(2, 1), groups=2), (2, 4, 9, 8),
         lambda a: ref.conv2d(a["x"], a["weight"], a["bias"], (2, 1), (2, 1), (2, 1), 2)),
    Case("conv2d_nhwc_tanh", lambda: nn.Conv2D(5, 3, layout="NHWC", activation="tanh"), (2, 6, 6, 3),
         lambda a: np.tanh(_conv_nhwc(a, stride=(1, 1), pad=(0, 0), dilation=(1, 1), groups=1))),
    Case("maxpool", lambda: nn.MaxPool2D(3, 2, 1), (2, 3, 7, 7),
         lambda a: ref.pool2d(a["x"], (3, 3), (2, 2), (1, 1), "max")),
    Case("maxpool_ceil", lambda: nn.MaxPool2D(2, 2, ceil_mode=True), (1, 2, 7, 5),
         lambda a: ref.pool2d(a["x"], (2, 2), (2, 2), (0, 0), "max", ceil_mode=True)),
    Case("avgpool", lambda: nn.AvgPool2D(3, 2, 1), (2, 3, 8, 7),
         lambda a: ref.pool2d(a["x"], (3, 3), (2, 2), (1, 1), "avg")),
    Case("avgpool_exclude_pad_ceil", lambda: nn.AvgPool2D(3, 2, 1, ceil_mode=True, count_include_pad=False),
         (2, 3, 8, 6), lambda a: ref.pool2d(a["x"], (3, 3), (2, 2), (1, 1), "avg", True, False)),
    Case("global_avgpool", lambda: nn.GlobalAvgPool2D(), (2, 3, 5, 4),
         lambda a: a["x"].mean(axis=(2, 3), keepdims=True)),
    Case("batchnorm_predict", lambda: nn.BatchNorm(in_channels=3, running_mean_initializer=init.Normal(1.0),
                                                   running_variance_initializer=init.Constant(2.0),
                                                   gamma_initializer=init.Normal(1.0)), (4, 3, 2, 2),
         lambda a: ref.batch_norm_infer(a["x"], a["gamma"], a["beta"], a["running_mean"], a["running_var"], 1e-5)),
    Case("layernorm", lambda: nn.LayerNorm(gamma_initializer=init.Normal(1.0), beta_initializer=init.Normal(1.0)),
         (3, 4, 6), lambda a: ref.layer_norm(a["x"], a["gamma"], a["beta"], 1e-5)),
    Case("embedding", lambda: nn.Embedding(10, 4), (3, 5), lambda a: a["weight"][a["x"].astype(int)],
         integer_input=10),
    Case("flatten", lambda: nn.Flatten(), (2, 3, 4), lambda a: a["x"].reshape(2, -1)),
    Case("hybrid_lambda", lambda: nn.HybridLambda("tanh"), (3, 3), lambda a: np.tanh(a["x"])),
]
IDS = [c.name for c in CASES]
WITH_PARAMS = [c for c in CASES if c.name.startswith(("dense", "conv", "batchnorm", "layernorm", "embedding"))]


def _built(case, rng, seed=0):
    hybrid.random.seed(seed)
    net = case.make()
    net.initialize(init.Normal(0.5))
    x = case.input(rng)
    net(x)  # completes deferred initialisation
    return net, x


def _arrays(net, x):
    arrays = {name: np.asarray(p.data(), np.float64) for name, p in net.collect_params().items()}
    arrays["x"] = np.asarray(x, np.float64)
    return arrays


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_forward_matches_numpy(case, rng):
    net, x = _built(case, rng)
    out = net(x)
    assert_close(out, case.reference(_arrays(net, x)), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("training", [False, True], ids=["predict", "train"])
@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_hybridized_equals_eager(case, training, rng):
    eager, x = _built(case, rng)
    compiled, _ = _built(case, rng, seed=1)
    clone_params(eager, compiled)
    compiled.hybridize()
    out_e, grads_e = run_with_grads(eager, (x,), training)
    out_h, grads_h = run_with_grads(compiled, (x,), training)
    assert_close(out_h, out_e, rtol=1e-5, atol=1e-5)
    assert grads_e.keys() == grads_h.keys()
    for name in grads_e:
        assert_close(grads_h[name], grads_e[name], rtol=1e-4, atol=1e-5)
    for (name, p), q in zip(eager.collect_params().items(), compiled.collect_params().values()):
        assert_close(q.data(), p.data(), rtol=1e-5, atol=1e-6)  # state updates agree too


@pytest.mark.parametrize("case", WITH_PARAMS, ids=[c.name for c in WITH_PARAMS])
def test_gradients_match_finite_differences(case, rng):
    net, x = _built(case, rng)
    _, grads = run_with_grads(net, (x,), training=False)
    arrays = _arrays(net, x)
    head = np.random.default_rng(0).standard_normal(np.shape(case.reference(arrays)))
    loss = lambda a: float((case.reference(a) * head).sum())  # noqa: E731
    for name, grad in grads.items():
        flat = np.argsort(np.abs(np.asarray(grad)).ravel())[-3:]  # the largest entries: clear signal
        for index in [np.unravel_index(i, grad.shape) for i in flat]:
            expected = ref.numeric_grad(loss, arrays, name, index)
            assert abs(grad[index] - expected) <= 2e-3 * max(1.0, abs(expected)), (name, index)


class InputAsParameter(hybrid.HybridBlock):
    """``layer(z)`` with the input held in a parameter, so its gradient is observable."""

    def __init__(self, layer, x):
        super().__init__()
        self.z = hybrid.Parameter("z", shape=x.shape, init=init.Constant(x))
        self.layer = layer

    def forward(self):
        return self.layer(self.z.data())


PARAM_FREE = [c for c in CASES if c not in WITH_PARAMS]


@pytest.mark.parametrize("hybridize", [False, True])
@pytest.mark.parametrize("case", PARAM_FREE, ids=[c.name for c in PARAM_FREE])
def test_input_gradients_of_parameter_free_layers(case, hybridize, rng):
    x = case.input(rng)
    block = InputAsParameter(case.make(), x)
    block.initialize()
    if hybridize:
        block.hybridize()
    out, grads = run_with_grads(block, (), training=True)
    head = np.random.default_rng(0).standard_normal(out.shape)
    loss = lambda a: float((case.reference({"x": a["z"]}) * head).sum())  # noqa: E731
    arrays = {"z": x.astype(np.float64)}
    for index in [np.unravel_index(i, x.shape) for i in rng.choice(x.size, 6, replace=False)]:
        expected = ref.numeric_grad(loss, arrays, "z", index)
        assert abs(grads["z"][index] - expected) <= 2e-3 * max(1.0, abs(expected)), index


def test_batchnorm_training_uses_batch_stats_and_updates_running_stats(rng):
    for hybridize in (False, True):
        bn = nn.BatchNorm(momentum=0.8, in_channels=3, gamma_initializer=init.Normal(1.0))
        bn.initialize()
        if hybridize:
            bn.hybridize()
        x = rng.standard_normal((5, 3, 4, 2)).astype(np.float32) * 3 + 1
        gamma = np.asarray(bn.gamma.data(), np.float64)
        with autograd.record():
            y = bn(x)
        expected, mean, var = ref.batch_norm_train(x.astype(np.float64), gamma, np.zeros(3), 1e-5)
        assert_close(y, expected, rtol=1e-4, atol=1e-4)
        assert_close(bn.running_mean.data(), 0.2 * mean, rtol=1e-5, atol=1e-5)
        assert_close(bn.running_var.data(), 0.8 + 0.2 * var, rtol=1e-5, atol=1e-5)
        with autograd.predict_mode():
            y2 = bn(x)
        assert_close(y2, ref.batch_norm_infer(x, gamma, np.zeros(3), 0.2 * mean, 0.8 + 0.2 * var, 1e-5),
                     rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("hybridize", [False, True])
def test_dropout_fresh_masks_scaling_and_gradient(hybridize, rng):
    drop = nn.Dropout(0.5)
    if hybridize:
        drop.hybridize()
    x = rng.uniform(1, 2, (64, 64)).astype(np.float32)
    np.testing.assert_array_equal(np.asarray(drop(x)), x)  # predict mode: identity
    masks = []
    for _ in range(3):
        with autograd.record():
            y = drop(x)
        autograd.backward(y)
        y = np.asarray(y)
        kept = y != 0
        assert_close(y[kept], 2 * x[kept])
        assert 0.4 < kept.mean() < 0.6
        masks.append(kept)
    assert not np.array_equal(masks[0], masks[1]) and not np.array_equal(masks[1], masks[2])


def test_dropout_axes_share_mask(rng):
    drop = nn.Dropout(0.5, axes=(1,))
    with autograd.train_mode():
        y = np.asarray(drop(np.ones((50, 8), np.float32)))
    assert all(len(set(row)) == 1 for row in y)


def test_deferred_init_conv_on_4d_input():
    for hybridize in (False, True):
        layer = nn.Conv2D(10, 2)
        layer.initialize()
        if hybridize:
            layer.hybridize()
        out = layer(np.ones((5, 4, 10, 10), np.float32))
        assert out.shape == (5, 10, 9, 9)
        assert layer.weight.shape == (10, 4, 2, 2) and layer.bias.shape == (10,)


@pytest.mark.parametrize("hybridize", [False, True])
def test_bad_input_errors_name_the_layer(hybridize):
    net = nn.HybridSequential()
    net.add(nn.Dense(4, in_units=3), nn.Conv2D(2, 3))
    net.initialize()
    if hybridize:
        net.hybridize()
    with pytest.raises(ShapeError, match=r"Dense '0'.*expected inputs with 3 features.*\(2, 5\)"):
        net(np.ones((2, 5), np.float32))
    with pytest.raises(ShapeError, match=r"Conv2D '1'.*expected a 4-D input in layout 'NCHW'"):
        net(np.ones((2, 3), np.float32))
    bn = nn.BatchNorm(in_channels=3)
    bn.initialize()
    with pytest.raises(ShapeError, match="BatchNorm: expected 3 channels"):
        bn(np.ones((2, 4, 5), np.float32))


def test_bad_constructor_arguments():
    with pytest.raises(ValueError, match="Dense: units must be a non-negative integer"):
        nn.Dense(-3)
    with pytest.raises(ValueError, match="Conv2D: layout must be one of"):
        nn.Conv2D(3, 3, layout="NCWH")
    with pytest.raises(ValueError, match="Conv2D: kernel_size"):
        nn.Conv2D(3, (3, 0))
    with pytest.raises(ValueError, match="Dropout: rate"):
        nn.Dropout(1.5)
    with pytest.raises(ValueError, match="Activation: unknown activation"):
        nn.Activation("swishy")
    with pytest.raises(ValueError, match="divisible by groups"):
        nn.Conv2D(5, 3, groups=2)
