"""The MXNet operator table (hybrid.mxnet.ops): how F binds calls, attribute parsing from Python values and
MXNet's strings, errors, multi-output nodes in the symbol importer, use under jit/hybridize and autograd.
Values are checked against NumPy or against MXNet 1.9.1's printed results (tests/test_mxnet_ops_reference.py
holds the bulk of MXNet-made cases)."""
import json
import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import hybrid
from hybrid import SymbolBlock, autograd
from hybrid.export import FormatError
from hybrid.mxnet.ops import F, OPERATORS, Attrs, OpContext, call_op, get_op

from conftest import assert_close
from helpers import mx_params, node

RNG = np.random.default_rng(0)
VARIANTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", "mxnet_ops_variants")
with open(os.path.join(VARIANTS, "cases.json")) as _fh:
    VARIANT_CASES = json.load(_fh)


def rand(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


# -- binding ------------------------------------------------------------------------------------------------
def test_inputs_bind_by_position_and_by_mxnet_input_name():
    x, w, b = rand(2, 3), rand(4, 3), rand(4)
    expected = x @ w.T + b
    assert_close(F.FullyConnected(x, w, b, num_hidden=4), expected)
    assert_close(F.FullyConnected(data=x, weight=w, bias=b, num_hidden=4), expected)
    assert_close(F.FullyConnected(x, bias=b, weight=w, num_hidden=4, name="fc0", ctx=None), expected)
    assert_close(F.FullyConnected(x, w, num_hidden=4, no_bias=True), x @ w.T)


def test_attributes_may_follow_inputs_positionally_as_in_mxnets_generated_functions():
    x = rand(2, 5, 3)
    assert_close(F.slice_axis(x, 1, 1, 4), x[:, 1:4])
    assert_close(F.reshape(x, (0, -1)), x.reshape(2, 15))
    assert F.zeros((2, 3)).shape == (2, 3)
    # MXNet 1.9.1's order: bipartite_matching(data, is_ascend, threshold, topk)
    rows, cols = F.contrib.bipartite_matching(np.array([[0.9, 0.1], [0.8, 0.7]], np.float32), False, 0.5)
    assert np.asarray(rows).tolist() == [0, 1] and np.asarray(cols).tolist() == [0, 1]
    with pytest.raises(TypeError, match=r"F.slice_axis\(\) takes 1 input.*3 positional attribute"):
        F.slice_axis(x, 1, 1, 4, 5)


def test_python_scalars_and_numpy_arrays_are_inputs():
    assert_close(F.broadcast_add(np.ones((2, 2), np.float32), 2.0), np.full((2, 2), 3.0))
    assert_close(F.where(np.array([1, 0]), np.ones((2, 3)), np.zeros((2, 3))), [[1] * 3, [0] * 3])


def test_one_output_is_an_array_several_are_a_list():
    x = rand(2, 6)
    parts = F.split(x, num_outputs=3, axis=1)
    assert isinstance(parts, list) and [p.shape for p in parts] == [(2, 2)] * 3
    assert_close(parts[2], x[:, 4:])
    assert not isinstance(F.split(x, num_outputs=1), list)
    values, indices = F.topk(x, k=2, ret_typ="both")
    order = np.argsort(-x, axis=1)[:, :2]
    assert_close(values, np.take_along_axis(x, order, 1))
    assert_close(indices, order)
    assert np.asarray(indices).dtype == np.float32  # MXNet's default index dtype


def test_missing_inputs_and_unknown_operators_are_named():
    with pytest.raises(TypeError, match=r"F.Convolution\(\) missing input 'weight'"):
        F.Convolution(rand(1, 1, 3, 3), kernel=(1, 1), num_filter=1)
    with pytest.raises(AttributeError, match=r"F.foo_bar: 'foo_bar' is not among the supported MXNet operators"):
        F.foo_bar
    with pytest.raises(AttributeError, match=r"F.contrib.nope: 'nope' is not among"):
        F.contrib.nope
    with pytest.raises(NotImplementedError, match="MXNet operator 'Correlation' is not among the supported"):
        get_op("Correlation")
    assert "box_nms" in dir(F.contrib) and "FullyConnected" in dir(F)


def test_aliases_share_one_operator():
    assert OPERATORS["split"] is OPERATORS["SliceChannel"]
    assert OPERATORS["elemwise_add"] is OPERATORS["_plus"] is OPERATORS["broadcast_add"] is OPERATORS["_Plus"]
    assert OPERATORS["Concat"] is OPERATORS["concat"]


# -- attributes -------------------------------------------------------------------------------------------
@pytest.mark.parametrize("text, value", [("(3, 3)", (3, 3)), ("[1,2]", (1, 2)), ("4", (4,)), ("()", ())])
def test_tuples_from_strings_equal_python_tuples(text, value):
    assert Attrs({"k": text}, "t").tuple("k") == value
    assert Attrs({"k": value if len(value) != 1 else value[0]}, "t").tuple("k") == value


def test_attribute_getters_accept_mxnets_strings_and_python_values():
    a = Attrs({"b1": "True", "b2": "0", "b3": True, "f": "0.25", "i": "-3", "n": "None", "s": "(None, 2, -1)",
               "d": "float16", "fl": "(0.1, 0.2)"}, "t")
    assert (a.bool("b1", False), a.bool("b2", True), a.bool("b3", False)) == (True, False, True)
    assert a.float("f") == 0.25 and a.int("i") == -3 and a.int("n", 7) == 7 and a.opt_int("n") is None
    assert a.opt_tuple("s") == (None, 2, -1)
    assert a.dtype("d") == np.float16 and a.floats("fl") == (0.1, 0.2)
    assert Attrs({"d": np.float32}, "t").dtype("d") == np.float32


@pytest.mark.parametrize("raw, getter, message", [
    ({"k": "3; import os"}, "int", r"F.op: attribute k='3; import os' is not an integer"),
    ({"k": "yes"}, "bool", r"attribute k='yes' is not a boolean"),
    ({"k": "(1, x)"}, "tuple", r"attribute k='\(1, x\)' is not a tuple of integers"),
    ({"k": "nan"}, "float", r"attribute k='nan' must not be NaN"),
    ({}, "int", r"missing attribute 'k'"),
])
def test_bad_attributes_raise_naming_the_call_and_attribute(raw, getter, message):
    with pytest.raises(ValueError, match=message):
        getattr(Attrs(raw, "F.op"), getter)("k")


def test_operator_errors_name_the_operator_and_what_was_expected():
    with pytest.raises(ValueError, match=r"F.FullyConnected: weight shape \(4, 3\) does not match num_hidden=5"):
        F.FullyConnected(rand(2, 3), rand(4, 3), rand(4), num_hidden=5)
    with pytest.raises(ValueError, match=r"F.reshape: reshape codes \(5, -1\) cannot turn"):
        F.reshape(rand(2, 3), shape=(5, -1))
    with pytest.raises(ValueError, match=r"F.Pooling: attribute pool_type='median'; supported"):
        F.Pooling(rand(1, 1, 4, 4), kernel=(2, 2), pool_type="median")


# -- semantics checked against NumPy or MXNet's printed values ----------------------------------------------
def test_reshape_codes_and_reverse():
    x = rand(2, 3, 4)
    assert F.reshape(x, shape=(-4, 1, 2, -2)).shape == (1, 2, 3, 4)
    assert F.reshape(x, shape=(0, -3)).shape == (2, 12)
    assert F.reshape(rand(10, 5, 4), shape=(-1, 0), reverse=True).shape == (50, 4)  # MXNet's doc example


def test_full_reductions_give_shape_one_as_mxnet():
    x = rand(2, 3)
    assert F.sum(x).shape == (1,) and F.sum(x, keepdims=True).shape == (1, 1)
    assert_close(F.sum(x, axis=1, exclude=True), x.sum(0))
    assert_close(F.norm(x), [np.sqrt((x ** 2).sum())], 1e-5, 1e-5)


def test_integer_division_truncates_as_mxnet():
    """MXNet 1.9.1: broadcast_div([7, -7, 9], [2]) = [3, -3, 4] on int32; _rdiv_scalar([2, -3], 7) = [3, -2]
    (CenterNet's decoder divides flat indices this way)."""
    assert np.asarray(F.broadcast_div(np.array([7, -7, 9], np.int32), np.array([2], np.int32))).tolist() == [3, -3, 4]
    assert np.asarray(F._rdiv_scalar(np.array([2, -3], np.int32), scalar=7)).tolist() == [3, -2]
    assert_close(F.elemwise_div(np.ones(2, np.float32), np.array([2, 4], np.float32)), [0.5, 0.25])


def test_pooling_full_convention_keeps_windows_in_the_padding_as_mxnet():
    """MXNet 1.9.1: Pooling(arange(25).reshape(1,1,5,5), kernel=2, stride=2, pad=1, 'full') is 4x4; windows
    wholly in the padding give the lowest float32 (max) and 0 (avg)."""
    x = np.arange(25, dtype=np.float32).reshape(1, 1, 5, 5)
    kw = dict(kernel=(2, 2), stride=(2, 2), pad=(1, 1), pooling_convention="full")
    top = np.asarray(F.Pooling(x, pool_type="max", **kw))
    assert top.shape == (1, 1, 4, 4)
    assert_close(top[0, 0, :2], [[0, 2, 4, -3.4028235e38], [10, 12, 14, -3.4028235e38]])
    assert_close(np.asarray(F.Pooling(x, pool_type="avg", **kw))[0, 0, :2], [[0, 0.75, 1.75, 0], [3.75, 9, 11, 0]])


def nms_reference(rows, overlap, valid, topk, id_index):
    """Plain-Python NMS with MXNet's output layout (kept rows first by score, then -1)."""
    order = [i for i in np.argsort(-rows[:, 1], kind="stable") if rows[i, 1] > valid and
             (id_index < 0 or rows[i, id_index] != -1)][:topk]
    kept = []
    for i in order:
        ok = True
        for j in kept:
            if id_index >= 0 and rows[i, id_index] != rows[j, id_index]:
                continue
            a, b = rows[i, 2:6], rows[j, 2:6]
            w = max(0.0, min(a[2], b[2]) - max(a[0], b[0]))
            h = max(0.0, min(a[3], b[3]) - max(a[1], b[1]))
            inter = w * h
            union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter
            if inter > 0 and inter / union > overlap:
                ok = False
                break
        if ok:
            kept.append(i)
    out = -np.ones_like(rows)
    out[:len(kept)] = rows[kept]
    return out


@pytest.mark.parametrize("row_wise", [False, True])
def test_box_nms_matches_a_plain_python_nms(monkeypatch, row_wise):
    from hybrid.mxnet.ops import detection
    if row_wise:  # the O(topk) memory path used beyond 4096 candidates
        monkeypatch.setattr(detection, "_NMS_MATRIX_LIMIT", 1)
    rng = np.random.default_rng(3)
    rows = rng.random((2, 40, 6)).astype(np.float32)
    rows[..., 4:] += rows[..., 2:4]
    rows[..., 0] = rng.integers(-1, 3, (2, 40))
    out = F.contrib.box_nms(rows, overlap_thresh=0.3, valid_thresh=0.2, topk=25, id_index=0)
    assert out.shape == rows.shape
    for b in range(2):
        assert_close(np.asarray(out)[b], nms_reference(rows[b], 0.3, 0.2, 25, 0))


def test_roi_align_adaptive_grid_is_exact_eagerly_and_under_jit_for_rois_inside_the_map():
    data = rand(1, 2, 8, 8)
    rois = np.array([[0, 0, 0, 7, 5], [0, 2, 1, 6, 7]], np.float32)
    eager = F.contrib.ROIAlign(data, rois, pooled_size=(2, 2), spatial_scale=1.0)
    jitted = jax.jit(lambda d, r: F.contrib.ROIAlign(d, r, pooled_size=(2, 2), spatial_scale=1.0))(data, rois)
    assert_close(jitted, eager, 1e-6, 1e-6)
    # bin (0, 0) of roi 0 (x 0..7, y 0..5): bins 2.5 high and 3.5 wide, so a grid of ceil(2.5) x ceil(3.5)
    # = 3 x 4 samples at y = (i + 0.5) * 2.5 / 3 and x = (j + 0.5) * 3.5 / 4; bilinear samples averaged
    ys, xs = [(i + 0.5) * 2.5 / 3 for i in range(3)], [(j + 0.5) * 3.5 / 4 for j in range(4)]

    def sample(y, x):
        y0, x0 = int(y), int(x)
        ly, lx = y - y0, x - x0
        img = data[0, 0]
        return (img[y0, x0] * (1 - ly) * (1 - lx) + img[y0, x0 + 1] * (1 - ly) * lx +
                img[y0 + 1, x0] * ly * (1 - lx) + img[y0 + 1, x0 + 1] * ly * lx)
    assert_close(eager[0, 0, 0, 0], np.mean([sample(y, x) for y in ys for x in xs]), 1e-5, 1e-6)


# -- F under tracing, hybridize and autograd ----------------------------------------------------------------
def test_f_runs_inside_jit_with_the_same_results():
    x = rand(2, 3, 4, 4)
    w = rand(5, 3, 3, 3)

    def f(x, w):
        y = F.Convolution(x, w, kernel=(3, 3), pad=(1, 1), num_filter=5, no_bias=True)
        y = F.Pooling(F.relu(y), kernel=(2, 2), stride=(2, 2), pool_type="max")
        a, b = F.split(y, num_outputs=2, axis=2)
        return F.concat(F.elemwise_add(a, b), F._mul_scalar(a, scalar=3), dim=1)

    assert_close(jax.jit(f)(x, w), f(x, w), 1e-5, 1e-5)


class Gluon1Net(hybrid.HybridBlock):
    """Written as a Gluon 1.x block would be, with F; parameters made as in Gluon 2."""

    def __init__(self):
        super().__init__()
        self.weight = hybrid.Parameter("weight", shape=(3, 4), init=hybrid.init.Constant(0.5))

    def forward(self, x):
        h = F.FullyConnected(x, self.weight.data(), num_hidden=3, no_bias=True)
        return F.sum(F.Activation(h, act_type="tanh") * F.broadcast_mul(h, F.ones_like(h)), axis=1)


def test_f_in_a_block_hybridizes_and_gives_numpy_gradients():
    x = rand(5, 4)
    net = Gluon1Net()
    net.initialize()
    w = np.full((3, 4), 0.5, np.float32)
    h = x @ w.T
    assert_close(net(x), (np.tanh(h) * h).sum(1), 1e-5, 1e-5)
    net.hybridize()
    assert_close(net(x), (np.tanh(h) * h).sum(1), 1e-5, 1e-5)
    with autograd.record():
        loss = net(x).sum()
    loss.backward()
    dh = np.tanh(h) + h * (1 - np.tanh(h) ** 2)  # d(tanh(h) h)/dh
    assert_close(net.weight.grad(), dh.T @ x, 1e-4, 1e-5)


def test_f_npx_names_the_table_operators_as_mxnets_numpy_extension():
    """hybrid_forward code written for npx.set_np() calls F.npx.relu, F.npx.fully_connected, ..."""
    x, w = rand(2, 3), rand(4, 3)
    assert_close(F.npx.relu(x), np.maximum(x, 0), 0, 0)
    assert_close(jax.jit(lambda a: F.npx.relu(a))(x), np.maximum(x, 0), 0, 0)
    assert_close(F.npx.fully_connected(x, w, num_hidden=4, no_bias=True), x @ w.T, 1e-5, 1e-6)
    assert "batch_norm" in dir(F.npx)
    with pytest.raises(AttributeError, match="F.npx.conv9d"):
        F.npx.conv9d


def test_gradients_through_indexing_and_resizing_match_numpy():
    x = rand(3, 4)
    index = np.array([1, 3, 0], np.float32)
    grad = jax.grad(lambda x: F.sum(F.pick(x, index, axis=1) ** 2)[0])(jnp.asarray(x))
    expected = np.zeros_like(x)
    expected[np.arange(3), index.astype(int)] = 2 * x[np.arange(3), index.astype(int)]
    assert_close(grad, expected)
    img = rand(1, 1, 3, 3)
    # align_corners=True resizing 3 -> 5 is linear interpolation at half steps; its gradient is the adjoint
    m = np.array([[1, 0, 0], [.5, .5, 0], [0, 1, 0], [0, .5, .5], [0, 0, 1]], np.float32)
    up = F.contrib.BilinearResize2D(img, height=5, width=5)
    assert_close(up[0, 0], m @ img[0, 0] @ m.T, 1e-6, 1e-6)
    head = rand(1, 1, 5, 5)
    g = jax.grad(lambda v: jnp.sum(F.contrib.BilinearResize2D(v, height=5, width=5) * head))(jnp.asarray(img))
    assert_close(g[0, 0], m.T @ head[0, 0] @ m, 1e-5, 1e-6)


def test_batch_norm_training_through_f_leaves_running_statistics_and_writes_them_through_set_state():
    x = rand(4, 2, 3)
    gamma, beta, mean, var = np.ones(2, np.float32), np.zeros(2, np.float32), np.zeros(2, np.float32), \
        np.ones(2, np.float32)
    with autograd.train_mode():
        out = F.BatchNorm(x, gamma, beta, mean, var, eps=1e-5)
    mu, sigma2 = x.mean((0, 2)), x.var((0, 2))
    assert_close(out, (x - mu[None, :, None]) / np.sqrt(sigma2[None, :, None] + 1e-5), 1e-4, 1e-5)
    written = {}
    call_op("BatchNorm", [x, gamma, beta, mean, var], {"eps": "1e-5", "momentum": "0.9"},
            OpContext(True, written.__setitem__))
    assert_close(written[3], 0.1 * mu, 1e-5, 1e-6)
    assert_close(written[4], 0.9 + 0.1 * sigma2, 1e-5, 1e-6)


def test_image_transforms_as_mxnet():
    """MXNet 1.9.1: image.normalize(image.to_tensor(arange(24, uint8).reshape(2, 4, 3)), mean=(.5, .4, .3),
    std=.2) starts [-2.5, -2.4411764]."""
    t = F.image.to_tensor(np.arange(24, dtype=np.uint8).reshape(2, 4, 3))
    assert t.shape == (3, 2, 4)
    out = F.image.normalize(t, mean=(0.5, 0.4, 0.3), std=(0.2, 0.2, 0.2))
    assert_close(out[0, 0, :2], [-2.5, -2.4411764])


def test_random_operators_draw_from_hybrids_stream():
    hybrid.random.seed(4)
    a = F.random.uniform(low=-1, high=1, shape=(3, 2))
    hybrid.random.seed(4)
    b = F.random.uniform(low=-1, high=1, shape=(3, 2))
    assert a.shape == (3, 2) and np.array_equal(np.asarray(a), np.asarray(b))
    assert float(np.abs(np.asarray(a)).max()) <= 1.0


def test_control_flow_runs_eagerly_and_under_jit_as_mxnet():
    """MXNet 1.9.1's while_loop doc example gives steps [1, 2, 4, 7, 11, 16] (then undefined rows up to
    max_iterations) and final states [6], [16]; foreach of a running sum over [[0, 1], [2, 3], [4, 5]]."""
    def loop(a, b):
        return F.contrib.while_loop(lambda i, s: i <= 5, lambda i, s: ([i + s], [i + 1, s + i]), (a, b),
                                    max_iterations=10)
    for run in (loop, jax.jit(loop)):
        (steps,), (i, s) = run(np.array([0.0], np.float32), np.array([1.0], np.float32))
        assert_close(steps.ravel(), [1, 2, 4, 7, 11, 16, 0, 0, 0, 0])
        assert_close(i, [6]) and assert_close(s, [16])
    out, state = F.contrib.foreach(lambda x, s: (x + s, x + s), np.arange(6.0).reshape(3, 2), np.zeros(2))
    assert_close(out, [[0, 1], [2, 4], [6, 9]])
    assert_close(state, [6, 9])
    pick = jax.jit(lambda p: F.contrib.cond(p, lambda: jnp.ones(2), lambda: jnp.zeros(2)))
    assert_close(pick(np.array([0])), [0, 0]) and assert_close(pick(np.array([3])), [1, 1])


def test_control_flow_bodies_holding_layers_train_eagerly_as_hybridized():
    """Under ``record()`` an eager foreach/while_loop/cond runs step by step (as MXNet's ``nd`` does), so a
    layer inside a body records its parameter reads and the gradient is the hybridized one. With W ones,
    b zeros (Dense's bias initializer) and x ones, foreach gives h_t = 3t (t = 1..4), v = sum_t h_t = 30 per
    element (sum 180); the while_loop takes rows v, 2v, 4v (sums 180, 360, 720 < 1000; a fourth row of
    zeros) and ends at 8v; cond takes 2 * 8v. So y = out.sum() + 7 v.sum() + 16 v.sum() = 24 out.sum(), differentiated by jax.grad."""
    import hybrid.mxnet as mx
    from hybrid.mxnet import autograd, gluon, nd

    class Net(gluon.HybridBlock):
        def __init__(self):
            super().__init__()
            self.d = gluon.nn.Dense(3, in_units=3)

        def hybrid_forward(self, F, x):
            def body(xt, states):
                h = self.d(xt) + states[0]
                return h, [h]
            out, _ = F.contrib.foreach(body, x, [F.zeros((2, 3))])
            (steps,), (last,) = F.contrib.while_loop(lambda v: v.sum() < 1000, lambda v: ([v], [v * 2]),
                                                  [out.sum(axis=0)], max_iterations=4)
            picked = F.contrib.cond(last.sum() > 0, lambda: last * 2, lambda: last * 3)
            return out.sum() + steps.sum() + picked.sum(), steps

    def reference(w, b, x):
        h, total = jnp.zeros((2, 3)), 0.0
        for t in range(x.shape[0]):
            h = x[t] @ w.T + b + h
            total = total + h.sum()
        return 24 * total

    x = np.ones((4, 2, 3), np.float32)
    expected = jax.grad(reference, argnums=(0, 1))(jnp.ones((3, 3)), jnp.zeros(3), jnp.asarray(x))
    for hybridize in (False, True):
        net = Net()
        net.initialize(mx.init.One())
        if hybridize:
            net.hybridize()
        with autograd.record():
            y, steps = net(nd.array(x))
        y.backward()
        assert_close(steps.asnumpy()[:, 0, 0], [30, 60, 120, 0])
        assert_close(y.asnumpy(), 24 * 180)
        assert_close(net.d.weight.grad().asnumpy(), expected[0])
        assert_close(net.d.bias.grad().asnumpy(), expected[1])


# -- the importer ----------------------------------------------------------------------------------------------
def write(tmp_path, nodes, heads, params=None):
    sym, prm = tmp_path / "m-symbol.json", tmp_path / "m-0000.params"
    sym.write_text(json.dumps({"nodes": nodes, "heads": heads}))
    prm.write_bytes(mx_params(params or {}))
    return str(sym), str(prm)


def test_importer_reads_every_output_of_multi_output_nodes(tmp_path):
    nodes = [node("null", "data"), node("SliceChannel", "split0", [0], num_outputs=3, axis=1),
             {"op": "elemwise_sub", "name": "sub0", "inputs": [[1, 2, 0], [1, 0, 0]]},
             {"op": "topk", "name": "topk0", "inputs": [[0, 0, 0]], "attrs": {"k": "2", "ret_typ": "both"}}]
    sym, prm = write(tmp_path, nodes, [[2, 0, 0], [1, 1, 0], [3, 1, 0]])
    net = SymbolBlock.imports(sym, ["data"], prm)
    x = rand(2, 6)
    diff, middle, indices = net(x)
    assert_close(diff, x[:, 4:] - x[:, :2])
    assert_close(middle, x[:, 2:4])
    assert_close(indices, np.argsort(-x, 1)[:, :2])
    net.hybridize()
    assert_close(net(x)[0], x[:, 4:] - x[:, :2])


def test_importer_refuses_references_to_outputs_a_node_does_not_have(tmp_path):
    nodes = [node("null", "data"), node("SliceChannel", "split0", [0], num_outputs=2),
             {"op": "relu", "name": "r", "inputs": [[1, 2, 0]]}]
    sym, prm = write(tmp_path, nodes, [[2, 0, 0]])
    with pytest.raises(FormatError, match=r"refers to output 2 of node 'split0' \(SliceChannel\), which has 2"):
        SymbolBlock.imports(sym, ["data"], prm)


def test_unsupported_operators_are_listed_once_with_counts(tmp_path):
    nodes = [node("null", "data"), node("Correlation", "c0", [0]), node("SVMOutput", "s0", [1]),
             node("Correlation", "c1", [2]), node("relu", "r0", [3])]
    sym, prm = write(tmp_path, nodes, [[4, 0, 0]])
    with pytest.raises(FormatError,
                       match=r"unsupported MXNet operators: Correlation \(x2\), SVMOutput \(x1\)\. ") as info:
        SymbolBlock.imports(sym, ["data"], prm)
    assert "FullyConnected" not in str(info.value)  # no list of everything supported


def test_importer_variables_that_are_inputs_rather_than_parameters(tmp_path):
    nodes = [node("null", "data"), node("null", "anchors"), node("null", "w"),
             node("broadcast_add", "add0", [0, 1]), node("FullyConnected", "fc", [3, 2], num_hidden=2, no_bias=True)]
    w = rand(2, 3)
    sym, prm = write(tmp_path, nodes, [[4, 0, 0]], {"arg:w": w})
    x, anchors = rand(4, 3), rand(1, 3)
    net = SymbolBlock.imports(sym, ["data", "anchors"], prm)
    assert_close(net(x, anchors), (x + anchors) @ w.T)
    with pytest.raises(ValueError, match=r"parameter 'anchors' is not in the parameter file.*input_names"):
        SymbolBlock.imports(sym, ["data"], prm)


def test_binding_is_cheap():
    """F's per-call work (binding by precomputed input names, one Attrs) is a few microseconds on top of
    the jnp call it makes; the bound is loose so that a busy machine does not fail it."""
    import timeit
    x = jnp.ones((4,))
    F.elemwise_add(x, x)
    t_f = min(timeit.repeat(lambda: F.elemwise_add(x, x), number=500, repeat=5)) / 500
    t_j = min(timeit.repeat(lambda: jnp.add(x, x), number=500, repeat=5)) / 500
    assert t_f - t_j < 50e-6


def test_box_nms_converts_formats_of_a_two_dimensional_input():
    rows = np.array([[0, 0.9, 0.5, 0.5, 1, 1], [-1, 0.95, 0.25, 0.25, 0.5, 0.5]], np.float32)
    out = F.contrib.box_nms(rows, in_format="center", out_format="corner", overlap_thresh=0.9)
    assert_close(out, [[-1, 0.95, 0, 0, 0.5, 0.5], [0, 0.9, 0, 0, 1, 1]])
    out = F.contrib.box_nms(rows, in_format="corner", out_format="center", overlap_thresh=0.9)
    assert_close(out, [[-1, 0.95, 0.375, 0.375, 0.25, 0.25], [0, 0.9, 0.75, 0.75, 0.5, 0.5]])


# -- attribute variants computed by MXNet 1.9.1 (fixtures/mxnet_ops_variants/make_fixtures.py) --------------
@pytest.fixture(scope="module")
def variant_arrays():
    with np.load(os.path.join(VARIANTS, "arrays.npz")) as npz:
        return {k: npz[k] for k in npz.files}


@pytest.mark.parametrize("case", VARIANT_CASES, ids=[c["id"] for c in VARIANT_CASES])
def test_attribute_variants_match_mxnet_under_jit(case, variant_arrays):
    fn = F
    for part in case["op"].split("."):
        fn = getattr(fn, part)
    kwargs = {k: tuple(v) if isinstance(v, list) else v for k, v in case["kwargs"].items()}
    # one compiled program per case: cheaper than compiling each primitive of an eager call
    out = jax.jit(lambda *xs: fn(*xs, **kwargs))(*[variant_arrays[name] for name in case["args"]])
    outs = out if isinstance(out, list) else [out]
    assert len(outs) == len(case["outputs"])
    for got, name in zip(outs, case["outputs"]):
        expected = variant_arrays[name]
        assert np.asarray(got).shape == expected.shape
        assert_close(got, expected, 1e-4, 1e-5)
