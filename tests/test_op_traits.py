"""The op vocabulary: fusion patterns as an ordered IntEnum, traits that passes ask instead of op names,
and the pass registry's order checks and automatic dead-code elimination."""
import inspect
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

from hybrid import graph
from hybrid.graph import layer_ops as L
from hybrid.graph import ops
from hybrid.graph.ops import OpPattern
from hybrid.graph.passes import PASSES, bn_fold, fuse, horizontal_fusion, layout, register_pass

from helpers import check_equivalent


def _channel_axis(attrs, shape):
    return attrs["layout"].index("C")


@ops.register("test_strided_conv", OpPattern.OUT_ELEMENTWISE_FUSABLE, channel_axis=_channel_axis,
              layout_attr="layout", weight_layout_attr="weight_layout", scale_foldable=True)
def _strided_conv(x, weight, bias, *, layout, weight_layout=None):
    """A 3x3, stride-2 convolution written from scratch: an op no pass has ever heard of."""
    weight_layout = weight_layout or "OI" + layout[2:]
    dn = lax.conv_dimension_numbers(x.shape, weight.shape, (layout, weight_layout, layout))
    y = lax.conv_general_dilated(x, weight, (2, 2), [(1, 1), (1, 1)], dimension_numbers=dn)
    shape = [1] * y.ndim
    shape[layout.index("C")] = -1
    return y + bias.reshape(shape)


def strided_conv(x, weight, bias, layout="NCHW"):
    return ops.call("test_strided_conv", x, weight, bias, layout=layout)


def test_patterns_are_ordered_and_combine_with_max():
    order = [OpPattern.ELEMENTWISE, OpPattern.BROADCAST, OpPattern.INJECTIVE, OpPattern.COMM_REDUCE,
             OpPattern.OUT_ELEMENTWISE_FUSABLE, OpPattern.OPAQUE]
    assert order == sorted(order)
    assert max(OpPattern.BROADCAST, OpPattern.INJECTIVE) is OpPattern.INJECTIVE
    assert ops.get("dropout").pattern is OpPattern.OPAQUE and ops.get("dropout").random
    assert ops.get("dense").pattern is OpPattern.OUT_ELEMENTWISE_FUSABLE
    with pytest.raises(TypeError, match="OpPattern"):
        ops.register("test_bad_pattern", "elementwise")


def test_a_convolution_like_op_is_handled_by_bn_fold_and_layout_through_its_traits():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 3, 16, 16)).astype(np.float32)
    w = rng.standard_normal((4, 3, 3, 3)).astype(np.float32)
    b, gamma, beta, mean = (rng.standard_normal(4).astype(np.float32) for _ in range(4))
    var = rng.uniform(0.5, 2.0, 4).astype(np.float32)
    w2 = rng.standard_normal((4, 4, 3, 3)).astype(np.float32)

    def net(x, w, b, gamma, beta, mean, var, w2):
        y = L.batch_norm(strided_conv(x, w, b), gamma, beta, mean, var, axis=1, training=False)
        y = strided_conv(jnp.maximum(y, 0.0), w2, beta)
        return L.pooling(y, pool_type="max", kernel=(2, 2), strides=(2, 2), padding=(0, 0))

    args = (x, w, b, gamma, beta, mean, var, w2)
    before = graph.trace(net, *args)
    folded, stats = graph.run_passes(before, ["bn_fold"])
    assert stats[0].details["batch_norms_folded"] == 1
    assert [n.op for n in folded.nodes if n.kind == "op"] == ["batch_norm_fold", "test_strided_conv",
                                                               "test_strided_conv", "pooling"]
    check_equivalent(before, folded, args)

    converted, stats = graph.run_passes(folded, ["layout"], graph.Target("cpu"))
    for conv in (n for n in converted.nodes if n.op == "test_strided_conv"):
        assert conv.attrs["layout"] == "NHWC" and conv.attrs["weight_layout"] == "HWIO"
    assert next(n for n in converted.nodes if n.op == "pooling").attrs["layout"] == "NHWC"
    check_equivalent(before, converted, args)
    reference = net(*args)  # the plain JAX function, no graph at all
    np.testing.assert_allclose(graph.lower(converted)(*args)[0], reference, rtol=1e-4, atol=1e-5)


def test_passes_ask_traits_not_op_names():
    big_ops = set(ops.registered()) - {"batch_norm_fold"}  # the op bn_fold itself emits
    for module in (bn_fold, fuse, horizontal_fusion, layout):
        source = inspect.getsource(module)
        named = {name for name in re.findall(r'"([a-z_]+)"', source) if name in big_ops}
        assert not named, f"{module.__name__} names ops {sorted(named)}"


def test_depthwise_layout_choice_comes_from_the_target():
    x = np.ones((1, 4, 6, 6), np.float32)
    w = np.ones((4, 1, 3, 3), np.float32)

    def depthwise(x, w):
        for _ in range(2):
            x = L.convolution(x, w, None, strides=(1, 1), padding=(1, 1), dilation=(1, 1), groups=4)
        return x

    g = graph.trace(depthwise, x, w)
    kept, _ = graph.run_passes(g, ["layout"], graph.Target("cpu", depthwise_as_shifts=True))
    moved, _ = graph.run_passes(g, ["layout"], graph.Target("gpu"))
    layouts = [next(n for n in r.nodes if n.op == "convolution").attrs["layout"] for r in (kept, moved)]
    assert layouts == ["NCHW", "NHWC"]


def test_pipeline_checks_pass_order():
    with pytest.raises(ValueError, match="'softmax_ce' must run after \\['recognize'\\]"):
        graph.resolve_passes(["softmax_ce", "recognize"])
    with pytest.raises(ValueError, match="'fuse' must be the last pass"):
        graph.resolve_passes(["fuse", "cse"])
    assert graph.resolve_passes(["recognize", "softmax_ce", "fuse", "dce"]) == ("recognize", "softmax_ce", "fuse", "dce")
    with pytest.raises(ValueError, match="one name"):
        register_pass("test_named")(lambda graph, target=None: (graph, {}))
    assert "test_named" not in PASSES


def test_dead_code_is_removed_after_a_pass_that_reports_removed_nodes():
    def softmax(x):
        e = jnp.exp(x - jax.lax.stop_gradient(x.max(axis=-1, keepdims=True)))
        return e / e.sum(axis=-1, keepdims=True)

    g = graph.trace(softmax, np.ones((2, 5), np.float32))
    after, stats = graph.run_passes(g, ["recognize"])
    assert [n.op for n in after.nodes] == ["softmax"]
    assert stats[0].details["dead_nodes_removed"] == len(g.nodes)
    np.testing.assert_allclose(graph.lower(after)(np.ones((2, 5), np.float32))[0], np.full((2, 5), 0.2), rtol=1e-6)


def test_the_target_is_printed_with_the_statistics():
    from hybrid import nn, inspect as hybrid_inspect
    net = nn.Dense(3, in_units=2)
    net.initialize()
    text = str(hybrid_inspect(net, jnp.ones((1, 2))))
    assert str(graph.Target.for_backend()) in text


def test_big_op_defines_an_op_and_its_public_function_once():
    @ops.big_op("test_scaled_sum", OpPattern.COMM_REDUCE, normalize=lambda x, *, axes, factor: {
        "axes": tuple(a % x.ndim for a in axes), "factor": float(factor)})
    def scaled_sum(x, *, axes=(-1,), factor=1):
        """``factor * x.sum(axes)``."""
        return factor * x.sum(axis=axes)

    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    np.testing.assert_allclose(scaled_sum(x, factor=2), [6.0, 24.0])
    assert scaled_sum.impl(x, axes=(0,), factor=1.0).shape == (3,)
    assert scaled_sum.__doc__ == "``factor * x.sum(axes)``."
    g = graph.trace(lambda x: scaled_sum(x, axes=[1]), x)
    (node,) = g.nodes
    assert node.op == "test_scaled_sum" and node.attrs["axes"] == (1,) and node.attrs["factor"] == 1.0
    assert ops.get("test_scaled_sum").pattern is OpPattern.COMM_REDUCE
    with pytest.raises(TypeError, match="takes 1 inputs"):
        scaled_sum(x, (0,))
    with pytest.raises(TypeError, match="unexpected keyword"):
        scaled_sum(x, axis=0)
