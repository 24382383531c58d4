"""Tests ported from Apache MXNet's tests/python/unittest/test_gluon_rnn.py (master, Gluon 2.0)."""
import jax.numpy as jnp
import pytest

from hybrid import rnn


def _unrolled_shapes(cell, steps, inputs, bidirectional=False, **unroll):
    cell.infer_shape(0, inputs[0], bidirectional)
    cell.initialize()
    outputs, _ = cell.unroll(steps, inputs, **unroll)
    return [o.shape for o in outputs]


@pytest.mark.parametrize("make", [lambda: rnn.RNNCell(100), lambda: rnn.LSTMCell(100),
                                  lambda: rnn.GRUCell(100, activation='relu', recurrent_activation='tanh')],
                         ids=["test_rnn", "test_lstm", "test_gru"])
def test_cells(make):
    """Port of test_gluon_rnn.py::test_rnn, ::test_lstm and ::test_gru (apache/mxnet master)."""
    cell = make()
    inputs = [jnp.ones((10, 50)) for i in range(3)]
    outs = _unrolled_shapes(cell, 3, inputs)
    assert sorted(cell.collect_params().keys()) == ['h2h_bias', 'h2h_weight', 'i2h_bias', 'i2h_weight']
    assert outs == [(10, 100), (10, 100), (10, 100)]


def test_residual():
    """Port of test_gluon_rnn.py::test_residual (apache/mxnet master)."""
    cell = rnn.ResidualCell(rnn.GRUCell(50))
    inputs = [jnp.ones((10, 50)) for i in range(2)]
    outs = _unrolled_shapes(cell, 2, inputs)
    assert sorted(cell.collect_params().keys()) == \
        ['base_cell.h2h_bias', 'base_cell.h2h_weight', 'base_cell.i2h_bias', 'base_cell.i2h_weight']
    assert outs == [(10, 50), (10, 50)]


def test_residual_bidirectional():
    """Port of test_gluon_rnn.py::test_residual_bidirectional (apache/mxnet master)."""
    cell = rnn.ResidualCell(rnn.BidirectionalCell(rnn.GRUCell(25), rnn.GRUCell(25)))
    inputs = [jnp.ones((10, 50)) for i in range(2)]
    outs = _unrolled_shapes(cell, 2, inputs, True, merge_outputs=False)
    assert sorted(cell.collect_params().keys()) == \
        ['base_cell.l_cell.h2h_bias', 'base_cell.l_cell.h2h_weight',
         'base_cell.l_cell.i2h_bias', 'base_cell.l_cell.i2h_weight',
         'base_cell.r_cell.h2h_bias', 'base_cell.r_cell.h2h_weight',
         'base_cell.r_cell.i2h_bias', 'base_cell.r_cell.i2h_weight']
    assert outs == [(10, 50), (10, 50)]


def test_stack():
    """Port of test_gluon_rnn.py::test_stack (apache/mxnet master)."""
    cell = rnn.SequentialRNNCell()
    for i in range(5):
        if i == 1:
            cell.add(rnn.ResidualCell(rnn.LSTMCell(100)))
        else:
            cell.add(rnn.LSTMCell(100))
    inputs = [jnp.ones((10, 50)) for i in range(3)]
    outs = _unrolled_shapes(cell, 3, inputs)
    keys = sorted(cell.collect_params().keys())
    for i in range(5):
        if i == 1:
            continue
        assert f'{i}.h2h_weight' in keys
        assert f'{i}.h2h_bias' in keys
        assert f'{i}.i2h_weight' in keys
        assert f'{i}.i2h_bias' in keys
    assert '1.base_cell.h2h_weight' in keys
    assert '1.base_cell.h2h_bias' in keys
    assert '1.base_cell.i2h_weight' in keys
    assert '1.base_cell.i2h_bias' in keys
    assert outs == [(10, 100), (10, 100), (10, 100)]


def test_hybridstack():
    """Port of test_gluon_rnn.py::test_hybridstack (apache/mxnet master), with the HybridSequentialRNNCell
    nested in a HybridBlock."""
    from hybrid import HybridBlock
    import numpy as np
    cell = rnn.HybridSequentialRNNCell()
    for i in range(5):
        if i == 1:
            cell.add(rnn.ResidualCell(rnn.LSTMCell(100)))
        else:
            cell.add(rnn.LSTMCell(100))
    inputs = [jnp.ones((10, 50)) for i in range(3)]
    outs = _unrolled_shapes(cell, 3, inputs)
    keys = sorted(cell.collect_params().keys())
    for i in range(5):
        if i == 1:
            continue
        assert f'{i}.h2h_weight' in keys
        assert f'{i}.h2h_bias' in keys
        assert f'{i}.i2h_weight' in keys
        assert f'{i}.i2h_bias' in keys
    assert '1.base_cell.h2h_weight' in keys
    assert '1.base_cell.h2h_bias' in keys
    assert '1.base_cell.i2h_weight' in keys
    assert '1.base_cell.i2h_bias' in keys
    assert outs == [(10, 100), (10, 100), (10, 100)]

    class BidirectionalOfSequential(HybridBlock):
        def __init__(self):
            super().__init__()
            cell0 = rnn.HybridSequentialRNNCell()
            cell0.add(rnn.LSTMCell(100))
            cell0.add(rnn.LSTMCell(100))
            cell1 = rnn.HybridSequentialRNNCell()
            cell1.add(rnn.LSTMCell(100))
            cell1.add(rnn.LSTMCell(100))
            self.rnncell = rnn.BidirectionalCell(cell0, cell1)

        def forward(self, x):
            return self.rnncell.unroll(3, x, layout="NTC", merge_outputs=True)

        def infer_shape(self, x, *args):
            self.rnncell.infer_shape(0, x, True)

    x = np.random.default_rng(0).uniform(size=(10, 3, 100)).astype(np.float32)
    net = BidirectionalOfSequential()
    net.infer_shape(x)
    net.initialize()
    outs, _ = net(x)
    assert outs.shape == (10, 3, 200)


def test_bidirectional():
    """Port of test_gluon_rnn.py::test_bidirectional (apache/mxnet master)."""
    cell = rnn.BidirectionalCell(rnn.LSTMCell(100), rnn.LSTMCell(100))
    inputs = [jnp.ones((10, 50)) for i in range(3)]
    assert _unrolled_shapes(cell, 3, inputs) == [(10, 200), (10, 200), (10, 200)]


def test_zoneout():
    """Port of test_gluon_rnn.py::test_zoneout (apache/mxnet master)."""
    cell = rnn.ZoneoutCell(rnn.RNNCell(100), zoneout_outputs=0.5, zoneout_states=0.5)
    inputs = [jnp.ones((10, 50)) for i in range(3)]
    assert _unrolled_shapes(cell, 3, inputs) == [(10, 100), (10, 100), (10, 100)]


def test_layer_bidirectional():
    """Port of test_gluon_rnn.py::test_layer_bidirectional (apache/mxnet master): a bidirectional LSTM layer
    equals a forward LSTM and a backward LSTM on the flipped sequence, given the same weights.

    Documented difference applied (porting-from-gluon.md, gluon.rnn): the layers keep Gluon 1.x's parameters
    per layer and direction (``l0_i2h_weight``, ...) instead of Gluon 2.0's packed ``rnn_param``, so the
    weights are set by those names."""
    import numpy as np
    from hybrid import Block

    class RefBiLSTM(Block):
        def __init__(self, size):
            super().__init__()
            self._lstm_fwd = rnn.LSTM(size, bidirectional=False)
            self._lstm_bwd = rnn.LSTM(size, bidirectional=False)

        def forward(self, inpt):
            fwd = self._lstm_fwd(inpt)
            bwd = jnp.flip(self._lstm_bwd(jnp.flip(inpt, 0)), 0)
            return jnp.concatenate([fwd, bwd], axis=2)

    size, in_size = 7, 5
    rng = np.random.default_rng(0)
    weights = {}
    for d in ['l', 'r']:
        weights[f'{d}0_i2h_weight'] = rng.uniform(size=(size * 4, in_size)).astype(np.float32)
        weights[f'{d}0_h2h_weight'] = rng.uniform(size=(size * 4, size)).astype(np.float32)
        weights[f'{d}0_i2h_bias'] = rng.uniform(size=(size * 4,)).astype(np.float32)
        weights[f'{d}0_h2h_bias'] = rng.uniform(size=(size * 4,)).astype(np.float32)
    net = rnn.LSTM(size, bidirectional=True)
    ref_net = RefBiLSTM(size)
    net.initialize()
    ref_net.initialize()
    data = rng.uniform(size=(11, 10, in_size)).astype(np.float32)
    net(data), ref_net(data)  # the parameters get their input sizes at the first call
    net_params, ref_params = net.collect_params(), ref_net.collect_params()
    for name, value in weights.items():
        net_params[name].set_data(value)
        ref_params[('_lstm_fwd.' if name[0] == 'l' else '_lstm_bwd.') + 'l' + name[1:]].set_data(value)
    np.testing.assert_allclose(np.asarray(net(data)), np.asarray(ref_net(data)), rtol=1e-04, atol=1e-02)
