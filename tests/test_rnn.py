"""Recurrent layers and cells against a NumPy loop with the same parameters: forward, finite-difference
gradients, hybridized against eager, layers against unrolled cells, dropout, states and errors."""
import jax
import numpy as np
import pytest

import hybrid
from hybrid import autograd, init, rnn
from hybrid.errors import ShapeError

import references as ref
import references_nn as refn
from conftest import assert_close
from helpers import clone_params

T, N, C, H = 4, 2, 3, 3
LAYERS = {"rnn_relu": lambda **kw: rnn.RNN(H, activation="relu", **kw),
          "rnn_tanh": lambda **kw: rnn.RNN(H, activation="tanh", **kw),
          "lstm": lambda **kw: rnn.LSTM(H, **kw), "gru": lambda **kw: rnn.GRU(H, **kw)}
# (mode, num_layers, bidirectional, layout, explicit begin states, training mode for the hybridize check)
CONFIGS = [("rnn_relu", 1, False, "NTC", True, True), ("rnn_tanh", 2, True, "TNC", False, False),
           ("lstm", 2, False, "NTC", True, True), ("gru", 1, True, "TNC", True, False)]
IDS = ["-".join(map(str, c[:5])) for c in CONFIGS]


class Setup:
    """A layer of one configuration with its input, begin states and NumPy reference."""

    def __init__(self, config, rng, seed=0):
        self.mode, self.layers, self.bidirectional, self.layout, self.with_states, self.training = config
        hybrid.random.seed(seed)
        self.net = LAYERS[self.mode](num_layers=self.layers, bidirectional=self.bidirectional, layout=self.layout)
        self.net.initialize(init.Normal(0.5))
        shape = (T, N, C) if self.layout == "TNC" else (N, T, C)
        self.x = rng.standard_normal(shape).astype(np.float32)
        count = self.layers * (2 if self.bidirectional else 1)
        self.states = [rng.standard_normal((count, N, H)).astype(np.float32) * 0.5
                       for _ in range(2 if self.mode == "lstm" else 1)]
        self.net(self.x)

    @property
    def inputs(self):
        return (self.x, self.states) if self.with_states else (self.x,)

    def arrays(self):
        arrays = {name: np.asarray(p.data(), np.float64) for name, p in self.net.collect_params().items()}
        arrays["x"] = self.x.astype(np.float64)
        for i, state in enumerate(self.states):
            arrays[f"state{i}"] = state.astype(np.float64)
        return arrays

    def reference(self, a):
        """Flat outputs: the output, then (with explicit states) the final states."""
        x = a["x"] if self.layout == "TNC" else a["x"].swapaxes(0, 1)
        count = self.layers * (2 if self.bidirectional else 1)
        h0 = a["state0"] if self.with_states else np.zeros((count, N, H))
        c0 = (a["state1"] if self.with_states else np.zeros((count, N, H))) if self.mode == "lstm" else None
        out, h, c = refn.rnn_layers(self.mode, x, a, self.layers, self.bidirectional, h0, c0)
        out = out if self.layout == "TNC" else out.swapaxes(0, 1)
        return [out] + ([h] + ([c] if c is not None else []) if self.with_states else [])


def run_all(net, inputs, training=False, call=None):
    """``net(*inputs)`` (or ``call()``) under record, and backward with fixed random head gradients on
    every output leaf; returns (outputs, heads, {parameter name of net: gradient})."""
    with autograd.record(train_mode=training):
        out = net(*inputs) if call is None else call()
    leaves = jax.tree_util.tree_leaves(out)
    rng = np.random.default_rng(1)
    heads = [rng.standard_normal(leaf.shape).astype(np.float32) for leaf in leaves]
    autograd.backward(leaves, head_grads=heads)
    grads = {name: np.asarray(p.grad()) for name, p in net.collect_params().items() if p.grad_req != "null"}
    return [np.asarray(leaf) for leaf in leaves], heads, grads


@pytest.mark.parametrize("config", CONFIGS, ids=IDS)
def test_forward_matches_numpy(config, rng):
    setup = Setup(config, rng)
    outputs = jax.tree_util.tree_leaves(setup.net(*setup.inputs))
    expected = setup.reference(setup.arrays())
    assert len(outputs) == len(expected)
    for out, exp in zip(outputs, expected):
        assert_close(out, exp, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("config", CONFIGS, ids=IDS)
def test_gradients_match_finite_differences(config, rng):
    setup = Setup(config, rng)
    _, heads, grads = run_all(setup.net, setup.inputs)
    arrays = setup.arrays()
    loss = lambda a: sum(float((o * h).sum()) for o, h in zip(setup.reference(a), heads))  # noqa: E731
    for name, grad in grads.items():
        index = np.unravel_index(np.argmax(np.abs(grad)), grad.shape)
        expected = ref.numeric_grad(loss, arrays, name, index)
        assert abs(grad[index] - expected) <= 2e-3 * max(1.0, abs(expected)), (name, index)


@pytest.mark.parametrize("config", CONFIGS, ids=IDS)
def test_hybridized_equals_eager(config, rng):
    eager = Setup(config, rng)
    compiled = Setup(config, np.random.default_rng(0), seed=1)
    clone_params(eager.net, compiled.net)
    compiled.net.hybridize()
    out_e, _, grads_e = run_all(eager.net, eager.inputs, eager.training)
    out_h, _, grads_h = run_all(compiled.net, eager.inputs, eager.training)
    for a, b in zip(out_h, out_e):
        assert_close(a, b, rtol=1e-5, atol=1e-5)
    assert grads_h.keys() == grads_e.keys()
    for name in grads_e:
        assert_close(grads_h[name], grads_e[name], rtol=1e-4, atol=1e-5)


def _copy(layer, cells, rename):
    """Copy the layer's parameters into the cells (``rename``: layer name -> cell name)."""
    cell_params = cells.collect_params()
    for name, param in layer.collect_params().items():
        cell_params[rename(name)].set_data(np.asarray(param.data()))


def test_stacked_lstm_equals_unrolled_cells(rng):
    layer = Setup(CONFIGS[2], rng)  # 2-layer LSTM, layout NTC, explicit states
    cells = rnn.SequentialRNNCell()
    cells.add(rnn.LSTMCell(H, input_size=C), rnn.LSTMCell(H, input_size=H))
    cells.initialize()
    rename = lambda n: f"{n[1]}.{n[3:]}"  # noqa: E731  ('l1_h2h_bias' -> '1.h2h_bias')
    _copy(layer.net, cells, rename)
    h, c = layer.states
    begin = [h[0], c[0], h[1], c[1]]
    out_l, (h_l, c_l) = layer.net(*layer.inputs)
    out_c, states = cells.unroll(T, layer.x, begin, layout="NTC")
    assert_close(out_c, out_l, rtol=1e-5, atol=1e-5)
    assert_close(np.stack(states[0::2]), h_l, rtol=1e-5, atol=1e-5)
    assert_close(np.stack(states[1::2]), c_l, rtol=1e-5, atol=1e-5)
    _, _, grads_l = run_all(layer.net, (), call=lambda: layer.net(*layer.inputs)[0])  # gradients of the output
    _, _, grads_c = run_all(cells, (), call=lambda: cells.unroll(T, layer.x, begin, layout="NTC")[0])
    for name, grad in grads_l.items():
        assert_close(grads_c[rename(name)], grad, rtol=1e-4, atol=1e-5)


def test_bidirectional_layer_equals_hybridized_cells(rng):
    layer = Setup(CONFIGS[1], rng)  # 2-layer bidirectional tanh RNN, layout TNC
    cells = rnn.SequentialRNNCell()
    cells.add(rnn.BidirectionalCell(rnn.RNNCell(H), rnn.RNNCell(H)), rnn.DropoutCell(0.5),
              rnn.BidirectionalCell(rnn.RNNCell(H), rnn.RNNCell(H)))
    rename = lambda n: f"{2 * int(n[1])}.{n[0]}_cell.{n[3:]}"  # noqa: E731  ('r1_i2h_bias' -> '2.r_cell.i2h_bias')
    cells.initialize()
    steps = list(layer.x)
    cells.unroll(T, steps)  # completes deferred initialisation
    _copy(layer.net, cells, rename)
    cells.hybridize()
    outputs, states = cells.unroll(T, steps, merge_outputs=False)  # predict mode: no dropout
    assert isinstance(outputs, list) and len(outputs) == T and len(states) == len(cells.state_info()) == 4
    assert_close(np.stack(outputs), layer.net(layer.x), rtol=1e-5, atol=1e-5)
    _, _, grads_l = run_all(layer.net, (layer.x,))
    _, _, grads_c = run_all(cells, (), call=lambda: cells.unroll(T, layer.x, layout="TNC")[0])
    for name, grad in grads_l.items():
        assert_close(grads_c[rename(name)], grad, rtol=1e-4, atol=1e-5)


def test_unroll_in_a_compiled_training_step_equals_eager(rng):
    x = rng.standard_normal((N, T, C)).astype(np.float32)
    square_sum = hybrid.nn.HybridLambda(lambda y: (y ** 2).sum())
    results = []
    for compiled in (False, True):
        hybrid.random.seed(0)
        cell = rnn.LSTMCell(H, input_size=C)
        cell.initialize(init.Normal(0.5))
        initial = np.array(cell.i2h_weight.data())
        trainer = hybrid.Trainer(cell.collect_params(), "sgd", {"learning_rate": 0.1})

        def step(x):
            with autograd.record():
                loss = square_sum(cell.unroll(T, x)[0])  # the merge of the steps' outputs is taped too
            autograd.backward(loss)
            trainer.step(1)
            return loss
        step = hybrid.compile(step) if compiled else step
        loss = float(step(x))
        results.append((loss, {n: np.array(p.data()) for n, p in cell.collect_params().items()}))
    (loss_e, params_e), (loss_c, params_c) = results
    assert_close(loss_c, loss_e)
    assert not np.allclose(params_e["i2h_weight"], initial, atol=1e-4)  # the step trained
    for name in params_e:
        assert_close(params_c[name], params_e[name])


@pytest.mark.parametrize("mode", ["rnn_relu", "rnn_tanh", "lstm", "gru"])
def test_cell_step_matches_numpy(mode, rng):
    cell = {"rnn_relu": lambda: rnn.RNNCell(H, activation="relu"), "rnn_tanh": lambda: rnn.RNNCell(H),
            "lstm": lambda: rnn.LSTMCell(H), "gru": lambda: rnn.GRUCell(H)}[mode]()
    cell.initialize(init.Normal(0.5))
    x = rng.standard_normal((N, C)).astype(np.float32)
    states = [rng.standard_normal((N, H)).astype(np.float32) for _ in cell.state_info()]
    out, new_states = cell(x, states)
    p = [np.asarray(getattr(cell, k).data(), np.float64) for k in ("i2h_weight", "h2h_weight", "i2h_bias",
                                                                    "h2h_bias")]
    h, c = refn.rnn_step(mode, x.astype(np.float64), states[0], states[1] if mode == "lstm" else None, *p)
    assert_close(out, h, rtol=1e-5, atol=1e-5)
    assert_close(new_states[0], h, rtol=1e-5, atol=1e-5)
    assert len(new_states) == (2 if mode == "lstm" else 1)
    if mode == "lstm":
        assert_close(new_states[1], c, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("hybridize", [False, True])
def test_dropout_between_layers_in_training_only(hybridize, rng):
    setup = Setup(("rnn_tanh", 2, False, "TNC", False, False), rng)
    net = rnn.RNN(H, num_layers=2, activation="tanh", dropout=0.5)
    net.initialize()
    net(setup.x)
    clone_params(setup.net, net)
    if hybridize:
        net.hybridize()
    predicted = np.asarray(net(setup.x))
    assert_close(predicted, setup.reference(setup.arrays())[0], rtol=1e-5, atol=1e-5)
    with autograd.train_mode():
        first, second = np.asarray(net(setup.x)), np.asarray(net(setup.x))
    assert not np.allclose(first, predicted, atol=1e-3) and not np.allclose(first, second, atol=1e-3)
    single = rnn.GRU(H, dropout=0.5)  # one layer: nothing between layers to drop
    single.initialize()
    with autograd.train_mode():
        assert_close(single(setup.x), single(setup.x))


def test_parameters_states_and_deferred_input_size():
    net = rnn.LSTM(4, num_layers=2, bidirectional=True)
    assert list(net.collect_params())[:8] == [f"{d}0_{k}" for d in "lr" for k in
                                              ("i2h_weight", "h2h_weight", "i2h_bias", "h2h_bias")]
    assert net.l0_i2h_weight.shape == (16, 0) and net.l1_i2h_weight.shape == (16, 8)
    assert net.state_info(2) == [{"shape": (4, 2, 4), "__layout__": "LNC"}] * 2
    assert [s.shape for s in net.begin_state(2)] == [(4, 2, 4)] * 2
    assert rnn.GRU(5).l0_h2h_weight.shape == (15, 5) and rnn.RNN(5).l0_h2h_weight.shape == (5, 5)
    net = rnn.GRU(H, bidirectional=True)
    net.initialize()
    x = np.ones((T, N, C + 1), np.float32)
    out, new_states = net(x, net.begin_state(N))
    assert net.l0_i2h_weight.shape == (3 * H, C + 1) and net.r0_i2h_weight.shape == (3 * H, C + 1)
    assert out.shape == (T, N, 2 * H) and [s.shape for s in new_states] == [(2, N, H)]
    cell = rnn.LSTMCell(5)
    cell.initialize()
    out, states = cell(np.ones((2, 3), np.float32), cell.begin_state(2))
    assert cell.i2h_weight.shape == (20, 3) and out.shape == (2, 5) and [s.shape for s in states] == [(2, 5)] * 2


def test_bad_constructor_arguments_name_the_layer():
    bad = [(lambda: rnn.LSTM(0), "LSTM: hidden_size must be a positive integer"),
           (lambda: rnn.GRU(4, layout="NCT"), "GRU: layout must be 'TNC' or 'NTC'"),
           (lambda: rnn.RNN(4, dropout=1.0), r"RNN: dropout must be in \[0, 1\)"),
           (lambda: rnn.RNN(4, activation="sigmoid"), "RNN: activation must be 'relu' or 'tanh'"),
           (lambda: rnn.LSTM(4, num_layers=-1), "LSTM: num_layers must be a positive integer"),
           (lambda: rnn.LSTM(4, input_size=-3), "LSTM: input_size must be a non-negative integer"),
           (lambda: rnn.RNNCell(4, activation="softsign"), "RNNCell: activation"),
           (lambda: rnn.DropoutCell(1.5), "DropoutCell: rate")]
    for make, message in bad:
        with pytest.raises(ValueError, match=message):
            make()


@pytest.mark.parametrize("hybridize", [False, True])
def test_bad_inputs_and_states_name_the_layer(hybridize):
    net = hybrid.nn.HybridSequential()
    net.add(rnn.LSTM(4, input_size=3))
    net.initialize()
    if hybridize:
        net.hybridize()
    with pytest.raises(ShapeError, match="LSTM '0': expected a 3-D input in layout 'TNC', got shape \\(2, 3\\)"):
        net(np.ones((2, 3), np.float32))
    with pytest.raises(ShapeError, match="LSTM '0': expected inputs with 3 features"):
        net(np.ones((5, 2, 4), np.float32))
    lstm = net[0]
    x, h = np.ones((5, 2, 3), np.float32), np.zeros((1, 2, 4), np.float32)
    with pytest.raises(ShapeError, match=r"LSTM: invalid recurrent states: expected 2 state\(s\) of shape\(s\) "
                                         r"\[\(1, 2, 4\), \(1, 2, 4\)\], got \[\(1, 2, 4\)\]"):
        lstm(x, [h])
    cell = rnn.LSTMCell(4, input_size=3)
    cell.initialize()
    with pytest.raises(ShapeError, match="LSTMCell: invalid recurrent states"):
        cell(x[0], [h[0]])
    with pytest.raises(ShapeError, match="LSTMCell.unroll: length is 4 but the inputs hold 5 time steps"):
        cell.unroll(4, x, layout="TNC")
    with pytest.raises(ValueError, match="LSTMCell.unroll: layout must be 'NTC' or 'TNC'"):
        cell.unroll(5, x, layout="CTN")
    with pytest.raises(NotImplementedError, match="BidirectionalCell cannot be stepped"):
        rnn.BidirectionalCell(rnn.GRUCell(2), rnn.GRUCell(2))(x[0], [h[0], h[0]])
