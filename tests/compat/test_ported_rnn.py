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


def test_lstm_cpu_inference():
    """Port of test_gluon_rnn.py::test_lstm_cpu_inference (apache/mxnet master): a 6-layer bidirectional LSTM
    with all weights one "should behave the same as lstm cell"; the expected values are MXNet's."""
    import numpy as np
    from hybrid import init
    EXPECTED_LSTM_OUTPUT = np.array([[[0.72045636, 0.72045636, 0.95215213, 0.95215213],
                                      [0.72045636, 0.72045636, 0.95215213, 0.95215213]],
                                     [[0.95215213, 0.95215213, 0.72045636, 0.72045636],
                                      [0.95215213, 0.95215213, 0.72045636, 0.72045636]]])
    x = jnp.ones(shape=(2, 2, 2))
    model = rnn.LSTM(2, num_layers=6, bidirectional=True)
    model.initialize(init.One())

    y = np.asarray(model(x))
    np.testing.assert_allclose(y, EXPECTED_LSTM_OUTPUT, rtol=1e-3, atol=1e-5)


def test_lstmp():
    """Port of test_gluon_rnn.py::test_lstmp (apache/mxnet master), the cell test. (MXNet's file defines
    ``test_lstmp`` twice; the second, this one, replaces the first, a fused ``LSTM(projection_size=...)``
    test, so only this one runs there.)"""
    nhid = 100
    nproj = 64
    cell = rnn.LSTMPCell(nhid, nproj)
    inputs = [jnp.ones(shape=(10, 50)) for i in range(3)]
    cell.infer_shape(0, inputs[0], False)
    cell.initialize()
    outputs, _ = cell.unroll(3, inputs)
    expected_params = ['h2h_bias', 'h2h_weight', 'h2r_weight', 'i2h_bias', 'i2h_weight']
    assert sorted(cell.collect_params().keys()) == expected_params

    outs = [o.shape for o in outputs]
    assert outs == [(10, nproj)] * 3


@pytest.mark.parametrize("drop_inputs,drop_states,drop_outputs", [(0.5, 0.5, 0.5), (0.5, 0, 0.5)])
def test_vardrop(drop_inputs, drop_states, drop_outputs):
    """Port of test_gluon_rnn.py::test_vardrop (apache/mxnet master); its two ``check_vardrop`` calls are
    the parameters. ``almost_equal`` is ``np.allclose`` with MXNet's default tolerances."""
    import numpy as np
    from hybrid import autograd

    def almost_equal(a, b):
        return np.allclose(a, b, rtol=1e-5, atol=1e-20)

    cell = rnn.VariationalDropoutCell(rnn.RNNCell(100), drop_outputs=drop_outputs, drop_states=drop_states,
                                      drop_inputs=drop_inputs)

    input_data = jnp.asarray(np.random.default_rng(0).uniform(size=(10, 3, 50)), jnp.float32)
    cell.infer_shape(0, input_data, False)
    cell.initialize(init='xavier')
    with autograd.record():
        outputs1, _ = cell.unroll(3, input_data, merge_outputs=True)
        outputs2, _ = cell.unroll(3, input_data, merge_outputs=True)
    assert not almost_equal(np.asarray(outputs1), np.asarray(outputs2))

    inputs = [jnp.ones(shape=(10, 50)) for i in range(3)]
    cell.infer_shape(0, inputs[0], False)
    cell.initialize()
    outputs, _ = cell.unroll(3, inputs, merge_outputs=False)

    outs = [o.shape for o in outputs]
    assert outs == [(10, 100), (10, 100), (10, 100)]

    cell.reset()
    cell.hybridize()
    with autograd.record():
        outputs3, _ = cell.unroll(3, input_data, merge_outputs=True)
        outputs4, _ = cell.unroll(3, input_data, merge_outputs=True)
    assert not almost_equal(np.asarray(outputs3), np.asarray(outputs4))
    assert not almost_equal(np.asarray(outputs1), np.asarray(outputs3))


def _check_rnn_cell(cell, in_shape=(10, 50), out_shape=(10, 100), begin_state=None):
    """MXNet's ``check_rnn_cell`` (test_gluon_rnn.py)."""
    inputs = [jnp.ones(shape=in_shape) for i in range(3)]
    cell.infer_shape(0, inputs[0], False)
    cell.initialize()
    outputs, _ = cell.unroll(3, inputs, begin_state=begin_state)
    assert sorted(cell.collect_params().keys()) == ['h2h_bias', 'h2h_weight', 'i2h_bias', 'i2h_weight']

    outs = [o.shape for o in outputs]
    assert outs == [out_shape] * 3


_CONV_NOTE = """ Smaller shapes than MXNet's (hidden channels 100 -> 8, spatial sizes (20, 30, 50) -> (6, 7, 9))
    keep it fast on a CPU; the assertions are the same with the output shapes these sizes give."""


@pytest.mark.parametrize("kind", ["RNN", "LSTM", "GRU"], ids=["test_convrnn", "test_convlstm", "test_convgru"])
def test_conv_cells(kind):
    """Port of test_gluon_rnn.py::test_convrnn, ::test_convlstm and ::test_convgru (apache/mxnet master)."""
    cell = getattr(rnn, f"Conv1D{kind}Cell")((10, 9), 8, 3, 3)
    _check_rnn_cell(cell, in_shape=(1, 10, 9), out_shape=(1, 8, 7))

    cell = getattr(rnn, f"Conv2D{kind}Cell")((10, 7, 9), 8, 3, 3)
    _check_rnn_cell(cell, in_shape=(1, 10, 7, 9), out_shape=(1, 8, 5, 7))

    cell = getattr(rnn, f"Conv3D{kind}Cell")((10, 6, 7, 9), 8, 3, 3)
    _check_rnn_cell(cell, in_shape=(1, 10, 6, 7, 9), out_shape=(1, 8, 4, 5, 7))


test_conv_cells.__doc__ += _CONV_NOTE


def _check_rnn_forward(layer, inputs):
    """MXNet's ``check_rnn_forward`` (test_gluon_rnn.py): unroll merged and unmerged, backward from both."""
    from hybrid import autograd
    layer.initialize()
    with autograd.record():
        autograd.backward(layer.unroll(3, inputs, merge_outputs=True)[0])
    with autograd.record():
        autograd.backward(layer.unroll(3, inputs, merge_outputs=False)[0])


def test_conv_fill_shape():
    """Port of test_gluon_rnn.py::test_conv_fill_shape (apache/mxnet master): input channels -1 are inferred."""
    input = jnp.ones((8, 3, 5, 7))
    cell = rnn.Conv1DLSTMCell((-1, 7), 10, (3,), (3,))
    cell.infer_shape(0, input, False)
    cell.hybridize()
    _check_rnn_forward(cell, input)
    assert cell.i2h_weight.shape[1] == 5, cell.i2h_weight.shape[1]


def test_rnn_cells():
    """Port of test_gluon_rnn.py::test_rnn_cells (apache/mxnet master): convolutional cells and a stack of
    them, forward and backward."""
    _check_rnn_forward(rnn.Conv1DLSTMCell((5, 7), 10, (3,), (3,)), jnp.ones((8, 3, 5, 7)))
    _check_rnn_forward(rnn.Conv1DRNNCell((5, 7), 10, (3,), (3,)), jnp.ones((8, 3, 5, 7)))
    _check_rnn_forward(rnn.Conv1DGRUCell((5, 7), 10, (3,), (3,)), jnp.ones((8, 3, 5, 7)))

    net = rnn.SequentialRNNCell()
    net.add(rnn.Conv1DLSTMCell((5, 7), 10, (3,), (3,)))
    net.add(rnn.Conv1DRNNCell((10, 5), 11, (3,), (3,)))
    net.add(rnn.Conv1DGRUCell((11, 3), 12, (3,), (3,)))
    _check_rnn_forward(net, jnp.ones((8, 3, 5, 7)))


def test_unroll_layout():
    """Port of test_gluon_rnn.py::test_unroll_layout (apache/mxnet master)."""
    import numpy as np
    rng = np.random.default_rng(0)
    cell = rnn.HybridSequentialRNNCell()
    for i in range(5):
        if i == 1:
            cell.add(rnn.ResidualCell(rnn.LSTMCell(100)))
        else:
            cell.add(rnn.LSTMCell(100))
    inputs = [jnp.asarray(rng.uniform(size=(10, 50)), jnp.float32) for _ in range(3)]
    cell.infer_shape(0, inputs[0], False)
    cell.initialize()
    outputs, _ = cell.unroll(3, inputs, layout='TNC')
    assert outputs[0].shape == (10, 100)
    assert outputs[1].shape == (10, 100)
    assert outputs[2].shape == (10, 100)

    outputs, _ = cell.unroll(3, inputs, layout='NTC')
    assert outputs[0].shape == (10, 100)
    assert outputs[1].shape == (10, 100)
    assert outputs[2].shape == (10, 100)


def test_rnn_unroll_variant_length():
    """Port of test_gluon_rnn.py::test_rnn_unroll_variant_length (apache/mxnet master): unrolling with
    ``valid_length`` equals unrolling each sequence alone; the padded outputs are zero. ``assert_almost_equal``
    is ``np.testing.assert_allclose`` with MXNet's default tolerances for float32."""
    import numpy as np

    def assert_almost_equal(a, b):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-4, atol=1e-5)

    rng = np.random.default_rng(0)
    cell_list = []
    for base_cell_class in [rnn.RNNCell, rnn.LSTMCell, rnn.GRUCell]:
        cell_list.append(base_cell_class(20))
        cell_list.append(rnn.BidirectionalCell(
                         l_cell=base_cell_class(20),
                         r_cell=base_cell_class(20)))
        cell_list.append(rnn.VariationalDropoutCell(base_cell=base_cell_class(20)))
    stack_res_rnn_cell = rnn.SequentialRNNCell()
    stack_res_rnn_cell.add(rnn.ResidualCell(base_cell=rnn.RNNCell(20)))
    stack_res_rnn_cell.add(rnn.ResidualCell(base_cell=rnn.RNNCell(20)))
    cell_list.append(stack_res_rnn_cell)
    batch_size = 4
    max_length = 10
    valid_length = [3, 10, 5, 6]
    valid_length_nd = jnp.array(valid_length)
    for cell in cell_list:
        # Test for NTC layout
        data_nd = jnp.asarray(rng.normal(0, 1, size=(batch_size, max_length, 20)), jnp.float32)
        if isinstance(cell, (rnn.HybridSequentialRNNCell, rnn.SequentialRNNCell)):
            cell.infer_shape(0, data_nd, False)
        elif isinstance(cell, rnn.BidirectionalCell):
            cell.infer_shape(0, data_nd, True)
        else:
            cell.infer_shape(0, data_nd, False)
        cell.initialize()
        cell.hybridize()
        outs, states = cell.unroll(length=max_length, inputs=data_nd,
                                   valid_length=valid_length_nd,
                                   merge_outputs=True,
                                   layout='NTC')
        for i, ele_length in enumerate(valid_length):
            # Explicitly unroll each sequence and compare the final states and output
            ele_out, ele_states = cell.unroll(length=ele_length,
                                              inputs=data_nd[i:(i+1), :ele_length, :],
                                              merge_outputs=True,
                                              layout='NTC')
            assert_almost_equal(ele_out, outs[i:(i+1), :ele_length, :])
            if ele_length < max_length:
                # Check the padded outputs are all zero
                assert_almost_equal(outs[i:(i+1), ele_length:max_length, :], 0)
            for valid_out_state, gt_state in zip(states, ele_states):
                assert_almost_equal(valid_out_state[i:(i+1)], gt_state)

        # Test for TNC layout
        data_nd = jnp.asarray(rng.normal(0, 1, size=(max_length, batch_size, 20)), jnp.float32)
        outs, states = cell.unroll(length=max_length, inputs=data_nd,
                                   valid_length=valid_length_nd,
                                   layout='TNC')
        for i, ele_length in enumerate(valid_length):
            # Explicitly unroll each sequence and compare the final states and output
            ele_out, ele_states = cell.unroll(length=ele_length,
                                              inputs=data_nd[:ele_length, i:(i+1), :],
                                              merge_outputs=True,
                                              layout='TNC')
            assert_almost_equal(ele_out, outs[:ele_length, i:(i + 1), :])
            if ele_length < max_length:
                # Check the padded outputs are all zero
                assert_almost_equal(outs[ele_length:max_length, i:(i+1), :], 0)
            for valid_out_state, gt_state in zip(states, ele_states):
                assert_almost_equal(valid_out_state[i:(i+1)], gt_state)


@pytest.mark.parametrize("length", [1, 3])
def test_bidirectional_unroll_valid_length(length):
    """Port of test_gluon_rnn.py::test_bidirectional_unroll_valid_length (apache/mxnet master); its two
    ``_check_bidirectional_unroll_valid_length`` calls are the parameters."""
    import numpy as np
    from hybrid import HybridBlock

    class BiLSTM(HybridBlock):
        def __init__(self, rnn_size, time_step, **kwargs):
            super(BiLSTM, self).__init__(**kwargs)
            self.time_step = time_step
            self.bi_lstm = rnn.BidirectionalCell(
                rnn.LSTMCell(rnn_size),
                rnn.LSTMCell(rnn_size))

        def forward(self, inputs, valid_len):
            outputs, states = self.bi_lstm.unroll(self.time_step, inputs, valid_length=valid_len,
                                                  layout='NTC', merge_outputs=True)
            return outputs, states

        def infer_shape(self, x, *args):
            self.bi_lstm.infer_shape(0, x, True)

    rnn_size = 100
    net = BiLSTM(rnn_size, length)
    inputs_data = jnp.asarray(np.random.default_rng(0).uniform(size=(10, length, 50)), jnp.float32)
    net.infer_shape(inputs_data)
    net.initialize()
    net.hybridize()
    valid_len = jnp.array([length]*10)
    outputs, _ = net(inputs_data, valid_len)
    assert outputs.shape == (10, length, 200)


def test_cell_fill_shape():
    """Port of test_gluon_rnn.py::test_cell_fill_shape (apache/mxnet master)."""
    cell = rnn.LSTMCell(10, input_size=7)
    cell.hybridize()
    assert cell.i2h_weight.shape[1] == 7, cell.i2h_weight.shape[1]


def _check_rnn_layer_forward(layer, inputs, states=None, run_only=False):
    """MXNet's ``check_rnn_layer_forward`` (test_gluon_rnn.py): output and input gradient, eager then
    hybridized; ``inputs.attach_grad()`` ... ``inputs.grad`` is ``autograd.grad(out, inputs)``."""
    import numpy as np
    from hybrid import autograd
    layer.initialize()
    with autograd.record():
        if states is None:
            out = layer(inputs)
        else:
            out = layer(inputs, states)
        if states is not None:
            assert isinstance(out, (list, tuple)) and len(out) == 2
            out = out[0]
        else:
            assert not isinstance(out, (list, tuple))
        dx = autograd.grad(out, inputs)

    np_out = np.asarray(out)
    np_dx = np.asarray(dx)

    layer.hybridize()

    with autograd.record():
        if states is not None:
            out = layer(inputs, states)
            assert isinstance(out, (list, tuple)) and len(out) == 2
            out = out[0]
        else:
            out = layer(inputs)
            assert not isinstance(out, (list, tuple))
        dx = autograd.grad(out, inputs)

    if states is not None:
        layer(inputs, states)  # test is_training = false
    else:
        layer(inputs)

    if not run_only:
        np.testing.assert_allclose(np_out, np.asarray(out), rtol=1e-3, atol=1e-5)
        np.testing.assert_allclose(np_dx, np.asarray(dx), rtol=1e-3, atol=1e-5)


def test_layer_fill_shape():
    """Port of test_gluon_rnn.py::test_layer_fill_shape (apache/mxnet master).

    Documented difference applied (porting-from-gluon.md, gluon.rnn): the layer keeps Gluon 1.x's parameters
    per layer and direction instead of Gluon 2.0's packed ``rnn_param``, so MXNet's ``rnn_param.shape[0] ==
    760`` is asserted as the size of all parameters together."""
    import numpy as np
    layer = rnn.LSTM(10)
    layer.hybridize()
    _check_rnn_layer_forward(layer, jnp.ones((3, 2, 7)))
    print(layer)
    assert sum(int(np.prod(p.shape)) for p in layer.collect_params().values()) == 760
    assert layer.l0_i2h_weight.shape == (40, 7)


def test_rnn_cells_export_import(tmp_path):
    """Port of test_gluon_rnn.py::test_rnn_cells_export_import (apache/mxnet master); the files go to a
    temporary directory instead of the working directory."""
    import numpy as np
    from hybrid import HybridBlock, SymbolBlock

    class RNNLayer(HybridBlock):
        def __init__(self):
            super(RNNLayer, self).__init__()
            self.cell = rnn.RNNCell(hidden_size=1)

        def forward(self, seq):
            outputs, state = self.cell.unroll(inputs=seq, length=2, merge_outputs=True)
            return outputs

        def infer_shape(self, input):
            self.cell.infer_shape(0, input, False)

    class LSTMLayer(HybridBlock):
        def __init__(self):
            super(LSTMLayer, self).__init__()
            self.cell = rnn.LSTMCell(hidden_size=1)

        def forward(self, seq):
            outputs, state = self.cell.unroll(inputs=seq, length=2, merge_outputs=True)
            return outputs

        def infer_shape(self, input):
            self.cell.infer_shape(0, input, False)

    class GRULayer(HybridBlock):
        def __init__(self):
            super(GRULayer, self).__init__()
            self.cell = rnn.GRUCell(hidden_size=1)

        def forward(self, seq):
            outputs, state = self.cell.unroll(inputs=seq, length=2, merge_outputs=True)
            return outputs

        def infer_shape(self, input):
            self.cell.infer_shape(0, input, False)

    path = str(tmp_path / "model")
    for hybrid_block in [RNNLayer(), LSTMLayer(), GRULayer()]:
        input = jnp.ones(shape=(1, 2, 1))
        hybrid_block.infer_shape(input)
        hybrid_block.initialize()
        hybrid_block.hybridize()
        output1 = hybrid_block(input)
        hybrid_block.export(path=path, epoch=0)
        symbol = SymbolBlock.imports(
            symbol_file=path + "-symbol.json",
            input_names=["data"],
            param_file=path + "-0000.params",
        )
        output2 = symbol(input)
        np.testing.assert_allclose(np.asarray(output1), np.asarray(output2), rtol=1e-4, atol=1e-5)


def _check_rnn_forward_backward(layer, merged_inputs, hybridize, merge_outputs, deterministic):
    """MXNet's ``check_rnn_forward_backward`` (test_gluon_rnn.py): outputs and input gradients of an unroll
    with merged and unmerged outputs agree. ``x.attach_grad()`` ... ``x.grad`` is ``autograd.grad(out, x)``
    (for unmerged inputs, the list of steps)."""
    import numpy as np
    from hybrid import autograd
    input_size = 5
    if merged_inputs:
        inputs = jnp.ones((8, 3, 5))
    else:
        inputs = [jnp.ones((8, 5)) for _ in range(3)]

    if hybridize:
        layer.hybridize()
    layer.initialize()

    with autograd.record():
        out = layer.unroll(3, inputs, merge_outputs=merge_outputs)[0]
        grads = autograd.grad(out, inputs)

    if hasattr(layer, 'i2h_weight'):
        assert layer.i2h_weight.shape[1] == input_size, (layer.i2h_weight.shape[1], input_size)

    if not isinstance(out, list):  # MXNet tests merge_outputs, which gets None wrong for merged inputs
        np_out = np.asarray(out)
    else:
        np_out = np.stack([np.asarray(x) for x in out], axis=1)

    if merged_inputs:
        np_dx = np.asarray(grads)
    else:
        np_dx = np.stack([np.asarray(x) for x in grads], axis=1)

    with autograd.record():
        out = layer.unroll(3, inputs, merge_outputs=not merge_outputs)[0]
        grads = autograd.grad(out, inputs)

    if merged_inputs:
        input_grads = np.asarray(grads)
    else:
        input_grads = np.stack([np.asarray(x) for x in grads], axis=1)

    if deterministic:
        if not isinstance(out, list):
            ref_np_out = np.asarray(out)
        else:
            ref_np_out = np.stack([np.asarray(x) for x in out], axis=1)
        np.testing.assert_allclose(np_out, ref_np_out, rtol=1e-3, atol=1e-5)
        np.testing.assert_allclose(np_dx, input_grads, rtol=1e-3, atol=1e-5)


@pytest.mark.parametrize('seq_rnn_type,determinism,merged_inputs,hybridize,merge_outputs', [
    (rnn.SequentialRNNCell, True, True, True, None),
    (rnn.HybridSequentialRNNCell, True, False, False, True),
])
def test_sequential_rnn_cells(seq_rnn_type, determinism, merged_inputs, hybridize, merge_outputs):
    """Port of test_gluon_rnn.py::test_sequential_rnn_cells (apache/mxnet master, skipped there for
    apache/mxnet#18291). MXNet builds a SequentialRNNCell whatever ``seq_rnn_type``; here ``seq_rnn_type``
    is used. MXNet's grid is the product of the five parameters (48 cases); these 2 cases take each value of
    each parameter but ``determinism=False`` (every case compiles its programs, about 2 s on a CPU, and the
    stack with a DropoutCell about 5 s); the helper runs ``not merge_outputs`` too, so False is covered."""
    net = seq_rnn_type()
    net.add(rnn.LSTMCell(10, input_size=5))
    net.add(rnn.RNNCell(10, input_size=10))
    net.add(rnn.GRUCell(10, input_size=10))
    if not determinism:
        net.add(rnn.DropoutCell(0.5))
    _check_rnn_forward_backward(net, merged_inputs, hybridize, merge_outputs, determinism)


@pytest.mark.parametrize('cell_type,num_states,layout', [
    (rnn.LSTMCell, 2, 'NTC'),
])
def test_unroll(cell_type, num_states, layout):
    """Port of test_gluon_rnn.py::test_unroll (apache/mxnet master): ``rnn_cell.dynamic_unroll`` in a
    (hybridized) block equals ``unroll`` with ``valid_length``, forward and after an SGD step.
    ``copy.deepcopy`` of the parameters is a copy of their values; ``assert_almost_equal`` is
    ``np.testing.assert_allclose``.

    Made smaller to stay fast on a CPU (each configuration compiles a training step): MXNet's grid is every
    cell with both layouts, here LSTMCell with 'NTC' (dynamic_unroll's other layout); batch 20 -> 6, input 50 -> 8,
    hidden 30 -> 5, 10 steps -> 4; and of MXNet's five configurations only ``layer.hybridize()`` runs: the three
    ``layer.hybridize({...})`` ones pass the dict as ``active`` (truthy), so they are ``layer.hybridize()`` again
    in MXNet and in hybrid, and the eager one runs the same Python as the reference ``cell.unroll``."""
    import numpy as np
    import hybrid
    from hybrid import HybridBlock, autograd

    class RNNLayer(HybridBlock):
        def __init__(self, cell_type, hidden_size, layout):
            super(RNNLayer, self).__init__()
            self.cell = cell_type(hidden_size)
            self.layout = layout

        def forward(self, inputs, states, valid_length):
            if isinstance(valid_length, list) and len(valid_length) == 0:
                valid_length = None
            return rnn.rnn_cell.dynamic_unroll(self.cell, inputs, states,
                                               valid_length=valid_length,
                                               layout=self.layout)

        def infer_shape(self, x, *args):
            self.cell.infer_shape(0, x, False)

    def assert_almost_equal(a, b, rtol, atol):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=rtol, atol=atol)

    rng = np.random.default_rng(0)
    batch_size = 6
    input_size = 8
    hidden_size = 5
    seq_len = 4
    if layout == 'TNC':
        rnn_data = jnp.asarray(rng.normal(loc=0, scale=1, size=(seq_len, batch_size, input_size)), jnp.float32)
    elif layout == 'NTC':
        rnn_data = jnp.asarray(rng.normal(loc=0, scale=1, size=(batch_size, seq_len, input_size)), jnp.float32)
    else:
        print("Wrong layout")
        return
    valid_length = jnp.asarray(np.round(rng.uniform(low=1, high=seq_len, size=(batch_size))), jnp.float32)
    state_shape = (batch_size, hidden_size)
    states = [jnp.asarray(rng.normal(loc=0, scale=1, size=state_shape), jnp.float32) for i in range(num_states)]

    cell = cell_type(hidden_size)
    if layout == 'TNC':
        cell.infer_shape(0, rnn_data[0], False)
        cell.initialize()
        cell(rnn_data[0], states)
    else:
        cell.infer_shape(0, rnn_data[:, 0, :], False)
        cell.initialize()
        cell(rnn_data[:, 0, :], states)
    params1 = cell.collect_params()
    orig_params1 = {key: np.array(val.data()) for key, val in params1.items()}

    trainer = hybrid.Trainer(params1, 'sgd', {'learning_rate': 0.03})
    with autograd.record():
        res1, states1 = cell.unroll(seq_len, rnn_data, states, valid_length=valid_length,
                                    layout=layout, merge_outputs=True)
    autograd.backward(res1)
    trainer.step(batch_size)

    configs = [
            lambda layer: layer.hybridize()]
    # We can't pass None to a hybrid block, but it accepts an empty list.
    # so we use an empty list to represent valid_length if it's None.
    if valid_length is None:
        valid_length = []
    for config in configs:
        layer = RNNLayer(cell_type, hidden_size, layout)
        layer.infer_shape(rnn_data)
        layer.initialize()
        config(layer)
        res2, states2 = layer(rnn_data, states, valid_length)
        params2 = layer.collect_params()
        for key, val in orig_params1.items():
            params2['cell.' + key].set_data(val.copy())

        trainer = hybrid.Trainer(params2, 'sgd', {'learning_rate': 0.03})
        with autograd.record():
            res2, states2 = layer(rnn_data, states, valid_length)
        assert_almost_equal(res1, res2, rtol=0.001, atol=0.0001)
        assert len(states1) == len(states2)
        for i in range(len(states1)):
            assert_almost_equal(states1[i], states2[i], rtol=0.001, atol=0.0001)
        autograd.backward(res2)
        trainer.step(batch_size)

        for key, val in params1.items():
            weight1 = val.data()
            weight2 = params2['cell.' + key].data()
            assert_almost_equal(weight1, weight2, rtol=0.1, atol=0.1)


def _check_rnn_states(fused_states, stack_states, num_layers, bidirectional=False, is_lstm=True):
    """MXNet's ``check_rnn_states`` (test_gluon_rnn.py)."""
    import numpy as np
    directions = 2 if bidirectional else 1
    assert len(stack_states) / len(fused_states) == num_layers * directions

    fused_states = [np.asarray(state) for state in fused_states]
    stack_states = [np.expand_dims(np.asarray(state), axis=0) for state in stack_states]
    if is_lstm:
        stack_states_h = stack_states[0::2]
        stack_states_c = stack_states[1::2]
        stack_states = [np.concatenate(stack_states_h, axis=0), np.concatenate(stack_states_c, axis=0)]
    else:
        stack_states = [np.concatenate(stack_states, axis=0)]

    for f, s in zip(fused_states, stack_states):
        assert f.shape == s.shape
        np.testing.assert_allclose(f, s, atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("bidirectional", [False, True], ids=["unidirectional", "bidirectional"])
def test_lstmp_fused_layer(bidirectional):
    """Port of the first test_gluon_rnn.py::test_lstmp (apache/mxnet master), a fused ``LSTM(projection_size=)``
    against a stack of ``LSTMPCell``; MXNet's file defines ``test_lstmp`` twice, so the second replaces this one
    and MXNet never runs it. Its two loops are the parameters.

    Documented difference applied (porting-from-gluon.md, gluon.rnn): the layer keeps parameters per layer and
    direction, not a packed ``rnn_param`` to split with ``split_rnn_params``, so the stack's parameters are
    copied from the layer's by name. MXNet sets every weight to zero (so both outputs are zero); here they are
    random, the shapes are smaller (hidden 512 -> 16, projection 256 -> 8, input 128 -> 12) and the loop over
    ``num_layers in [1, 3]`` is one stack of 2 layers."""
    import numpy as np
    rng = np.random.default_rng(0)
    hidden_size, projection_size = 16, 8
    rtol, atol = 1e-4, 1e-4
    batch_size, seq_len = 5, 3
    input_size = 12
    lstm_input = jnp.asarray(rng.uniform(size=(seq_len, batch_size, input_size)), jnp.float32)

    for num_layers in [2]:
        fused_layer = rnn.LSTM(hidden_size, projection_size=projection_size,
                               num_layers=num_layers, layout='TNC', bidirectional=bidirectional)

        stack_layer = rnn.HybridSequentialRNNCell()
        for _ in range(num_layers):
            if bidirectional:
                stack_layer.add(
                    rnn.BidirectionalCell(rnn.LSTMPCell(hidden_size, projection_size=projection_size),
                                          rnn.LSTMPCell(hidden_size, projection_size=projection_size)))
            else:
                stack_layer.add(rnn.LSTMPCell(hidden_size, projection_size=projection_size))
        fused_layer.initialize()

        fused_begin_state = fused_layer.begin_state(batch_size)
        stack_begin_state = stack_layer.begin_state(batch_size=batch_size)
        fused_layer.infer_shape(lstm_input, fused_begin_state)
        stack_layer.infer_shape(0, lstm_input, False)
        stack_layer.initialize()
        fused_layer_params = fused_layer.collect_params()
        stack_layer_params = stack_layer.collect_params()

        for name, param in fused_layer_params.items():
            value = rng.uniform(-0.5, 0.5, size=param.shape).astype(np.float32)
            param.set_data(value)
            cur = name.split("_")[0]
            if bidirectional:
                stack_layer_params["{}.{}_cell.{}".format(cur[1:], name[0], name[len(cur)+1:])].set_data(value)
            else:
                stack_layer_params[name[1:].replace('_', '.', 1)].set_data(value)

        fused_output, fused_states = fused_layer(lstm_input, fused_begin_state)
        stack_output, stack_states = stack_layer.unroll(seq_len, lstm_input, begin_state=stack_begin_state,
                                                        layout='TNC',
                                                        merge_outputs=True)

        np.testing.assert_allclose(np.asarray(fused_output), np.asarray(stack_output), rtol=rtol, atol=atol)
        _check_rnn_states(fused_states, stack_states, num_layers, bidirectional)
