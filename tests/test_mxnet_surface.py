"""hybrid.mxnet: MXNet 1.x code (``import hybrid.mxnet as mx``) running on hybrid.

References are NumPy, hand-computed values, and files MXNet 1.9.1 wrote (tests/fixtures/mxnet_surface,
made by its make_fixtures.py).
"""
import math
import os
import subprocess
import sys
import textwrap

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import hybrid
import hybrid.mxnet as mx
from hybrid.mxnet import autograd, gluon, nd, sym
from hybrid.mxnet.gluon import nn

FIXTURES = os.path.join(os.path.dirname(__file__), "fixtures", "mxnet_surface")
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


# -- mx.nd ---------------------------------------------------------------------------------------
def test_creation_functions_follow_mxnet_defaults():
    assert nd.array([1, 2]).dtype == np.float32                    # MXNet: float32 unless told
    assert nd.array(np.array([1, 2], np.int64)).dtype == np.float32
    assert nd.array([1, 2], dtype="int32").dtype == np.int32
    np.testing.assert_array_equal(nd.arange(0, 6, 2, repeat=2), [0, 0, 2, 2, 4, 4])
    np.testing.assert_array_equal(nd.arange(3), [0, 1, 2])
    assert nd.zeros((2, 3)).dtype == np.float32 and nd.full((2,), 7).tolist() == [7.0, 7.0]
    assert nd.concat(nd.ones((1, 2)), nd.zeros((1, 3))).shape == (1, 5)   # dim=1 by default
    assert nd.stack(nd.ones((2,)), nd.zeros((2,)), axis=1).shape == (2, 2)
    assert isinstance(nd.ones((1,)), nd.NDArray)


def test_a_requested_64_bit_dtype_is_held_as_its_32_bit_kind_with_a_warning():
    """d2l's ``ones(shape, dtype=int64)`` (token indices) runs without JAX's 64-bit mode: held as int32,
    warned once per dtype."""
    from hybrid.mxnet.numpy import _dtypes
    _dtypes._WARNED.discard(np.dtype("int64"))
    with pytest.warns(UserWarning, match="int64 is held as int32"):
        x = mx.np.ones((2, 3), dtype=np.int64)
    assert x.dtype == np.int32 and x.asnumpy().tolist() == [[1, 1, 1], [1, 1, 1]]
    assert nd.zeros((2,), dtype="int64").dtype == np.int32


def test_operators_are_attributes_of_nd():
    x = np.array([[-1.0, 2.0, -3.0], [4.0, -5.0, 6.0]], np.float32)
    np.testing.assert_array_equal(nd.relu(nd.array(x)), np.maximum(x, 0))
    np.testing.assert_array_equal(nd.slice_axis(nd.array(x), axis=1, begin=1, end=3), x[:, 1:3])
    np.testing.assert_allclose(nd.broadcast_add(nd.array(x), nd.array([[1.0], [2.0]])), x + [[1.0], [2.0]])
    with pytest.raises(AttributeError, match="no_such_op"):
        nd.no_such_op


def test_nd_arithmetic_matches_numpy():
    a, b = np.arange(6, dtype=np.float32).reshape(2, 3), np.full((2, 3), 2.0, np.float32)
    x, y = nd.array(a), nd.array(b)
    np.testing.assert_allclose((x * y + 1) / 2 - x ** 2, (a * b + 1) / 2 - a ** 2)
    np.testing.assert_allclose(nd.broadcast_maximum(nd.elemwise_mul(x, y), nd.array([[4.0]])), np.maximum(a * b, 4))


def test_mxnet_methods_on_jax_arrays():
    a = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    x = jnp.asarray(a)
    assert x.reshape((0, -1)).shape == (2, 12)                 # 0 copies the dimension
    assert x.reshape((-3, 0)).shape == (6, 4)                  # -3 merges two dimensions
    assert x.reshape((0, -4, 1, 3, 0)).shape == (2, 1, 3, 4)   # -4 splits one
    assert x.reshape(4, 6).shape == (4, 6) and x.reshape(-1).shape == (24,)  # JAX's calls keep their meaning
    np.testing.assert_array_equal(x.slice_axis(axis=-1, begin=1, end=3), a[..., 1:3])
    np.testing.assert_array_equal(x.transpose(axes=(0, 2, 1)), a.transpose(0, 2, 1))
    np.testing.assert_array_equal(x.sum(axis=0, exclude=True), a.sum(axis=(1, 2)))
    np.testing.assert_array_equal(x.expand_dims(1).shape, (2, 1, 3, 4))
    parts = x.split(num_outputs=2, axis=-1)
    np.testing.assert_array_equal(parts[1], a[..., 2:])
    traced = jax.jit(lambda v: v.reshape((0, -1)).slice_axis(axis=1, begin=0, end=2))(x)
    np.testing.assert_array_equal(traced, a.reshape(2, 12)[:, :2])


def test_array_methods_can_be_removed_and_restored():
    from hybrid.mxnet import array_methods
    x = jnp.arange(6.0)
    array_methods.disable()
    try:
        assert not hasattr(x, "slice_axis")
        with pytest.raises(Exception):
            x.reshape((0, -1))
    finally:
        array_methods.enable()
    assert x.reshape((2, -1)).shape == (2, 3) and hasattr(x, "slice_axis")


def test_save_and_load_read_and_write_mxnet_files(tmp_path):
    loaded = nd.load(os.path.join(FIXTURES, "nd_dict.params"))        # written by mx.nd.save
    np.testing.assert_array_equal(loaded["a"], np.arange(6).reshape(2, 3))
    assert loaded["b"].dtype == np.int32 and loaded["b"].tolist() == [1, -2]
    ones, half = nd.load(os.path.join(FIXTURES, "nd_list.params"))
    assert ones.tolist() == [1.0, 1.0] and half.shape == (1, 1) and float(half[0, 0]) == 0.5
    path = str(tmp_path / "x.params")
    nd.save(path, {"w": nd.array([[1, 2], [3, 4]]), "k": nd.array([5], dtype="int32")})
    with open(path, "rb") as f, open(os.path.join(FIXTURES, "nd_dict.params"), "rb") as g:
        assert f.read(8) == g.read(8)                                  # MXNet's list magic
    back = nd.load(path)
    np.testing.assert_array_equal(back["w"], [[1, 2], [3, 4]])
    assert back["k"].dtype == np.int32
    nd.save(path, [nd.ones((3,))])
    assert [v.tolist() for v in nd.load(path)] == [[1.0, 1.0, 1.0]]
    with pytest.raises(TypeError, match="dict keys"):
        nd.save(path, {1: nd.ones((1,))})


def test_random_seed_makes_draws_reproducible():
    mx.random.seed(3)
    a = nd.random.uniform(0, 1, shape=(4,))
    mx.random.seed(3)
    b = nd.random.uniform(0, 1, shape=(4,))
    np.testing.assert_array_equal(a, b)
    assert a.shape == (4,) and float(a.min()) >= 0 and float(a.max()) < 1


def test_np_genfromtxt_reads_text_as_mxnet(tmp_path):
    """MXNet 1.9.1: np.genfromtxt(path, dtype=np.float32, delimiter='\\t') gives an mx.np.ndarray of float32
    [[1, 2.5], [3, 4]]; without dtype it keeps NumPy's float64, held here as float32 with a warning unless JAX's 64-bit
    mode is on."""
    path = tmp_path / "table.tsv"
    path.write_text("1\t2.5\n3\t4\n")
    values = mx.np.genfromtxt(str(path), dtype=mx.np.float32, delimiter="\t")
    assert isinstance(values, mx.np.ndarray) and values.dtype == np.float32
    np.testing.assert_array_equal(values.asnumpy(), [[1, 2.5], [3, 4]])
    if not jax.config.jax_enable_x64:
        with pytest.warns(UserWarning, match="float64 is held as float32"):
            assert mx.np.genfromtxt(str(path), delimiter="\t").dtype == np.float32


# -- contexts and errors ---------------------------------------------------------------------------
def test_a_parameters_data_has_its_gradient_as_a_writable_handle():
    """d2l's gradient clipping: ``p.data().grad`` reads a Parameter's gradient, ``p.data().grad[:] *= s``
    scales it; any other jax.Array has no .grad."""
    net = nn.Dense(2, in_units=3)
    net.initialize()
    with autograd.record():
        y = net(nd.ones((4, 3))).sum()
    y.backward()
    params = [p.data() for p in net.collect_params().values()]   # weight (2, 3), bias (2,)
    norm = math.sqrt(sum(float((p.grad ** 2).sum()) for p in params))
    assert norm == pytest.approx(math.sqrt(6 * 16 + 2 * 16))      # d(sum)/dW = 4 everywhere, d/db = 4
    for p in params:
        p.grad[:] *= 1 / norm
    weight, bias = net.collect_params().values()
    np.testing.assert_allclose(np.asarray(weight.grad()), np.full((2, 3), 4 / norm), rtol=1e-6)
    np.testing.assert_allclose(np.asarray(bias.grad()), np.full((2,), 4 / norm), rtol=1e-6)
    with pytest.raises(AttributeError, match="no .grad"):
        _ = jnp.ones(2).grad


def test_contexts():
    assert repr(mx.cpu()) == "cpu(0)" and str(mx.gpu(2)) == "gpu(2)"
    assert mx.cpu() == mx.cpu(0) == mx.context.Context("cpu", 0) and mx.cpu(1) != mx.cpu(0)
    assert mx.current_context() in (mx.cpu(), mx.gpu())
    assert mx.cpu().jax_device == jax.devices("cpu")[0]
    with pytest.raises(RuntimeError, match="gpu"):
        mx.gpu(64).jax_device
    with pytest.raises(ValueError, match="device_type"):
        mx.context.Context("tpu")
    assert nd.zeros((2,), ctx=mx.cpu()).shape == (2,)
    parts = gluon.utils.split_and_load(np.arange(8.0).reshape(4, 2), [mx.cpu()])
    assert len(parts) == 1 and parts[0].devices() == {jax.devices("cpu")[0]}
    state, = gluon.rnn.RNN(4).begin_state(3, ctx=nd.ones((2,)).ctx)   # d2l: begin_state(n, ctx=inputs.ctx)
    assert state.shape == (1, 3, 4) and state.devices() == {jax.devices("cpu")[0]}


def test_mxnet_error_catches_hybrids_errors():
    net = nn.Dense(2, in_units=3)
    net.initialize()
    with pytest.raises(mx.base.MXNetError):
        net(nd.ones((1, 4)))                       # wrong input size: a ShapeError


# -- Gluon 1.x code ----------------------------------------------------------------------------------
class ScaledDense(gluon.HybridBlock):
    """A Gluon 1.x block: a child layer, a parameter from params.get, and F."""

    def __init__(self, units, **kwargs):
        super(ScaledDense, self).__init__(**kwargs)
        with self.name_scope():
            self.dense = nn.Dense(units, in_units=3)
            self.scale = self.params.get("scale", shape=(units,), init=mx.init.Constant(2.0))

    def hybrid_forward(self, F, x, scale):
        h = F.relu(self.dense(x))
        return F.broadcast_mul(h, scale.reshape((1, -1))).sum(axis=0, exclude=True)


@pytest.mark.parametrize("hybridize", [False, True])
def test_gluon1_network_matches_numpy(hybridize):
    mx.random.seed(0)
    net = ScaledDense(4)
    net.initialize(mx.init.Normal(0.5), ctx=mx.cpu())
    if hybridize:
        net.hybridize()
    x = np.linspace(-1, 1, 6, dtype=np.float32).reshape(2, 3)
    out = net(nd.array(x))
    params = {k: np.asarray(v.data()) for k, v in net.collect_params().items()}
    w, b = params["dense.weight"], params["dense.bias"]
    want = (np.maximum(x @ w.T + b, 0) * 2.0).sum(axis=1)
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-6)


def test_gluon1_training_step_with_trainer():
    mx.random.seed(1)
    net = ScaledDense(2)
    net.initialize(mx.init.Normal(0.5))
    trainer = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.1})
    l2 = gluon.loss.L2Loss()
    x, y = nd.array(np.ones((4, 3), np.float32)), nd.zeros((4,))
    w0 = np.asarray(net.collect_params()["scale"].data())
    weight, bias = np.asarray(net.dense.weight.data()), np.asarray(net.dense.bias.data())
    with autograd.record():
        loss = l2(net(x), y)
    autograd.backward(loss)
    grad = np.asarray(net.collect_params()["scale"].grad())
    trainer.step(4)
    # d/dscale of mean over batch of 0.5 * (sum_j h_j * s_j)^2, with h = relu(dense(x)) the same per row
    h = np.maximum(np.ones(3) @ weight.T + bias, 0)
    np.testing.assert_allclose(grad, 4 * (h @ w0) * h, rtol=1e-4, atol=1e-6)   # summed over 4 equal rows
    np.testing.assert_allclose(net.collect_params()["scale"].data(), w0 - 0.1 * grad / 4, rtol=1e-5, atol=1e-7)


def test_gluon_namespaces():
    assert nn.Dense is hybrid.nn.Dense and gluon.rnn.LSTM is hybrid.rnn.LSTM
    assert gluon.loss.L2Loss is hybrid.loss.L2Loss and issubclass(gluon.Trainer, hybrid.Trainer)
    assert gluon.contrib.nn.HybridConcurrent is hybrid.nn.HybridConcatenate
    assert mx.init is mx.initializer and mx.init.Xavier is hybrid.init.Xavier
    assert autograd.record is hybrid.autograd.record
    assert gluon.block.HybridBlock is hybrid.HybridBlock
    assert mx.init.Orthogonal is hybrid.init.Orthogonal
    with pytest.raises(AttributeError, match="Nonexistent"):
        mx.init.Nonexistent


def test_gluon1_loss_helpers_and_custom_op_declarations():
    from hybrid.mxnet.gluon.loss import _apply_weighting, _reshape_like
    np.testing.assert_array_equal(_apply_weighting(nd, nd.array([1.0, 2.0]), 2.0, nd.array([0.5, 1.0])), [1.0, 4.0])
    assert _reshape_like(nd, nd.ones((4,)), nd.ones((2, 2))).shape == (2, 2)

    @mx.operator.register("surface_test_op")
    class Prop(mx.operator.CustomOpProp):
        pass

    assert mx.operator.REGISTERED["surface_test_op"] is Prop
    assert "surface_test_op" in mx.operator.get_all_registered_operators()
    assert type(Prop().create_operator(None, [[2]], [0])) is mx.operator.CustomOp  # MXNet's defaults
    assert nd.Custom(nd.ones((2, 3)), op_type="surface_test_op").shape == (2, 3)  # tests/test_mxnet_custom_op.py


# -- mx.sym ----------------------------------------------------------------------------------------------
def test_symbol_files_run_through_symbol_block():
    io = np.load(os.path.join(FIXTURES, "dense_io.npz"))
    graph = sym.load(os.path.join(FIXTURES, "dense-symbol.json"))
    assert "data" in graph.list_arguments()
    net = gluon.SymbolBlock(graph, sym.var("data"))
    with pytest.raises(RuntimeError, match="load_parameters"):
        net(io["data"])                            # hybrid reads the parameter shapes from the .params file
    net.load_parameters(os.path.join(FIXTURES, "dense-0000.params"))
    np.testing.assert_allclose(net(io["data"]), io["out"], rtol=1e-5, atol=1e-6)
    net.hybridize()
    np.testing.assert_allclose(net(io["data"]), io["out"], rtol=1e-5, atol=1e-6)
    net2 = gluon.SymbolBlock.imports(os.path.join(FIXTURES, "dense-symbol.json"), ["data"],
                                     os.path.join(FIXTURES, "dense-0000.params"))
    np.testing.assert_allclose(net2(io["data"]), io["out"], rtol=1e-5, atol=1e-6)


def test_symbols_are_not_composed():
    data = sym.var("data")
    assert data.list_arguments() == ["data"] and len(sym.Group([data, sym.var("x")])) == 2
    with pytest.raises(NotImplementedError, match="HybridBlock"):
        sym.relu(data)
    with pytest.raises(NotImplementedError, match="HybridBlock"):
        data + 1
    np.testing.assert_array_equal(sym.relu(jnp.array([-1.0, 1.0])), [0.0, 1.0])   # arrays compute
    net = nn.Dense(2, in_units=3)
    net.initialize()
    with pytest.raises(NotImplementedError, match="Symbol 'data'"):
        net(data)                                  # MXNet would return a Symbol


# -- the import alias ------------------------------------------------------------------------------------
def _prints_ok(script: str) -> None:
    """Run ``script`` in a fresh interpreter (the alias changes ``sys.modules``); it must print OK."""
    env = dict(os.environ, PYTHONPATH=REPO, JAX_PLATFORMS="cpu")
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=120)
    assert proc.stdout.strip() == "OK", proc.stderr[-2000:]


def test_install_makes_import_mxnet_work_and_uninstall_undoes_it():
    script = textwrap.dedent("""
        import sys
        import hybrid, hybrid.mxnet
        hybrid.mxnet.install()
        import mxnet as mx
        from mxnet import nd, sym, init, autograd, gluon
        from mxnet.gluon import nn
        from mxnet.gluon.nn import BatchNorm, HybridBlock
        from mxnet.context import cpu
        from mxnet.symbol.contrib import SyncBatchNorm
        from mxnet.ndarray import NDArray
        assert mx is hybrid.mxnet and BatchNorm is hybrid.nn.BatchNorm and nn.Dense is hybrid.nn.Dense
        assert str(cpu()) == 'cpu(0)' and gluon.loss.L2Loss is hybrid.loss.L2Loss
        net = nn.Dense(2, in_units=3)
        net.initialize(init.One())
        assert nd.sum(net(nd.ones((1, 3)))).item() == 6.0
        hybrid.mxnet.uninstall()
        assert not [m for m in sys.modules if m == 'mxnet' or m.startswith('mxnet.')]
        try:
            import mxnet
        except ImportError:
            print('OK')
    """)
    _prints_ok(script)


def test_dotted_imports_reach_below_a_module_outside_the_alias():
    # mxnet.gluon.data is hybrid.data (outside hybrid.mxnet): its submodules import by their dotted path too
    script = textwrap.dedent("""
        import hybrid, hybrid.mxnet
        hybrid.mxnet.install()
        from mxnet.gluon.data.vision import transforms
        import mxnet.gluon.data.vision.transforms as T
        from mxnet.gluon.data.dataloader import DataLoader
        from mxnet.gluon.data import ArrayDataset
        from mxnet.ndarray.contrib import BilinearResize2D
        assert transforms is T is hybrid.data.vision.transforms
        assert DataLoader is hybrid.mxnet.gluon.data.DataLoader and ArrayDataset is hybrid.data.ArrayDataset
        assert BilinearResize2D is hybrid.mxnet.nd.contrib.BilinearResize2D
        try:
            import mxnet.gluon.data.no_such_module
        except ImportError:
            print('OK')
    """)
    _prints_ok(script)


def test_a_script_logging_at_debug_gets_no_line_per_step():
    """MXNet's examples call logging.basicConfig(level=logging.DEBUG): after the first steps (which compile
    and may log that), a training step logs nothing, from hybrid or from JAX."""
    _prints_ok(textwrap.dedent("""
        import logging
        logging.basicConfig(level=logging.DEBUG)
        records = []

        class Keep(logging.Handler):
            def emit(self, record):
                records.append(record.name)
        logging.getLogger().addHandler(Keep())
        import hybrid.mxnet as mx
        from hybrid.mxnet import autograd, gluon, nd
        from hybrid.mxnet.gluon import nn
        net = nn.HybridSequential()
        net.add(nn.Dense(8, activation="relu"), nn.Dense(1))
        net.initialize()
        net.hybridize()
        trainer = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.1})
        l2 = gluon.loss.L2Loss()
        x, y = nd.ones((4, 3)), nd.zeros((4, 1))
        w = nd.ones((3, 1))
        w.attach_grad()

        def step():
            with autograd.record():
                loss = l2(net(x), y) + (nd.dot(x, w) ** 2).mean()
            loss.backward()
            trainer.step(4)
            w[:] = w - 0.1 * w.grad
            return float(loss.mean().asscalar())
        for _ in range(3):
            step()
        assert any(name.startswith("hybrid") for name in records), records  # the compiles were logged
        before = len(records)
        for _ in range(5):
            step()
        assert records[before:] == [], records[before:]
        print("OK")
    """))
