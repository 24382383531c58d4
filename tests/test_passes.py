"""Each pass alone: it fires on its pattern with unchanged outputs and gradients, and does not fire
when its preconditions fail."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import hybrid
from hybrid import autograd, graph, nn
from hybrid.graph import layer_ops as L

from conftest import assert_close
from helpers import check_equivalent


def run_pass(fn, args, passes):
    before = graph.trace(fn, *args)
    after, stats = graph.run_passes(before, passes)
    check_equivalent(before, after, args)
    return after, stats


def ops_of(g):
    return g.op_counts()


@pytest.fixture
def x(rng):
    return rng.standard_normal((4, 6)).astype(np.float32)


def test_cse_merges_repeated_work_but_not_effects(x):
    def fn(x):
        jax.debug.callback(lambda v: None, x)
        jax.debug.callback(lambda v: None, x)
        return jnp.sin(x) * 2.0 + jnp.sin(x) * 2.0
    g, stats = run_pass(fn, (x,), ["cse", "dce"])
    assert ops_of(g)["sin"] == 1 and ops_of(g)["mul"] == 1
    assert sum(1 for n in g.nodes if n.effects) == 2
    assert stats[0].details["nodes_removed"] == 2


def test_fold_evaluates_constant_subgraphs_but_keeps_large_broadcasts(x):
    def fn(x):
        small = jnp.arange(6.0) * 2.0 + 1.0
        big = jnp.zeros((300, 300)) + 1.0
        return x * small, big.sum() + x
    g, stats = run_pass(fn, (x,), ["fold", "dce"])
    assert stats[0].details["nodes_folded"] >= 2
    assert "iota" not in ops_of(g)
    assert "broadcast_in_dim" in ops_of(g)  # the 300x300 broadcast stays symbolic


def test_simplify_identities(x):
    def fn(x):
        y = (x * 1.0 + 0.0) / 1.0 - 0.0
        y = 1.0 * (0.0 + y)
        y = -(-y)
        y = jnp.transpose(jnp.transpose(y.reshape(2, 2, 6), (1, 0, 2)), (1, 0, 2)).reshape(4, 6)
        z = jnp.transpose(jnp.transpose(x.reshape(2, 12), (1, 0)).reshape(3, 8), (1, 0))
        return y + jax.lax.stop_gradient(x), z
    g, _ = run_pass(fn, (x,), ["simplify", "dce"])
    counts = ops_of(g)
    assert "mul" not in counts and "div" not in counts and "neg" not in counts and "sub" not in counts
    assert counts.get("transpose", 0) == 2  # the z chain is not an identity: its transposes stay
    assert counts["stop_gradient"] == 1     # derivatives of the graph must not change
    assert counts["add"] == 1
    assert counts["reshape"] == 2  # only the z chain's reshapes: the y chain collapsed to x


def test_simplify_keeps_broadcasting_identities(x):
    def fn(x):
        return x[:, :1] * jnp.ones((4, 6))  # *1 with broadcasting changes the shape: not an identity
    g, _ = run_pass(fn, (x,), ["simplify"])
    assert "mul" in ops_of(g)


def test_recognize_softmax_and_log_softmax(x):
    def fn(x):
        return jax.nn.softmax(x, axis=-1), jax.nn.log_softmax(x * 2.0, axis=0)
    g, stats = run_pass(fn, (x,), ["recognize"])
    counts = ops_of(g)
    assert counts["softmax"] == 1 and counts["log_softmax"] == 1 and "exp" not in counts
    assert stats[0].details["ops_recognized"] == 2


def test_recognize_leaves_other_code_alone(x):
    def fn(x):
        e = jnp.exp(x)
        return e / e.sum(axis=1, keepdims=True)  # softmax without the max shift: a different computation
    g, stats = run_pass(fn, (x,), ["recognize"])
    assert stats[0].details["ops_recognized"] == 0 and "softmax" not in ops_of(g)


def test_softmax_cross_entropy_fusion(x, rng):
    labels = rng.integers(0, 6, 4).astype(np.int32)

    def fn(x, y):
        return -L.pick(L.log_softmax(x), y), -L.pick(jnp.log(L.softmax(x * 3.0)), y)
    g, stats = run_pass(fn, (x, labels), ["softmax_ce"])
    assert ops_of(g)["softmax_cross_entropy"] == 2 and "log_softmax" not in ops_of(g)
    assert stats[0].details["cross_entropies_fused"] == 2


def test_softmax_cross_entropy_needs_private_intermediates(x, rng):
    labels = rng.integers(0, 6, 4).astype(np.int32)

    def fn(x, y):
        log_prob = L.log_softmax(x)
        return -L.pick(log_prob, y), log_prob  # log-probabilities are also returned: keep them

    def fn_temperature(x, y):
        return -L.pick(L.log_softmax(x, temperature=2.0), y)

    for f in (fn, fn_temperature):
        g, stats = run_pass(f, (x, labels), ["softmax_ce"])
        assert "softmax_cross_entropy" not in ops_of(g)


def attention_einsum(q, k, v):
    s = jnp.einsum("btnh,bsnh->bnts", q, k) / np.sqrt(q.shape[-1]).astype(np.float32)
    return jnp.einsum("bnts,bsnh->btnh", jax.nn.softmax(s, axis=-1), v)


def attention_matmul(q, k, v):  # (B, N, T, H) layout, scale applied to q
    return jax.nn.softmax((q * 0.5) @ jnp.swapaxes(k, -1, -2), axis=-1) @ v


@pytest.mark.parametrize("fn", [attention_einsum, attention_matmul])
def test_attention_rewrite(fn, rng):
    q, k, v = (rng.standard_normal((2, 5, 3, 4)).astype(np.float32) for _ in range(3))
    g, stats = run_pass(fn, (q, k, v), ["recognize", "attention"])
    assert ops_of(g)["attention_general"] == 1 and "dot_general" not in ops_of(g)
    assert stats[1].details["attentions_rewritten"] == 1


def test_attention_rewrite_needs_the_exact_pattern(rng):
    q, k, v = (rng.standard_normal((2, 5, 3, 4)).astype(np.float32) for _ in range(3))
    mask = np.tril(np.ones((5, 5), bool))

    def masked(q, k, v):
        s = jnp.einsum("btnh,bsnh->bnts", q, k)
        s = jnp.where(mask, s, -1e9)
        return jnp.einsum("bnts,bsnh->btnh", jax.nn.softmax(s, axis=-1), v)

    def probabilities_reused(q, k, v):
        p = jax.nn.softmax(jnp.einsum("btnh,bsnh->bnts", q, k), axis=-1)
        return jnp.einsum("bnts,bsnh->btnh", p, v), p

    def softmax_over_queries(q, k, v):
        p = jax.nn.softmax(jnp.einsum("btnh,bsnh->bnts", q, k), axis=2)
        return jnp.einsum("bnts,bsnh->btnh", p, v)

    for fn in (masked, probabilities_reused, softmax_over_queries):
        g, _ = run_pass(fn, (q, k, v), ["recognize", "attention"])
        assert "attention_general" not in ops_of(g), fn.__name__


def conv_bn(training, share_output=False, in_channels=3):
    class ConvBN(hybrid.HybridBlock):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2D(4, 3, padding=1, in_channels=in_channels)
            self.bn = nn.BatchNorm(in_channels=4, gamma_initializer=hybrid.init.Normal(1.0),
                                   running_mean_initializer=hybrid.init.Normal(1.0),
                                   running_variance_initializer=hybrid.init.Constant(0.5))

        def forward(self, x):
            h = self.conv(x)
            y = self.bn(h)
            return y + h if share_output else y

    block = ConvBN()
    block.initialize()
    return block


def graph_args(block, inspection, *data):
    params = {n: p.data() for n, p in block.collect_params().items()}
    return [params[v.name] if v.name in params else data[int(v.name[4:] or 0)] for v in inspection.before.inputs]


def test_bn_fold_folds_inference_batchnorm_into_conv_and_dense(rng):
    x = rng.standard_normal((2, 3, 6, 6)).astype(np.float32)
    block = conv_bn(training=False)
    inspection = hybrid.inspect(block, x, passes=["bn_fold"])
    assert "batch_norm" not in ops_of(inspection.after) and ops_of(inspection.after)["batch_norm_fold"] == 1
    check_equivalent(inspection.before, inspection.after, graph_args(block, inspection, x), rtol=1e-4, atol=1e-5)
    mlp = nn.HybridSequential()
    mlp.add(nn.Dense(5, in_units=6), nn.BatchNorm(in_channels=5, running_variance_initializer="ones"))
    mlp.initialize()
    x2 = rng.standard_normal((16, 6)).astype(np.float32)
    inspection = hybrid.inspect(mlp, x2, passes=["bn_fold"])
    assert "batch_norm" not in ops_of(inspection.after)
    check_equivalent(inspection.before, inspection.after, graph_args(mlp, inspection, x2), rtol=1e-4, atol=1e-5)


def test_bn_fold_does_not_fire_without_its_preconditions(rng):
    x = rng.standard_normal((2, 3, 6, 6)).astype(np.float32)
    training = hybrid.inspect(conv_bn(False), x, passes=["bn_fold"], training=True)
    assert ops_of(training.after)["batch_norm"] == 1  # batch statistics: nothing to fold
    shared = hybrid.inspect(conv_bn(False, share_output=True), x, passes=["bn_fold"])
    assert ops_of(shared.after)["batch_norm"] == 1   # the conv output is also read by the residual add
    wrong_axis = nn.HybridSequential()
    wrong_axis.add(nn.Conv2D(4, 3, in_channels=3), nn.BatchNorm(axis=2, in_channels=4))
    wrong_axis.initialize()
    g = hybrid.inspect(wrong_axis, rng.standard_normal((2, 3, 6, 6)).astype(np.float32), passes=["bn_fold"])
    assert ops_of(g.after)["batch_norm"] == 1        # normalises a spatial axis, not channels
    mlp = nn.HybridSequential()
    mlp.add(nn.Dense(5, in_units=6), nn.BatchNorm(in_channels=5))
    mlp.initialize()
    small_batch = hybrid.inspect(mlp, rng.standard_normal((4, 6)).astype(np.float32), passes=["bn_fold"])
    assert ops_of(small_batch.after)["batch_norm"] == 1  # the 30-element weight outweighs the 20-element output


def test_horizontal_fusion_of_shared_input_matmuls(x, rng):
    ws = [rng.standard_normal((n, 6)).astype(np.float32) for n in (3, 5, 4)]
    b = rng.standard_normal(5).astype(np.float32)

    def fn(x, w0, w1, w2, b):
        return L.dense(x, w0) * 2.0, L.dense(x, w1, b), jnp.tanh(L.dense(x, w2))
    g, stats = run_pass(fn, (x, *ws, b), ["horizontal_fusion"])
    assert ops_of(g) .get("dense", 0) == 0 and ops_of(g)["dense_group"] == 1
    assert stats[0].details["nodes_fused"] == 3


def test_horizontal_fusion_respects_dependencies_and_modes(x, rng):
    w = rng.standard_normal((6, 6)).astype(np.float32)

    def dependent(x, w):
        first = L.dense(x, w)
        second_weight = w + first.sum()  # defined after the first matmul: cannot share its call
        return first, L.dense(x, second_weight), L.dense(x.reshape(4, 2, 3), w, flatten=True)
    g, stats = run_pass(dependent, (x, w), ["horizontal_fusion"])
    assert ops_of(g)["dense"] == 3 and "dense_group" not in ops_of(g)


def test_elementwise_fusion_groups_by_pattern(x, rng):
    w = rng.standard_normal((5, 6)).astype(np.float32)

    def fn(x, w):
        h = jax.nn.relu(L.dense(x, w) + 1.0)                # dense anchor + elementwise epilogue
        s = jnp.sum(jnp.exp(h) * 2.0, axis=1)               # elementwise chain + reduction root
        t = jnp.sort(h, axis=1)                              # opaque: never fused
        return s, t
    g, stats = run_pass(fn, (x, w), ["fuse"])
    fused = [n for n in g.nodes if n.kind == "fused"]
    names = sorted(n.attrs["name"] for n in fused)
    assert any(name.startswith("dense+add") for name in names)
    assert any("reduce_sum" in name and "exp" in name for name in names)
    assert "sort" in ops_of(g)
    g.verify()


def test_elementwise_fusion_never_creates_cycles(x):
    def fn(x):
        a = jnp.tanh(x)
        b = jnp.sort(a, axis=1)     # opaque node reading the chain
        return jnp.exp(a) + b       # the chain continues with the opaque node's output
    g, _ = run_pass(fn, (x,), ["fuse"])
    g.verify()


def test_pipeline_selection_timings_and_hybridize_option(rng):
    net = nn.HybridSequential()
    net.add(nn.Dense(4, in_units=6, activation="relu"), nn.Dense(2))
    net.initialize()
    x = rng.standard_normal((3, 6)).astype(np.float32)
    full = hybrid.inspect(net, x)
    assert [s.name for s in full.stats] == list(graph.default_passes())
    assert "horizontal_fusion" not in graph.default_passes("cpu") and "horizontal_fusion" in graph.default_passes("gpu")
    assert all(s.seconds >= 0 for s in full.stats)
    none = hybrid.inspect(net, x, passes=[])
    assert none.stats == [] and len(none.after) == len(none.before)
    net.hybridize(passes=["dce"])
    out_dce = np.asarray(net(x))
    entry = next(iter(net._cached_op.entries.values()))
    assert [s.name for s in entry.pass_stats] == ["dce"]
    net.hybridize()
    assert_close(net(x), out_dce)


def test_layout_runs_channels_first_stacks_channels_last(rng):
    net = nn.HybridSequential()
    for channels in (8, 16):
        net.add(nn.Conv2D(channels, 3, padding=1), nn.BatchNorm(), nn.Activation("relu"), nn.MaxPool2D(2))
    net.add(nn.Dense(10))
    net.initialize()
    x = rng.standard_normal((2, 3, 8, 8)).astype(np.float32)
    for training in (False, True):
        inspection = hybrid.inspect(net, x, passes=["layout"], training=training)
        after = inspection.after
        moved = [n for n in after.nodes if n.op == "transpose"]
        weights = [n for n in moved if (n.inputs[0].name or "").endswith(".weight")]
        assert len(moved) - len(weights) == 2  # one in, one out: the stack runs channels-last
        assert len(weights) == 2 and all(n.attrs["permutation"] == (2, 3, 1, 0) for n in weights)  # OIHW -> HWIO
        assert all(n.attrs.get("layout") == "NHWC" for n in after.nodes if n.op in ("convolution", "pooling"))
        assert all(n.attrs["weight_layout"] == "HWIO" for n in after.nodes if n.op == "convolution")
        assert all(n.attrs["axis"] == 3 for n in after.nodes if n.op == "batch_norm")
        check_equivalent(inspection.before, inspection.after, graph_args(net, inspection, x), rtol=1e-4, atol=1e-5)


def test_layout_leaves_channels_last_and_other_models_alone(rng):
    net = nn.HybridSequential()
    net.add(nn.Conv2D(4, 3, layout="NHWC"), nn.BatchNorm(axis=3), nn.Dense(2))
    net.initialize()
    inspection = hybrid.inspect(net, rng.standard_normal((2, 6, 6, 3)).astype(np.float32), passes=["layout"])
    assert "transpose" not in ops_of(inspection.after)
    assert inspection.stats[0].details["ops_converted"] == 0


@pytest.mark.parametrize("lowering", ["_attention_fused", "_attention_einsum"])
def test_attention_lowerings_match_numpy(lowering, rng):
    from hybrid.graph import layer_ops
    # q, k as (B, T, N, H), v as (B, N, S, H); output as (B, T, N, H)
    q, k = (rng.standard_normal((2, 5, 3, 4)).astype(np.float32) for _ in range(2))
    v = rng.standard_normal((2, 3, 5, 4)).astype(np.float32)
    out = getattr(layer_ops, lowering)(q, k, v, (0, 2, 1, 3), (0, 2, 1, 3), (0, 1, 2, 3), (0, 2, 1, 3), 2, 0.3)
    scores = np.einsum("btnh,bsnh->bnts", q.astype(np.float64), k) * 0.3
    weights = np.exp(scores - scores.max(-1, keepdims=True))
    weights /= weights.sum(-1, keepdims=True)
    np.testing.assert_allclose(out, np.einsum("bnts,bnsh->btnh", weights, v), rtol=1e-5, atol=1e-5)
