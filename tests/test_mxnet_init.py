"""``mx.init`` against MXNet 1.9.1: every initializer it exports, MXNet's ``init(desc, arr)`` form, the
registry, and initializers that choose by a parameter's name inside Gluon code.

The programs are ``fixtures/mxnet_init/cases.py``; MXNet's results were saved by its ``make_fixtures.py``.
Orthogonal's draws differ between the frameworks: its case saves ``W W^T`` (or ``W^T W``), which MXNet
gives as ``scale**2 I`` and hybrid must too.
"""
import logging

import numpy as np
import pytest

import hybrid
import hybrid.mxnet as mx
from hybrid.mxnet.gluon import nn
from helpers import fixture_module

cases = fixture_module("mxnet_init")
compare_with_mxnet = fixture_module("mxnet_init", "compare").compare_with_mxnet

INIT_CASES = ["bilinear", "orthogonal", "mixed_direct", "init_desc_dispatch", "load_init", "registry", "fused_rnn"]


@pytest.mark.parametrize("case", INIT_CASES)
def test_case_gives_mxnets_results(case):
    hybrid.random.seed(0)
    compare_with_mxnet(case, cases.CASES[case](mx), atol=2e-4 if case == "orthogonal" else 1e-7)


def test_every_initializer_mxnet_exports_is_there():
    for name in ("Initializer", "InitDesc", "Load", "Mixed", "Zero", "One", "Constant", "Uniform", "Normal",
                 "Orthogonal", "Xavier", "MSRAPrelu", "Bilinear", "LSTMBias", "FusedRNN", "register", "create", "alias"):
        assert hasattr(mx.init, name), name
    with pytest.raises(AttributeError, match="no attribute 'Nonexistent'"):
        mx.init.Nonexistent


def test_orthogonal_in_a_layer_is_orthogonal_with_its_scale():
    hybrid.random.seed(3)
    net = nn.Dense(4, weight_initializer=mx.init.Orthogonal(scale=2.0, rand_type="normal"))
    net.initialize()
    net(mx.nd.ones((1, 6)))                     # deferred: the shape (4, 6) is known at the first call
    w = np.asarray(net.weight.data(), np.float64)
    np.testing.assert_allclose(w @ w.T, 4.0 * np.eye(4), atol=1e-5)
    tall = mx.init.Orthogonal(scale=1.0)((6, 2, 1), "float32")
    flat = np.asarray(tall, np.float64).reshape(6, 2)
    np.testing.assert_allclose(flat.T @ flat, np.eye(2), atol=1e-5)
    with pytest.raises(ValueError, match="rand_type"):
        mx.init.Orthogonal(rand_type="gaussian")


def test_bilinear_kernel_upsamples_a_constant_image_to_a_constant_interior():
    up = nn.Conv2DTranspose(1, kernel_size=4, strides=2, padding=1, in_channels=1, use_bias=False,
                            weight_initializer=mx.init.Bilinear())
    up.initialize()
    out = up(mx.nd.ones((1, 1, 3, 3))).asnumpy()
    assert out.shape == (1, 1, 6, 6)
    np.testing.assert_allclose(out[0, 0, 1:-1, 1:-1], 1.0, rtol=1e-6)   # bilinear interpolation of ones


def _block():
    net = nn.HybridSequential()
    net.add(nn.Dense(3, in_units=2), nn.BatchNorm(in_channels=3), nn.Dense(2, in_units=3, use_bias=False))
    return net


def test_mixed_in_gluon_matches_the_keys_of_collect_params():
    net = _block()
    keys = list(net.collect_params())
    assert "0.weight" in keys and "2.weight" in keys
    net.initialize(mx.init.Mixed(["2\\.", ".*"], [mx.init.Constant(0.5), mx.init.One()]))
    np.testing.assert_array_equal(net[2].weight.data(), np.full((2, 3), 0.5))
    np.testing.assert_array_equal(net[0].weight.data(), np.ones((3, 2)))
    np.testing.assert_array_equal(net[0].bias.data(), np.zeros(3))        # its own init ('zeros') wins
    with pytest.raises(ValueError, match="did not match any pattern"):
        _block().initialize(mx.init.Mixed(["2\\."], [mx.init.One()]))


def test_load_in_gluon_takes_values_by_key_and_the_rest_from_default_init(tmp_path, caplog):
    source = _block()
    source.initialize(mx.init.Normal(1.0))
    values = {k: p.data() for k, p in source.collect_params().items() if k.startswith("0.")}
    net = _block()
    with caplog.at_level(logging.INFO):
        net.initialize(mx.init.Load(values, default_init=mx.init.Constant(0.25), verbose=True))
    np.testing.assert_array_equal(net[0].weight.data(), source[0].weight.data())
    np.testing.assert_array_equal(net[2].weight.data(), np.full((2, 3), 0.25))
    assert "Initialized 0.weight by loading" in caplog.text and "Initialized 2.weight by default" in caplog.text
    path = str(tmp_path / "w.params")
    mx.nd.save(path, {"arg:2.weight": mx.nd.full((2, 3), 3.0)})
    net = _block()
    net.initialize(mx.init.Load(path, default_init="zeros"))
    np.testing.assert_array_equal(net[2].weight.data(), np.full((2, 3), 3.0))
    with pytest.raises(ValueError, match="not among the loaded names"):
        _block().initialize(mx.init.Load(path))
    with pytest.raises(ValueError, match="shape"):
        _block().initialize(mx.init.Load({"2.weight": np.ones((3, 3))}, default_init="zeros"))


def test_an_mxnet_style_initializer_gets_the_parameters_name():
    seen = []

    class ByName(mx.init.Initializer):
        def _init_weight(self, name, arr):
            seen.append(name)
            arr[:] = len(name)

    net = _block()
    net.initialize(ByName())
    assert seen == ["0.weight", "2.weight"]                       # bias, gamma, beta, ... have their own init
    np.testing.assert_array_equal(net[2].weight.data(), np.full((2, 3), 8.0))
    p = mx.gluon.Parameter("alone_weight", shape=(2,), init=ByName())
    p.initialize()
    assert seen[-1] == "alone_weight"


def test_init_by_string_name_and_json():
    net = nn.Dense(2, in_units=2, weight_initializer="orthogonal")
    net.initialize()
    w = np.asarray(net.weight.data(), np.float64)
    np.testing.assert_allclose(w @ w.T, 1.414 ** 2 * np.eye(2), atol=1e-5)
    assert mx.init.create('["xavier", {"magnitude": 2.0}]') == mx.init.Xavier(magnitude=2.0)
    assert mx.init.create({"initializer": "normal", "sigma": 0.5}) == mx.init.Normal(0.5)
    assert mx.init.create("Uniform", 0.2) == mx.init.Uniform(0.2)
    with pytest.raises(ValueError, match="unknown initializer 'nope'"):
        mx.init.create("nope")
    with pytest.raises(TypeError, match="already an initializer"):
        mx.init.create(mx.init.One(), value=2)


def test_an_aliased_registration_resolves_by_every_name():
    @mx.init.register
    @mx.init.alias("threes", "tres")
    class Three(mx.init.Initializer):
        def _sample(self, rng, shape):
            return np.full(shape, 3.0)

    for name in ("three", "threes", "TRES"):
        np.testing.assert_array_equal(mx.init.create(name)((2,), "float32"), [3.0, 3.0])


def test_fused_rnn_rejects_a_size_that_fits_no_network():
    with pytest.raises(ValueError, match="fit no lstm"):
        mx.init.FusedRNN(mx.init.One(), 2, 1, "lstm")(mx.init.InitDesc("x_weight"), mx.nd.zeros((7,)))
    with pytest.raises(ValueError, match="mode"):
        mx.init.FusedRNN(None, 2, 1, "lstm2")


def test_fused_rnn_without_init_uses_the_initializer_that_was_called():
    arr = mx.nd.zeros((2 * (3 + 2 + 2) * 2,))                 # rnn_tanh, 1 layer, bidirectional, 3 inputs
    desc = mx.init.InitDesc("rnn_weight", attrs={"__init__": mx.init.FusedRNN(None, 2, 1, "rnn_tanh", True).dumps()})
    mx.init.Constant(0.5)(desc, arr)
    values = arr.asnumpy()
    weights = 2 * (2 * 3 + 2 * 2)                              # i2h (2, 3) and h2h (2, 2), per direction
    np.testing.assert_array_equal(values[:weights], 0.5)
    np.testing.assert_array_equal(values[weights:], 0.0)      # biases: zeros


def test_initializers_written_for_the_alias_still_serve_hybrid_directly():
    assert hybrid.init.Orthogonal is mx.init.Orthogonal and hybrid.init.Bilinear is mx.init.Bilinear
    p = hybrid.Parameter("w", shape=(2, 3), init=mx.init.Mixed([".*"], [hybrid.init.Constant(2.0)]))
    p.initialize()
    np.testing.assert_array_equal(p.data(), np.full((2, 3), 2.0))
