"""The graph layer on plain JAX functions, without blocks."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from hybrid import graph
from hybrid.graph import Graph, GraphError, Node, Value, layer_ops

from conftest import assert_close


def model(x, w, b, gamma, beta):
    h = layer_ops.dense(x, w, b)
    h = layer_ops.activation(h, act_type="relu")
    unused = jnp.cos(x).sum()  # noqa: F841  (dead code)
    h = layer_ops.layer_norm(h, gamma, beta, axis=-1)
    return jnp.sum(jnp.sin(h) * 2.0, axis=1)


def args(rng):
    return (rng.standard_normal((4, 3)).astype(np.float32), rng.standard_normal((5, 3)).astype(np.float32),
            rng.standard_normal(5).astype(np.float32), np.ones(5, np.float32), np.zeros(5, np.float32))


def test_big_ops_are_single_nodes_and_user_code_is_primitive(rng):
    g = graph.trace(model, *args(rng), input_names=["x", "w", "b", "gamma", "beta"])
    ops = [n.display_name() for n in g.nodes]
    assert ops[:2] == ["dense", "activation"] and "layer_norm" in ops
    assert {"cos", "sin", "mul", "reduce_sum"} <= set(ops)
    dense = g.nodes[0]
    assert dense.kind == "op" and dense.attrs["flatten"] is True
    assert [v.name for v in dense.inputs] == ["x", "w", "b"]
    assert dense.outputs[0].shape == (4, 5) and str(dense.outputs[0].dtype) == "float32"


def test_dce_removes_dead_nodes_and_lowering_matches(rng):
    a = args(rng)
    g = graph.trace(model, *a)
    optimised, stats = graph.run_passes(g, ["dce"])
    assert stats[0].details["nodes_removed"] == 2  # cos and its reduce_sum
    assert "cos" not in optimised.op_counts()
    run = graph.lower(optimised)
    assert_close(run(*a)[0], model(*a), rtol=1e-5)
    grads = jax.grad(lambda *p: run(*p)[0].sum(), argnums=(1, 2))(*a)
    expected = jax.grad(lambda *p: model(*p).sum(), argnums=(1, 2))(*a)
    for got, want in zip(grads, expected):
        assert_close(got, want, rtol=1e-5)
    assert_close(jax.jit(run)(*a)[0], model(*a), rtol=1e-5)


def test_control_flow_and_custom_derivatives_survive(rng):
    def fn(x):
        y = jax.lax.cond(x.sum() > 0, lambda v: v * 2.0, lambda v: v - 1.0, x)
        y = jax.lax.fori_loop(0, 3, lambda i, v: v * 0.5 + i, y)
        return jax.nn.relu(y) + jax.nn.gelu(y)

    x = rng.standard_normal((3, 2)).astype(np.float32)
    g = graph.trace(fn, x)
    names = {n.op for n in g.nodes}
    assert {"cond", "scan", "custom_jvp_call"} <= names
    run = graph.lower(g)
    assert_close(run(x)[0], fn(x), rtol=1e-6)
    assert_close(jax.grad(lambda v: run(v)[0].sum())(x), jax.grad(lambda v: fn(v).sum())(x), rtol=1e-5)


def test_effects_are_kept_by_dce(rng):
    def fn(x):
        jax.debug.callback(lambda v: None, x)
        return x + 1

    g, _ = graph.run_passes(graph.trace(fn, np.ones(2, np.float32)), ["dce"])
    assert any(n.effects for n in g.nodes)


def test_text_and_dot_printing(rng):
    g = graph.trace(model, *args(rng), input_names=["x", "w", "b", "gamma", "beta"])
    text = g.to_text()
    assert text.startswith("graph(%x: f32[4,3], %w: f32[5,3]")
    assert "= dense(%x, %w, %b) {flatten=True}" in text
    assert "activation(%0) {act_type='relu'}" in text
    dot = g.to_dot()
    assert dot.startswith('digraph "hybrid" {') and '[label="dense"' in dot and "f32[4,5]" in dot


def test_verify_catches_broken_graphs():
    x = Value((2,), np.float32, "x")
    dangling = Value((2,), np.float32, "y")
    node = Node("add", "prim", [x, dangling], [((2,), np.float32)], impl=jax.lax.add_p)
    with pytest.raises(GraphError, match="reads .* before it is defined"):
        Graph([x], node.outputs, [node]).verify()
    ok = Node("add", "prim", [x, x], [((2,), np.float32)], impl=jax.lax.add_p)
    with pytest.raises(GraphError, match="never defined"):
        Graph([x], [dangling], [ok]).verify()
    with pytest.raises(GraphError, match="redefines"):
        Graph([x], ok.outputs, [ok, ok]).verify()
    Graph([x], ok.outputs, [ok]).verify()


def test_unknown_pass_is_rejected():
    with pytest.raises(ValueError, match=r"unknown pass\(es\) \['fold_everything'\]"):
        graph.resolve_passes(["dce", "fold_everything"])


def test_pieces_of_differentiated_big_ops_are_not_mistaken_for_the_op(rng):
    from hybrid.graph.memory import training_graph
    x = rng.standard_normal((4, 3)).astype(np.float32)
    w = rng.standard_normal((2, 3)).astype(np.float32)
    g = training_graph(lambda w, x: jnp.sum(layer_ops.activation(layer_ops.dense(x, w), act_type="relu") ** 2), w, x)
    values = [np.ones(v.shape, v.dtype) for v in g.inputs]
    loss, grad_w = graph.lower(g)(*values)[:2]
    expected_loss, expected_grad = jax.value_and_grad(
        lambda w: jnp.sum(jax.nn.relu(np.ones((4, 3), np.float32) @ w.T) ** 2))(np.ones((2, 3), np.float32))
    assert_close(loss, expected_loss)
    assert_close(grad_w, expected_grad)
