"""Recurrent layers and cells against a NumPy loop with the same parameters: forward, finite-difference
gradients, hybridized against eager, layers against unrolled cells, dropout, states and errors."""
import itertools

import jax
import jax.numpy as jnp
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


# -- LSTMPCell, VariationalDropoutCell and the convolutional cells -------------------------------------------
def _sigmoid(xp, v):
    return 1 / (1 + xp.exp(-v))


def _lstmp_step(xp, x, r, c, a):
    """LSTM with projection, the paper's equations (gates i, f, g, o), written for numpy or jax.numpy."""
    gates = x @ a["i2h_weight"].T + a["i2h_bias"] + r @ a["h2h_weight"].T + a["h2h_bias"]
    i, f, g, o = xp.split(gates, 4, axis=-1)
    c = _sigmoid(xp, f) * c + _sigmoid(xp, i) * xp.tanh(g)
    h = _sigmoid(xp, o) * xp.tanh(c)
    r = h @ a["h2r_weight"].T
    return r, [r, c]


def _conv(xp, x, w, b, pad, dilation):
    """Stride-1 N-d convolution, channels-first: a sum over kernel offsets (numpy or jax.numpy)."""
    kernel = w.shape[2:]
    xpad = xp.pad(x, [(0, 0), (0, 0)] + [(p, p) for p in pad])
    out_size = [n - d * (k - 1) for n, k, d in zip(xpad.shape[2:], kernel, dilation)]
    out = 0
    for offset in itertools.product(*map(range, kernel)):
        window = tuple(slice(o * d, o * d + n) for o, d, n in zip(offset, dilation, out_size))
        out = out + xp.einsum("nc...,oc->no...", xpad[(slice(None),) * 2 + window], w[(slice(None),) * 2 + offset])
    return out + b.reshape((1, -1) + (1,) * len(kernel))


def _conv_cell_step(xp, kind, x, states, a, cfg):
    """One step of a convolutional cell with Gluon's equations, channels-first, ``tanh`` activation."""
    i2h = _conv(xp, x, a["i2h_weight"], a["i2h_bias"], cfg["i2h_pad"], cfg["i2h_dilate"])
    h2h_pad = [d * (k - 1) // 2 for d, k in zip(cfg["h2h_dilate"], a["h2h_weight"].shape[2:])]
    h2h = _conv(xp, states[0], a["h2h_weight"], a["h2h_bias"], h2h_pad, cfg["h2h_dilate"])
    if kind == "rnn":
        h = xp.tanh(i2h + h2h)
        return h, [h]
    if kind == "lstm":
        i, f, g, o = xp.split(i2h + h2h, 4, axis=1)
        c = _sigmoid(xp, f) * states[1] + _sigmoid(xp, i) * xp.tanh(g)
        h = _sigmoid(xp, o) * xp.tanh(c)
        return h, [h, c]
    (xr, xz, xn), (hr, hz, hn) = xp.split(i2h, 3, axis=1), xp.split(h2h, 3, axis=1)
    r, z = _sigmoid(xp, xr + hr), _sigmoid(xp, xz + hz)
    h = (1 - z) * xp.tanh(xn + r * hn) + z * states[0]
    return h, [h]


# (class, kind, input_shape channels-first, hidden, i2h_kernel, h2h_kernel, i2h_pad, i2h_dilate, h2h_dilate, layout)
CONV_CELLS = [(rnn.Conv1DRNNCell, "rnn", (2, 6), 3, 3, 3, 0, 1, 1, "NCW"),
              (rnn.Conv1DLSTMCell, "lstm", (2, 7), 2, 2, 3, 1, 2, 2, "NWC"),
              (rnn.Conv1DGRUCell, "gru", (3, 5), 2, 3, 1, 1, 1, 1, "NCW"),
              (rnn.Conv2DRNNCell, "rnn", (2, 4, 5), 2, (2, 3), (3, 1), (1, 0), 1, 1, "NHWC"),
              (rnn.Conv2DLSTMCell, "lstm", (2, 5, 4), 2, 3, 3, 1, (2, 1), (1, 2), "NCHW"),
              (rnn.Conv2DGRUCell, "gru", (1, 4, 4), 2, 2, 3, 0, 1, 1, "NHWC"),
              (rnn.Conv3DRNNCell, "rnn", (1, 3, 3, 4), 2, 2, 3, 0, 1, 1, "NCDHW"),
              (rnn.Conv3DLSTMCell, "lstm", (2, 3, 4, 3), 2, (1, 2, 2), 1, (0, 1, 0), 1, 1, "NDHWC"),
              (rnn.Conv3DGRUCell, "gru", (1, 3, 3, 3), 2, 2, (1, 3, 1), 1, 1, (1, 2, 1), "NCDHW")]
CONV_IDS = [f"{c[0].__name__}-{c[-1]}" for c in CONV_CELLS]


class ConvSetup:
    """A convolutional cell of one configuration, its step input and states (in its layout), and converters
    between its layout and channels-first for the references."""

    def __init__(self, config, rng):
        cls, self.kind, shape, hidden, k_i, k_h, pad, dil_i, dil_h, self.layout = config
        self.last = self.layout.index("C") != 1
        dims = len(shape) - 1
        spec = lambda v: (v,) * dims if isinstance(v, int) else tuple(v)  # noqa: E731
        self.cfg = {"i2h_pad": spec(pad), "i2h_dilate": spec(dil_i), "h2h_dilate": spec(dil_h)}
        step_shape = (shape[1:] + shape[:1]) if self.last else shape
        self.cell = cls(step_shape, hidden, k_i, k_h, pad, dil_i, dil_h, conv_layout=self.layout)
        self.cell.initialize(init.Normal(0.5))
        self.x = rng.standard_normal((N,) + step_shape).astype(np.float32)
        self.states = [rng.standard_normal(info["shape"]).astype(np.float32) * 0.5
                       for info in self.cell.state_info(N)]
        self.cell(self.x, self.states)  # completes the deferred initialisation

    def first(self, v):
        """An array in the cell's layout, channels-first."""
        return np.moveaxis(v, -1, 1) if self.last else v

    def params(self, xp=np):
        out = {}
        for name, p in self.cell.collect_params().items():
            v = np.asarray(p.data(), np.float64)
            out[name] = xp.asarray(self.first(v) if "weight" in name else v)
        return out

    def reference(self, xp, x, states, a):
        """Output and states in the cell's layout."""
        back = (lambda v: xp.moveaxis(v, 1, -1)) if self.last else (lambda v: v)  # noqa: E731
        first = (lambda v: xp.moveaxis(v, -1, 1)) if self.last else (lambda v: v)  # noqa: E731
        h, states = _conv_cell_step(xp, self.kind, first(x), [first(s) for s in states], a, self.cfg)
        return back(h), [back(s) for s in states]


@pytest.mark.parametrize("config", CONV_CELLS, ids=CONV_IDS)
def test_conv_cell_step_matches_numpy(config, rng):
    setup = ConvSetup(config, rng)
    out, states = setup.cell(setup.x, setup.states)
    ref_out, ref_states = setup.reference(np, setup.x.astype(np.float64), [s.astype(np.float64) for s in
                                                                         setup.states], setup.params())
    assert out.shape == ref_out.shape and len(states) == len(ref_states)
    assert_close(out, ref_out, rtol=1e-4, atol=1e-5)
    for got, expected in zip(states, ref_states):
        assert_close(got, expected, rtol=1e-4, atol=1e-5)
    # the reference's convolution agrees with the independent one of references_nn
    a = setup.params()
    assert_close(_conv(np, setup.first(setup.x), a["i2h_weight"], a["i2h_bias"], setup.cfg["i2h_pad"],
                       setup.cfg["i2h_dilate"]),
                 refn.conv_nd(setup.first(setup.x).astype(np.float64), a["i2h_weight"], a["i2h_bias"],
                              (1,) * len(setup.cfg["i2h_pad"]), setup.cfg["i2h_pad"], setup.cfg["i2h_dilate"], 1))


@pytest.mark.parametrize("config", [CONV_CELLS[i] for i in (1, 5)], ids=[CONV_IDS[i] for i in (1, 5)])
def test_conv_cell_gradients_match_jax_grad(config, rng):
    setup = ConvSetup(config, rng)
    _, heads, grads = run_all(setup.cell, (setup.x, setup.states))
    names = list(grads)

    def loss(values):
        first = (lambda v: jnp.moveaxis(v, -1, 1)) if setup.last else (lambda v: v)  # noqa: E731
        a = {n: first(v) if "weight" in n else v for n, v in values.items()}
        h, states = setup.reference(jnp, jnp.asarray(setup.x), [jnp.asarray(s) for s in setup.states], a)
        return sum((leaf * head).sum() for leaf, head in zip([h] + states, heads))

    expected = jax.jit(jax.grad(loss))({n: jnp.asarray(p.data()) for n, p in setup.cell.collect_params().items()})
    assert grads.keys() == expected.keys()
    for name, grad in grads.items():
        assert_close(grad, expected[name], rtol=1e-4, atol=1e-5)


def test_conv_cell_unroll_hybridized_equals_numpy_loop(rng):
    setup = ConvSetup(CONV_CELLS[4], rng)  # Conv2DLSTMCell with padding and dilations
    seq = rng.standard_normal((T,) + setup.x.shape).astype(np.float32)
    setup.cell.hybridize()
    out, states = setup.cell.unroll(T, seq, setup.states, layout="TNC")
    ref_states, a = [s.astype(np.float64) for s in setup.states], setup.params()
    for t in range(T):
        ref_out, ref_states = setup.reference(np, seq[t].astype(np.float64), ref_states, a)
        assert_close(out[t], ref_out, rtol=1e-4, atol=1e-5)
    for got, expected in zip(states, ref_states):
        assert_close(got, expected, rtol=1e-4, atol=1e-5)


def _lstmp(rng, input_size=C, hidden=4, projection=2):
    cell = rnn.LSTMPCell(hidden, projection)
    cell.initialize(init.Normal(0.5))
    x = rng.standard_normal((N, input_size)).astype(np.float32)
    states = [rng.standard_normal(info["shape"]).astype(np.float32) for info in cell.state_info(N)]
    cell(x, states)
    return cell, x, states


def test_lstmp_step_matches_numpy_and_jax_grad(rng):
    cell, x, states = _lstmp(rng)
    assert list(cell.collect_params()) == ["i2h_weight", "h2h_weight", "h2r_weight", "i2h_bias", "h2h_bias"]
    assert cell.h2h_weight.shape == (16, 2) and cell.h2r_weight.shape == (2, 4)
    assert cell.state_info(N) == [{"shape": (N, 2), "__layout__": "NC"}, {"shape": (N, 4), "__layout__": "NC"}]
    out, new_states = cell(x, states)
    a = {n: np.asarray(p.data(), np.float64) for n, p in cell.collect_params().items()}
    ref_out, ref_states = _lstmp_step(np, x.astype(np.float64), states[0], states[1], a)
    assert_close(out, ref_out, rtol=1e-5, atol=1e-5)
    for got, expected in zip(new_states, ref_states):
        assert_close(got, expected, rtol=1e-5, atol=1e-5)
    _, heads, grads = run_all(cell, (x, states))

    def loss(a):
        r, states_ = _lstmp_step(jnp, jnp.asarray(x), jnp.asarray(states[0]), jnp.asarray(states[1]), a)
        return sum((leaf * head).sum() for leaf, head in zip([r] + states_, heads))

    expected = jax.jit(jax.grad(loss))({n: jnp.asarray(p.data()) for n, p in cell.collect_params().items()})
    assert grads.keys() == expected.keys()
    for name, grad in grads.items():
        assert_close(grad, expected[name], rtol=1e-4, atol=1e-5)


def test_lstmp_stack_infers_projected_input_sizes(rng):
    stack = rnn.HybridSequentialRNNCell()
    stack.add(rnn.LSTMPCell(4, 3), rnn.LSTMPCell(5, 3))  # as in Gluon, a cell above takes its own output size
    bidirectional = rnn.BidirectionalCell(rnn.LSTMPCell(4, 3), rnn.LSTMPCell(4, 3))
    x = rng.standard_normal((N, T, C)).astype(np.float32)
    stack.infer_shape(0, x, False)
    assert stack[0].i2h_weight.shape == (16, C) and stack[1].i2h_weight.shape == (20, 3)
    bidirectional.infer_shape(1, x, True)
    assert bidirectional.l_cell.i2h_weight.shape == (16, 6)
    stack.initialize()
    out, states = stack.unroll(T, x)
    assert out.shape == (N, T, 3) and [s.shape for s in states] == [(N, 3), (N, 4), (N, 3), (N, 5)]


def test_variational_dropout_masks_match_numpy(rng):
    """Stepped in training mode, the three masks are drawn at the first step and reused until reset()."""
    base = rnn.RNNCell(H, activation="tanh", input_size=C)
    cell = rnn.VariationalDropoutCell(base, drop_inputs=0.5, drop_states=0.5, drop_outputs=0.5)
    cell.initialize(init.Normal(0.5))
    xs = rng.standard_normal((2, N, C)).astype(np.float32)
    h = rng.standard_normal((N, H)).astype(np.float32)
    a = {n: np.asarray(p.data(), np.float64) for n, p in base.collect_params().items()}
    with autograd.train_mode():
        out0, states = cell(xs[0], [h])
        masks = [np.asarray(m) for m in (cell.drop_inputs_mask, cell.drop_states_mask, cell.drop_outputs_mask)]
        out1, states1 = cell(xs[1], states)
    for mask in masks:
        assert set(np.unique(mask)) <= {0.0, 2.0} and 0 < (mask == 0).mean() < 1
    m_in, m_state, m_out = masks
    ref_h, ref_outs = h.astype(np.float64), []
    for x in xs:
        ref_h = np.tanh((x * m_in) @ a["i2h_weight"].T + a["i2h_bias"] + (ref_h * m_state) @ a["h2h_weight"].T
                        + a["h2h_bias"])
        ref_outs.append(ref_h * m_out)
    assert_close(out0, ref_outs[0], rtol=1e-5, atol=1e-5)
    assert_close(out1, ref_outs[1], rtol=1e-5, atol=1e-5)
    assert_close(states1[0], ref_h, rtol=1e-5, atol=1e-5)  # the states carry the undropped h
    cell.reset()
    assert cell.drop_inputs_mask is None and cell.drop_states_mask is None and cell.drop_outputs_mask is None
    assert_close(cell(xs[0], [h])[0], base(xs[0], [h])[0])  # predict mode: the base cell


@pytest.mark.parametrize("drop_states", [0.0, 0.5])
def test_variational_dropout_unroll_one_mask_per_sequence(drop_states, rng):
    base = rnn.GRUCell(H)
    cell = rnn.VariationalDropoutCell(base, drop_inputs=0.0, drop_states=drop_states, drop_outputs=0.5)
    cell.initialize(init.Normal(0.5))
    x = rng.standard_normal((N, T, C)).astype(np.float32)
    with autograd.train_mode():
        first, _ = cell.unroll(T, x)
        second, _ = cell.unroll(T, x)
    first, second = np.asarray(first), np.asarray(second)
    for out in (first, second):
        dropped = out == 0
        assert dropped.any() and (dropped == dropped[:, :1]).all()  # one output mask for all time steps
    assert not np.array_equal(first == 0, second == 0)  # a new mask per sequence
    if not drop_states:  # the surviving outputs are the base cell's, scaled by 1 / (1 - 0.5)
        plain = np.asarray(base.unroll(T, x)[0])
        assert_close(first, np.where(first == 0, 0, 2 * plain), rtol=1e-5, atol=1e-6)
    assert_close(cell.unroll(T, x)[0], base.unroll(T, x)[0])  # predict mode


def test_variational_dropout_gradients_match_jax_grad(rng):
    base = rnn.RNNCell(H, activation="tanh")
    cell = rnn.VariationalDropoutCell(base, drop_inputs=0.5, drop_states=0.5, drop_outputs=0.5)
    cell.initialize(init.Normal(0.5))
    x, h = rng.standard_normal((N, C)).astype(np.float32), rng.standard_normal((N, H)).astype(np.float32)
    with autograd.train_mode():
        cell(x, [h])  # draws the masks
    m_in, m_state, m_out = cell.drop_inputs_mask, cell.drop_states_mask, cell.drop_outputs_mask
    _, heads, grads = run_all(cell, (x, [h]), training=True)

    def loss(a):
        new_h = jnp.tanh((x * m_in) @ a["base_cell.i2h_weight"].T + a["base_cell.i2h_bias"]
                         + (h * m_state) @ a["base_cell.h2h_weight"].T + a["base_cell.h2h_bias"])
        return (new_h * m_out * heads[0]).sum() + (new_h * heads[1]).sum()

    expected = jax.jit(jax.grad(loss))({n: jnp.asarray(p.data()) for n, p in cell.collect_params().items()})
    assert grads.keys() == expected.keys()
    for name, grad in grads.items():
        assert_close(grad, expected[name], rtol=1e-4, atol=1e-5)


def test_hybridized_variational_dropout_cannot_be_stepped_in_training():
    cell = rnn.VariationalDropoutCell(rnn.RNNCell(H), drop_outputs=0.5)
    cell.initialize()
    cell.hybridize()
    x = np.ones((N, C), np.float32)
    cell(x, cell.begin_state(N))  # predict mode is fine
    outer = hybrid.nn.HybridLambda(lambda v: cell(v, cell.begin_state(N))[0])
    outer.hybridize()
    with autograd.train_mode(), pytest.raises(NotImplementedError, match="VariationalDropoutCell: a compiled"):
        outer(x)


def test_unroll_valid_length_matches_numpy(rng):
    """LSTM cells unrolled with valid_length in a hybridized block against a NumPy loop per sequence."""
    class Net(hybrid.HybridBlock):
        def __init__(self):
            super().__init__()
            self.cell = rnn.BidirectionalCell(rnn.LSTMCell(H, input_size=C), rnn.LSTMCell(H, input_size=C))

        def forward(self, x, valid_length):
            return self.cell.unroll(T, x, layout="NTC", merge_outputs=True, valid_length=valid_length)

    net = Net()
    net.initialize(init.Normal(0.5))
    net.hybridize()
    x = rng.standard_normal((3, T, C)).astype(np.float32)
    lengths = np.array([T, 0, 2])
    out, states = net(x, lengths.astype(np.float32))
    p = {d: [np.asarray(getattr(getattr(net.cell, f"{d}_cell"), k).data(), np.float64)
             for k in ("i2h_weight", "h2h_weight", "i2h_bias", "h2h_bias")] for d in "lr"}
    for b, n in enumerate(lengths):
        expected = np.zeros((T, 2 * H))
        finals = []
        for d, order in (("l", range(n)), ("r", reversed(range(n)))):
            h, c = np.zeros((1, H)), np.zeros((1, H))
            for t in order:
                h, c = refn.rnn_step("lstm", x[b, t][None].astype(np.float64), h, c, *p[d])
                expected[t, (0 if d == "l" else H):(H if d == "l" else 2 * H)] = h[0]
            finals += [h[0], c[0]]
        assert_close(out[b], expected, rtol=1e-5, atol=1e-5)
        for state, final in zip(states, finals):
            assert_close(state[b], final, rtol=1e-5, atol=1e-5)


def test_new_cells_bad_arguments_name_the_cell():
    bad = [(lambda: rnn.LSTMPCell(4, 0), ValueError, "LSTMPCell: projection_size must be a positive integer"),
           (lambda: rnn.LSTM(4, projection_size=0), ValueError, "LSTM: projection_size must be a positive integer"),
           (lambda: rnn.VariationalDropoutCell(rnn.RNNCell(2), drop_inputs=1.0), ValueError,
            r"VariationalDropoutCell: drop_inputs must be in \[0, 1\)"),
           (lambda: rnn.VariationalDropoutCell(rnn.BidirectionalCell(rnn.RNNCell(2), rnn.RNNCell(2)),
                                               drop_states=0.5), ValueError,
            "VariationalDropoutCell: drop_states cannot apply to a BidirectionalCell"),
           (lambda: rnn.Conv2DLSTMCell((3, 8), 4, 3, 3), ValueError,
            "Conv2DLSTMCell: input_shape must be one step's shape without the batch axis, 3 ints"),
           (lambda: rnn.Conv1DGRUCell((3, 8), 4, 3, 2), ValueError, "Conv1DGRUCell: h2h_kernel sizes must be odd"),
           (lambda: rnn.Conv1DRNNCell((3, 8), 4, 3, 3, conv_layout="NCHW"), ValueError,
            r"Conv1DRNNCell: conv_layout must be one of \('NCW', 'NWC'\)"),
           (lambda: rnn.Conv3DRNNCell((3, 8, 8, 8), 4, (3, 3), 3), ValueError,
            "Conv3DRNNCell: i2h_kernel must be an int or a tuple of 3 ints"),
           (lambda: rnn.Conv1DRNNCell((3, 2), 4, 3, 3), ValueError, "Conv1DRNNCell: i2h_kernel .* does not fit"),
           (lambda: rnn.Conv2DRNNCell((3, 8, 8), 4, 3, 3, activation="nope"), ValueError,
            "Conv2DRNNCell: activation must be one of")]
    for make, error, message in bad:
        with pytest.raises(error, match=message):
            make()


def test_new_cells_bad_inputs_name_the_cell():
    cell = rnn.Conv2DLSTMCell((3, 8, 8), 4, 3, 3)
    cell.initialize()
    with pytest.raises(ShapeError, match=r"Conv2DLSTMCell: expected one time step of shape \('N', 3, 8, 8\) "
                                         r"\(layout 'NCHW'\), got shape \(2, 3, 8, 9\)"):
        cell(np.ones((2, 3, 8, 9), np.float32), cell.begin_state(2))
    with pytest.raises(ShapeError, match=r"Conv2DLSTMCell.unroll: expected inputs in layout 'NTC' \(rank 5\)"):
        cell.unroll(2, np.ones((2, 2, 3, 8), np.float32))
    with pytest.raises(ShapeError, match=r"Conv2DLSTMCell: invalid recurrent states: expected 2 state\(s\) of "
                                         r"shape\(s\) \[\(2, 4, 6, 6\), \(2, 4, 6, 6\)\]"):
        cell(np.ones((2, 3, 8, 8), np.float32), cell.begin_state(3))
    lstmp = rnn.LSTMPCell(4, 2, input_size=3)
    lstmp.initialize()
    with pytest.raises(ShapeError, match=r"LSTMPCell: invalid recurrent states: expected 2 state\(s\) of "
                                         r"shape\(s\) \[\(2, 2\), \(2, 4\)\]"):
        lstmp(np.ones((2, 3), np.float32), [np.zeros((2, 4), np.float32)] * 2)
    with pytest.raises(ShapeError, match=r"GRUCell.unroll: valid_length must have shape \(2,\)"):
        rnn.GRUCell(3).unroll(2, np.ones((2, 2, 3), np.float32), valid_length=[1, 2, 3])
    with pytest.raises(ValueError, match=r"GRUCell.unroll: valid_length must lie in \[0, 2\], got \[1, 3\]"):
        rnn.GRUCell(3).unroll(2, np.ones((2, 2, 3), np.float32), valid_length=[1, 3])


def _projected_lstm_layers(xp, x, a, h0, c0, layers=2, directions="lr"):
    """A stacked bidirectional LSTM with projection on x (T, N, C) from the cell equations (numpy/jax.numpy)."""
    hs, cs = [], []
    for layer in range(layers):
        outputs = []
        for d, direction in enumerate(directions):
            p = {k: a[f"{direction}{layer}_{k}"] for k in ("i2h_weight", "h2h_weight", "i2h_bias", "h2h_bias",
                                                           "h2r_weight")}
            index = layer * len(directions) + d
            r, c, ys = h0[index], c0[index], [None] * x.shape[0]
            for t in (range(x.shape[0]) if direction == "l" else reversed(range(x.shape[0]))):
                r, (_, c) = _lstmp_step(xp, x[t], r, c, p)
                ys[t] = r
            outputs.append(xp.stack(ys))
            hs.append(r)
            cs.append(c)
        x = xp.concatenate(outputs, axis=-1)
    return x, xp.stack(hs), xp.stack(cs)


def test_lstm_projection_layer_matches_numpy_and_jax_grad(rng):
    net = rnn.LSTM(4, num_layers=2, bidirectional=True, projection_size=2, layout="NTC")
    net.initialize(init.Normal(0.5))
    assert net.l0_h2h_weight.shape == (16, 2) and net.r1_h2r_weight.shape == (2, 4)
    assert net.l1_i2h_weight.shape == (16, 4)  # both directions' projections
    assert net.state_info(N) == [{"shape": (4, N, 2), "__layout__": "LNC"}, {"shape": (4, N, 4), "__layout__": "LNC"}]
    x = rng.standard_normal((N, 2, C)).astype(np.float32)  # 2 steps
    states = [rng.standard_normal(info["shape"]).astype(np.float32) for info in net.state_info(N)]
    net.hybridize()
    out, heads, grads = run_all(net, (x, states))
    a = {n: np.asarray(p.data(), np.float64) for n, p in net.collect_params().items()}
    ref = _projected_lstm_layers(np, x.swapaxes(0, 1).astype(np.float64), a, states[0], states[1])
    assert out[0].shape == (N, 2, 4)
    for got, expected in zip(out, (ref[0].swapaxes(0, 1),) + ref[1:]):
        assert_close(got, expected, rtol=1e-5, atol=1e-5)

    def loss(a):
        y, h, c = _projected_lstm_layers(jnp, jnp.asarray(x).swapaxes(0, 1), a, jnp.asarray(states[0]),
                                         jnp.asarray(states[1]))
        return sum((leaf * head).sum() for leaf, head in zip((y.swapaxes(0, 1), h, c), heads))

    expected = jax.jit(jax.grad(loss))({n: jnp.asarray(p.data()) for n, p in net.collect_params().items()})
    assert grads.keys() == expected.keys()
    for name, grad in grads.items():
        assert_close(grad, expected[name], rtol=1e-4, atol=1e-5)
