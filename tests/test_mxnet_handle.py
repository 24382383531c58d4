"""The alias's mutable arrays against MXNet 1.9.1: views, in-place writes, dtypes, attached gradients,
``autograd.grad``/``mark_variables``, MXNet's NumPy interface and the printed forms.

The programs are ``fixtures/mxnet_handle/cases.py``; MXNet's results were saved by its ``make_fixtures.py``.
"""
import json
import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import hybrid.mxnet as mx
from hybrid import autograd as hybrid_autograd
from hybrid.mxnet import autograd, nd
from helpers import fixture_module

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", "mxnet_handle")
cases = fixture_module("mxnet_handle")

ARRAYS = np.load(os.path.join(HERE, "results.npz"))
with open(os.path.join(HERE, "results.json")) as f:
    SCALARS = json.load(f)


@pytest.mark.parametrize("case", sorted(cases.CASES))
def test_case_gives_mxnets_results(case):
    results = cases.CASES[case](mx)
    expected_names = {k.split("/", 1)[1] for k in list(ARRAYS.files) + list(SCALARS) if k.startswith(case + "/")}
    assert set(results) == expected_names
    for name, value in results.items():
        key = f"{case}/{name}"
        if key in ARRAYS.files:
            expected = ARRAYS[key]
            assert isinstance(value, np.ndarray), key
            assert value.dtype == expected.dtype and value.shape == expected.shape, (key, value.dtype, value.shape)
            np.testing.assert_allclose(value, expected, rtol=1e-6, err_msg=key)
        else:
            assert value == SCALARS[key], (key, value, SCALARS[key])


def test_in_place_write_to_an_attached_array_inside_record_is_refused():
    x = nd.ones((2,))
    x.attach_grad()
    with autograd.record():
        with pytest.raises(mx.base.MXNetError, match="attached gradient inside autograd.record"):
            x[:] = 3
        with pytest.raises(mx.base.MXNetError, match="not allowed"):
            x += 1
    np.testing.assert_array_equal(x.asnumpy(), [1.0, 1.0])  # nothing was written


def test_blocks_take_handles_and_return_them_and_see_plain_arrays_inside():
    from hybrid.mxnet.gluon import nn
    seen = []

    class Probe(nn.HybridBlock):
        def forward(self, x):
            seen.append(type(x))
            return x * 2

    net = nn.HybridSequential()
    net.add(Probe(), nn.Dense(3))
    net.initialize()
    out = net(nd.ones((2, 4)))
    assert type(out) is nd.NDArray and out.shape == (2, 3)
    assert all(issubclass(t, jax.Array) for t in seen)
    net.hybridize()
    assert type(net(nd.ones((2, 4)))) is nd.NDArray
    assert isinstance(net(jnp.ones((2, 4))), jax.Array) and not isinstance(net(jnp.ones((2, 4))), nd.NDArray)
    np_out = net(mx.np.ones((2, 4)))
    assert type(np_out) is mx.np.ndarray


def test_a_scratch_step_is_one_program_and_matches_jax_grad():
    w0 = np.random.RandomState(0).normal(size=(5, 1)).astype(np.float32)
    X = np.random.RandomState(1).normal(size=(16, 5)).astype(np.float32)
    y = X @ np.arange(1, 6, dtype=np.float32)[:, None]
    w, b = nd.array(w0), nd.zeros(1)
    w.attach_grad()
    b.attach_grad()
    features, labels = nd.array(X), nd.array(y)

    def step():
        with autograd.record():
            loss = ((nd.dot(features, w) + b - labels) ** 2 / 2).sum()
        loss.backward()
        for param in (w, b):
            param[:] = param - 0.01 * param.grad / 16
        return loss

    def reference(params):
        wr, br = params
        return jnp.sum((X @ wr + br - y) ** 2 / 2)

    params = (jnp.asarray(w0), jnp.zeros(1))
    for _ in range(3):
        step()
        grads = jax.grad(reference)(params)
        params = tuple(p - 0.01 * g / 16 for p, g in zip(params, grads))
    np.testing.assert_allclose(w.asnumpy(), params[0], rtol=1e-5)
    flushes = hybrid_autograd.stats.flushes
    step()
    from hybrid._core.lazy import LazyArray
    assert type(w._source.param.own_data) is LazyArray  # the in-place update is staged with the step
    float(w.asnumpy()[0, 0])
    assert hybrid_autograd.stats.flushes - flushes == 1  # forward, backward and the in-place updates: one program


def _recorded_nodes(fn):
    """How many nodes ``fn()`` adds to the open recording."""
    from hybrid._core import context
    tape = context.current().tape
    before = len(tape.recording.nodes)
    fn()
    return len(tape.recording.nodes) - before


def test_an_alias_operation_records_as_one_node_and_keeps_its_gradient():
    logits = mx.np.array(np.random.RandomState(0).normal(size=(4, 5)).astype(np.float32))
    labels = mx.np.array([0, 3, 1, 4], dtype="int32")
    logits.attach_grad()
    with autograd.record():
        assert _recorded_nodes(lambda: mx.npx.pick(mx.npx.log_softmax(logits), labels)) == 2
        loss = -mx.npx.pick(mx.npx.log_softmax(logits), labels).mean() * 2.0
    loss.backward()

    def reference(z):
        return -jnp.take_along_axis(jax.nn.log_softmax(z), jnp.asarray([[0], [3], [1], [4]]), 1).mean() * 2.0
    np.testing.assert_allclose(logits.grad.asnumpy(), jax.grad(reference)(jnp.asarray(logits.asnumpy())),
                               rtol=1e-6)


def test_staged_operations_draw_fresh_randomness_and_a_new_learning_rate_is_no_new_program():
    x = mx.np.ones((64,))
    with autograd.record():
        masks = [mx.npx.dropout(x, p=0.5).asnumpy() for _ in range(2)]
    assert (masks[0] != masks[1]).any()  # dropout is not frozen into a staged node
    draws = []
    for _ in range(2):
        with autograd.record():
            draws.append(nd.random.normal(shape=(4,)).asnumpy())
    assert (draws[0] != draws[1]).any()  # nor is a sampler

    w = mx.np.ones((3,))
    w.attach_grad()
    compiles = []
    for lr in (0.1, 0.2, 0.3):
        with autograd.record():
            loss = (w * w).sum()
        loss.backward()
        w[:] = w - lr * w.grad
        before = hybrid_autograd.stats.compiles
        w.asnumpy()
        compiles.append(hybrid_autograd.stats.compiles - before)
    assert compiles[1:] == [0, 0]
    expected = np.ones(3)
    for lr in (0.1, 0.2, 0.3):
        expected = expected - lr * 2 * expected
    np.testing.assert_allclose(w.asnumpy(), expected, rtol=1e-6)


def test_handles_pass_through_jax_transformations_as_pytrees():
    x = nd.arange(4)
    out = jax.jit(lambda h: h * 2)(x)
    assert type(out) is nd.NDArray
    np.testing.assert_array_equal(out.asnumpy(), [0, 2, 4, 6])
    assert jnp.asarray(x).shape == (4,)
    assert np.asarray(x).dtype == np.float32


def test_jax_arrays_read_like_ndarrays_and_say_what_to_write_for_gradients():
    x = jnp.ones((2,))
    np.testing.assert_array_equal(x.asnumpy(), [1.0, 1.0])
    assert jnp.ones(1).asscalar() == 1.0 and str(x.context) == "cpu(0)"
    with pytest.raises(ValueError, match="not a single value"):
        x.asscalar()
    with pytest.raises(AttributeError, match=r"nd\.array\(x\)"):
        x.attach_grad()
