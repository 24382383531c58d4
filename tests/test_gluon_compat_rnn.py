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


# -- 3. GRUCell / LSTMCell activations, begin_state(ctx=), infer_shape(i, x, is_bidirect) ----------
import jax  # noqa: E402

from hybrid import rnn  # noqa: E402

_NP_ACTS = {"tanh": np.tanh, "sigmoid": lambda v: 1 / (1 + np.exp(-v)), "relu": lambda v: np.maximum(v, 0),
            "softsign": lambda v: v / (1 + np.abs(v))}


def _params(cell):
    return {k.split(".")[-1]: np.asarray(p.data(), np.float64) for k, p in cell.collect_params().items()}


def _np_gru(x, h, p, act, gate):
    i2h = x @ p["i2h_weight"].T + p["i2h_bias"]
    h2h = h @ p["h2h_weight"].T + p["h2h_bias"]
    xr, xz, xn = np.split(i2h, 3, axis=-1)
    hr, hz, hn = np.split(h2h, 3, axis=-1)
    r, z = gate(xr + hr), gate(xz + hz)
    n = act(xn + r * hn)
    return (1 - z) * n + z * h


def _np_lstm(x, h, c, p, act, gate):
    i, f, g, o = np.split(x @ p["i2h_weight"].T + p["i2h_bias"] + h @ p["h2h_weight"].T + p["h2h_bias"], 4, -1)
    c = gate(f) * c + gate(i) * act(g)
    return gate(o) * act(c), c


@pytest.mark.parametrize("act,gate", [("tanh", "sigmoid"), ("relu", "softsign"), ("softsign", "tanh"),
                                      ("tanh", "relu")])
@pytest.mark.parametrize("hybridize", [False, True])
def test_gru_cell_activations_match_numpy(act, gate, hybridize):
    rs = np.random.RandomState(1)
    cell = rnn.GRUCell(5, input_size=3, activation=act, recurrent_activation=gate)
    cell.initialize(hybrid.init.Uniform(0.5))
    if hybridize:
        cell.hybridize()
    x, h = rs.randn(4, 3).astype(np.float32), rs.randn(4, 5).astype(np.float32)
    out, states = cell(x, [h])
    expected = _np_gru(x.astype(np.float64), h.astype(np.float64), _params(cell), _NP_ACTS[act], _NP_ACTS[gate])
    np.testing.assert_allclose(np.asarray(out), expected, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(np.asarray(states[0]), expected, rtol=1e-4, atol=1e-5)
    # unroll over a sequence runs the same step
    seq = rs.randn(4, 3, 3).astype(np.float32)
    outs, _ = cell.unroll(3, seq, layout="NTC", merge_outputs=True)
    ref = np.zeros((4, 5))
    for t in range(3):
        ref = _np_gru(seq[:, t].astype(np.float64), ref, _params(cell), _NP_ACTS[act], _NP_ACTS[gate])
        np.testing.assert_allclose(np.asarray(outs[:, t]), ref, rtol=1e-4, atol=1e-5)


def test_gru_cell_callable_activation_and_gradient():
    cell = rnn.GRUCell(3, input_size=2, activation=lambda v: 2 * jax.numpy.tanh(v))
    cell.initialize()
    x = np.ones((2, 2), np.float32)
    with hybrid.autograd.record():
        out, _ = cell(x, cell.begin_state(2))
        loss = out.sum()
    hybrid.autograd.backward(loss)
    assert np.isfinite(np.asarray(cell.i2h_weight.grad())).all()
    with pytest.raises(ValueError, match="recurrent_activation"):
        rnn.GRUCell(3, recurrent_activation="nope")


@pytest.mark.parametrize("act,gate", [("relu", "softsign"), ("tanh", "sigmoid")])
def test_lstm_cell_activations_match_numpy(act, gate):
    rs = np.random.RandomState(2)
    cell = rnn.LSTMCell(4, input_size=3, activation=act, recurrent_activation=gate)
    cell.initialize(hybrid.init.Uniform(0.5))
    x, h, c = rs.randn(2, 3).astype(np.float32), rs.randn(2, 4).astype(np.float32), rs.randn(2, 4).astype(np.float32)
    out, (h2, c2) = cell(x, [h, c])
    eh, ec = _np_lstm(x, h, c, _params(cell), _NP_ACTS[act], _NP_ACTS[gate])
    np.testing.assert_allclose(np.asarray(out), eh, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(np.asarray(c2), ec, rtol=1e-4, atol=1e-5)


def test_begin_state_accepts_ctx_and_device():
    dev = jax.devices()[0]
    for cell in (rnn.GRUCell(3), rnn.LSTMCell(3), rnn.LSTM(3, num_layers=2)):
        for states in (cell.begin_state(2, ctx=dev), cell.begin_state(2, func=jax.numpy.ones, device=dev),
                       cell.begin_state(batch_size=2, ctx=None)):
            assert all(s.devices() == {dev} for s in states)
    states = rnn.GRUCell(3).begin_state(2, func=jax.numpy.ones, ctx=dev, dtype="float16")
    assert states[0].dtype == np.float16 and np.asarray(states[0]).tolist() == [[1, 1, 1]] * 2
    with pytest.raises(ValueError, match="not both"):
        rnn.GRUCell(3).begin_state(2, ctx=dev, device=dev)
    with pytest.raises(TypeError, match="jax.Device"):
        rnn.GRUCell(3).begin_state(2, ctx="gpu(0)")


def test_infer_shape_gluon2_form():
    x = np.zeros((2, 5, 7), np.float32)
    cell = rnn.GRUCell(4)
    cell.infer_shape(0, x, False)
    assert cell.i2h_weight.shape == (12, 7)
    upper = rnn.LSTMCell(4)
    upper.infer_shape(1, x, False)
    assert upper.i2h_weight.shape == (16, 4)
    upper = rnn.LSTMCell(4)
    upper.infer_shape(1, x, True)
    assert upper.i2h_weight.shape == (16, 8)
    bi = rnn.BidirectionalCell(rnn.GRUCell(3), rnn.GRUCell(3))
    bi.infer_shape(0, x, False)
    assert bi.l_cell.i2h_weight.shape == bi.r_cell.i2h_weight.shape == (9, 7)
    bi2 = rnn.BidirectionalCell(rnn.GRUCell(3), rnn.GRUCell(3))
    bi2.infer_shape(1, x, False)
    assert bi2.l_cell.i2h_weight.shape == (9, 6)  # above a bidirectional layer
    stack = rnn.SequentialRNNCell()
    stack.add(rnn.RNNCell(4), rnn.RNNCell(4))
    stack.infer_shape(0, x, False)
    assert [c.i2h_weight.shape for c in stack] == [(4, 7), (4, 4)]
    stack.initialize()
    out, _ = stack.unroll(5, x, merge_outputs=True)
    assert out.shape == (2, 5, 4)
