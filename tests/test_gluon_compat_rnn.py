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


# -- 4. ResidualCell, ZoneoutCell, HybridSequentialRNNCell -------------------------------------
def _base(hidden=3, input_size=3):
    cell = rnn.GRUCell(hidden, input_size=input_size)
    cell.initialize(hybrid.init.Uniform(0.5))
    return cell


@pytest.mark.parametrize("hybridize", [False, True])
def test_residual_cell_is_base_plus_input(hybridize):
    # after MXNet's test_residual: outputs have the input's shape, and equal the base cell's plus the input
    rs = np.random.RandomState(3)
    base = _base()
    cell = rnn.ResidualCell(base)
    if hybridize:
        cell.hybridize()
    x, h = rs.randn(2, 3).astype(np.float32), rs.randn(2, 3).astype(np.float32)
    out, states = cell(x, [h])
    base_out, base_states = base(x, [h])
    np.testing.assert_allclose(np.asarray(out), np.asarray(base_out) + x, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(np.asarray(states[0]), np.asarray(base_states[0]), rtol=1e-5, atol=1e-6)
    assert list(cell.collect_params()) == ["base_cell.i2h_weight", "base_cell.h2h_weight", "base_cell.i2h_bias",
                                           "base_cell.h2h_bias"]
    seq = rs.randn(2, 4, 3).astype(np.float32)
    outs, states = cell.unroll(4, seq, layout="NTC", merge_outputs=True)
    base_outs, base_states = base.unroll(4, seq, layout="NTC", merge_outputs=True)
    assert outs.shape == (2, 4, 3)
    np.testing.assert_allclose(np.asarray(outs), np.asarray(base_outs) + seq, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(np.asarray(states[0]), np.asarray(base_states[0]), rtol=1e-5, atol=1e-6)
    steps = [seq[:, t] for t in range(4)]
    outs, _ = cell.unroll(4, steps, merge_outputs=False)
    assert isinstance(outs, list) and len(outs) == 4
    np.testing.assert_allclose(np.asarray(outs[2]), np.asarray(base_outs[:, 2]) + steps[2], rtol=1e-5, atol=1e-6)


def test_zoneout_cell_with_rates_zero_or_predict_mode_is_the_base_cell():
    rs = np.random.RandomState(4)
    base = _base()
    seq = rs.randn(2, 5, 3).astype(np.float32)
    expected, expected_states = base.unroll(5, seq, merge_outputs=True)
    for rates, training in (((0., 0.), True), ((0.5, 0.7), False), ((1., 1.), False)):
        cell = rnn.ZoneoutCell(base, *rates)
        with hybrid.autograd.train_mode() if training else hybrid.autograd.predict_mode():
            outs, states = cell.unroll(5, seq, merge_outputs=True)
            step_out, step_states = cell(seq[:, 0], cell.begin_state(2))
        np.testing.assert_allclose(np.asarray(outs), np.asarray(expected), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(np.asarray(states[0]), np.asarray(expected_states[0]), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(np.asarray(step_out), np.asarray(expected[:, 0]), rtol=1e-5, atol=1e-6)


def test_zoneout_cell_with_rates_one_keeps_previous_outputs_and_states():
    rs = np.random.RandomState(5)
    cell = rnn.ZoneoutCell(_base(), zoneout_outputs=1., zoneout_states=1.)
    seq = rs.randn(2, 4, 3).astype(np.float32)
    begin = [rs.randn(2, 3).astype(np.float32)]
    with hybrid.autograd.train_mode():
        outs, states = cell.unroll(4, seq, begin_state=begin, merge_outputs=True)
        out, step_states = cell(seq[:, 0], begin)
        out2, _ = cell(seq[:, 1], step_states)
    np.testing.assert_array_equal(np.asarray(outs), np.zeros((2, 4, 3), np.float32))  # first previous output: 0
    np.testing.assert_array_equal(np.asarray(states[0]), begin[0])
    np.testing.assert_array_equal(np.asarray(step_states[0]), begin[0])
    np.testing.assert_array_equal(np.asarray(out2), np.asarray(out))
    cell.reset()
    assert cell._prev_output is None


def test_zoneout_cell_mixes_new_and_previous_values_in_training():
    cell = rnn.ZoneoutCell(_base(3, 3), zoneout_outputs=0., zoneout_states=0.5)
    x, h = np.ones((64, 3), np.float32), np.full((64, 3), 7., np.float32)
    with hybrid.autograd.train_mode():
        _, (new,) = cell(x, [h])
    kept = np.asarray(new) == 7.
    assert 0.25 < kept.mean() < 0.75
    with pytest.raises(ValueError, match="zoneout_states"):
        rnn.ZoneoutCell(_base(), zoneout_states=1.5)
    with pytest.raises(TypeError):
        rnn.ZoneoutCell(rnn.BidirectionalCell(rnn.GRUCell(2), rnn.GRUCell(2)))


def _stack(cls):
    stack = cls()
    stack.add(rnn.LSTMCell(4, input_size=3), rnn.DropoutCell(0.0), rnn.GRUCell(5, input_size=4))
    stack.initialize(hybrid.init.Uniform(0.5))
    return stack


def test_hybrid_sequential_rnn_cell_hybridized_equals_eager():
    rs = np.random.RandomState(6)
    stack = _stack(rnn.HybridSequentialRNNCell)
    assert isinstance(stack, rnn.SequentialRNNCell) and isinstance(stack, hybrid.HybridBlock)
    x, seq = rs.randn(2, 3).astype(np.float32), rs.randn(2, 6, 3).astype(np.float32)
    states = stack.begin_state(2)
    assert [s.shape for s in states] == [(2, 4), (2, 4), (2, 5)]
    eager_out, eager_states = stack(x, states)
    eager_seq, eager_seq_states = stack.unroll(6, seq, merge_outputs=True)
    stack.hybridize()
    out, new_states = stack(x, states)
    np.testing.assert_allclose(np.asarray(out), np.asarray(eager_out), rtol=1e-5, atol=1e-6)
    for a, b in zip(new_states, eager_states):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-5, atol=1e-6)
    outs, seq_states = stack.unroll(6, seq, merge_outputs=True)
    np.testing.assert_allclose(np.asarray(outs), np.asarray(eager_seq), rtol=1e-5, atol=1e-6)
    assert len(stack) == 3 and isinstance(stack[2], rnn.GRUCell)


def test_hybridized_zoneout_cell_draws_fresh_masks_and_rejects_output_zoneout_steps():
    cell = rnn.ZoneoutCell(_base(), zoneout_states=0.5)
    cell.hybridize()
    x, h = np.ones((64, 3), np.float32), np.full((64, 3), 7., np.float32)
    with hybrid.autograd.train_mode():
        first, second = (np.asarray(cell(x, [h])[1][0]) for _ in range(2))
    assert 0.25 < (first == 7.).mean() < 0.75 and not (first == second).all()
    outputs_cell = rnn.ZoneoutCell(_base(), zoneout_outputs=0.5)
    outputs_cell.hybridize()
    with hybrid.autograd.train_mode(), pytest.raises(NotImplementedError, match="use unroll"):
        outputs_cell(x, [h])
    assert np.asarray(outputs_cell(x, [h])[0]).shape == (64, 3)  # predict mode steps fine
