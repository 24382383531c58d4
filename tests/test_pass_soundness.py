"""Differential harness: with all passes on, outputs and gradients equal the un-optimised graph, for
every model of the corpus (train and predict mode) and for randomly generated programs."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import hybrid
from hybrid import autograd, graph
from hybrid.graph import layer_ops as L

from conftest import assert_close
from corpus import CORPUS
from helpers import check_equivalent, clone_params


def outputs_and_grads(net, inputs, training):
    with autograd.record(train_mode=training):
        out = net(*inputs)
    head = np.random.default_rng(7).standard_normal(out.shape).astype(np.float32)
    autograd.backward(out, head_grads=head)
    return np.asarray(out), {n: np.asarray(p.grad()) for n, p in net.collect_params().items() if p.grad_req != "null"}


@pytest.mark.parametrize("training", [False, True], ids=["predict", "train"])
@pytest.mark.parametrize("name", sorted(CORPUS))
def test_corpus_models_with_all_passes_equal_unoptimised(name, training):
    reference, inputs = CORPUS[name]()
    optimised, _ = CORPUS[name]()
    for net in (reference, optimised):
        net.initialize(hybrid.init.Xavier())
        with autograd.pause():
            net(*inputs)
    clone_params(reference, optimised)
    reference.hybridize(passes=[])
    optimised.hybridize()
    hybrid.random.seed(11)
    out_ref, grads_ref = outputs_and_grads(reference, inputs, training)
    hybrid.random.seed(11)
    out_opt, grads_opt = outputs_and_grads(optimised, inputs, training)
    assert_close(out_opt, out_ref, rtol=1e-4, atol=1e-5)
    for key in grads_ref:
        assert_close(grads_opt[key], grads_ref[key], rtol=1e-4, atol=1e-5)
    entry = next(iter(optimised._cached_op.entries.values()))
    assert [s.name for s in entry.pass_stats] == list(graph.default_passes())


# -- random programs -------------------------------------------------------------------------
UNARY = [jnp.tanh, jnp.sin, jax.nn.relu, jax.nn.sigmoid, jnp.negative, lambda v: jnp.exp(jnp.tanh(v))]
N_OPS = 14


class Program:
    """Interprets a list of (op, a, b) integer triples as a JAX function of (x, labels, params)."""

    def __init__(self, steps, seed):
        self.steps = steps
        rng = np.random.default_rng(seed)
        self.params = [rng.standard_normal((6, 6)).astype(np.float32) * 0.5 for _ in range(6)]
        self.params += [rng.uniform(0.5, 1.5, 6).astype(np.float32) for _ in range(2)]

    def __call__(self, x, labels, *params):
        values = [x]
        pick = lambda i: values[i % len(values)]  # noqa: E731
        for op, a, b in self.steps:
            v = pick(a)
            if op == 0:
                out = UNARY[b % len(UNARY)](v)
            elif op == 1:
                out = v * pick(b) if b % 2 else v + pick(b)
            elif op == 2:
                out = v * np.float32(1.0) + np.float32(0.0) if b % 2 else v - np.float32(b % 3) * v
            elif op == 3:
                out = L.dense(v, params[b % 6])
            elif op == 4:  # two projections of one input: horizontal fusion
                out = L.dense(v, params[b % 6]) + jnp.tanh(L.dense(v, params[(b + 1) % 6]))
            elif op == 5:
                out = jnp.transpose(jnp.transpose(v)) if b % 2 else v.reshape(-1).reshape(v.shape)
            elif op == 6:
                out = jax.nn.softmax(v, axis=-1) if b % 2 else L.softmax(v, axis=0)
            elif op == 7:
                out = v + jnp.sum(v, axis=1, keepdims=True)
            elif op == 8:  # cross-entropy pattern, broadcast back to the value's shape
                out = v + (-L.pick(L.log_softmax(v), labels))[:, None]
            elif op == 9:  # batch norm with running statistics right after a matmul: folding
                h = L.dense(v, params[b % 6])
                out = L.batch_norm(h, params[6], params[7], params[7] - 1.0, params[6], axis=1)
            elif op == 10:  # attention over rows split into (2 tokens x 3 features)
                q = v.reshape(v.shape[0], 2, 3)
                s = jnp.einsum("bth,bsh->bts", q, q) * np.float32(0.5)
                out = jnp.einsum("bts,bsh->bth", jax.nn.softmax(s, axis=-1), q).reshape(v.shape)
            elif op == 11:  # duplicated work: common subexpressions
                out = jnp.sin(v) * 2.0 + jnp.sin(v) * 2.0
            elif op == 12:
                out = jnp.maximum(v, pick(b)) * jax.lax.stop_gradient(v)
            else:
                out = jnp.concatenate([v[:, :3], v[:, 3:] * 2.0], axis=1)
            values.append(out)
        return values[-1], values[len(values) // 2]


@settings(max_examples=30, deadline=None)
@given(st.lists(st.tuples(st.integers(0, N_OPS - 1), st.integers(0, 50), st.integers(0, 50)), min_size=1, max_size=10),
       st.integers(0, 2**16))
def test_random_programs_with_all_passes_equal_unoptimised(steps, seed):
    program = Program(steps, seed)
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((4, 6)).astype(np.float32)
    labels = rng.integers(0, 6, 4).astype(np.int32)
    args = (x, labels, *program.params)
    before = graph.trace(program, *args)
    after, _ = graph.run_passes(before, graph.DEFAULT_PASSES)
    check_equivalent(before, after, args, rtol=2e-4, atol=2e-5)
