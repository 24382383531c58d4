import jax.numpy as jnp
import numpy as np
import pytest

import hybrid
from hybrid import autograd, init, loss, nn
from hybrid.errors import AutogradError

from conftest import assert_close


def linear_net(hybridize=False, in_units=3, units=2):
    net = nn.Dense(units, in_units=in_units)
    net.initialize(init.Normal(1.0))
    if hybridize:
        net.hybridize()
    return net


def test_mode_flags():
    assert not autograd.is_recording() and not autograd.is_training()
    with autograd.record():
        assert autograd.is_recording() and autograd.is_training()
        with autograd.pause():
            assert not autograd.is_recording() and not autograd.is_training()
        with autograd.predict_mode():
            assert autograd.is_recording() and not autograd.is_training()
    with autograd.record(train_mode=False):
        assert autograd.is_recording() and not autograd.is_training()
    with autograd.train_mode():
        assert autograd.is_training() and not autograd.is_recording()
    assert not autograd.is_recording() and not autograd.is_training()


@pytest.mark.parametrize("hybridize", [False, True])
def test_backward_matches_hand_derived_gradient(hybridize, rng):
    net = linear_net(hybridize)
    l2 = loss.L2Loss()
    x = rng.standard_normal((4, 3)).astype(np.float32)
    y = rng.standard_normal((4, 2)).astype(np.float32)
    w, b = np.asarray(net.weight.data()), np.asarray(net.bias.data())
    with autograd.record():
        out = l2(net(x), y)
    autograd.backward(out)
    # loss_i = 0.5 * mean_j (pred_ij - y_ij)^2; d/dpred = (pred - y) / 2 per sample
    pred = x @ w.T + b
    dpred = (pred - y) / 2
    assert_close(out, 0.5 * ((pred - y) ** 2).mean(axis=1))
    assert_close(net.weight.grad(), dpred.T @ x, rtol=1e-5)
    assert_close(net.bias.grad(), dpred.sum(axis=0), rtol=1e-5)


@pytest.mark.parametrize("hybridize", [False, True])
def test_grad_req_add_accumulates_and_null_skips(hybridize, rng):
    net = linear_net(hybridize)
    net.weight.grad_req = "add"
    net.bias.grad_req = "null"
    x = rng.standard_normal((4, 3)).astype(np.float32)
    for _ in range(3):
        with autograd.record():
            out = net(x)
        autograd.backward(out)
    assert_close(net.weight.grad(), 3 * np.ones((2, 4)) @ x, rtol=1e-5)
    with pytest.raises(RuntimeError, match="grad_req='null'"):
        net.bias.grad()
    net.weight.zero_grad()
    with autograd.record():
        out = net(x)
    autograd.backward(out)
    assert_close(net.weight.grad(), np.ones((2, 4)) @ x, rtol=1e-5)


@pytest.mark.parametrize("first,second", [(False, False), (True, False), (False, True), (True, True)])
def test_gradients_chain_through_several_blocks(first, second, rng):
    a, b = linear_net(first, 3, 5), linear_net(second, 5, 2)
    x = rng.standard_normal((4, 3)).astype(np.float32)
    head = rng.standard_normal((4, 2)).astype(np.float32)
    with autograd.record():
        out = b(a(x))
    autograd.backward(out, head_grads=head)
    wa, ba, wb = (np.asarray(p.data()) for p in (a.weight, a.bias, b.weight))
    hidden = x @ wa.T + ba
    assert_close(b.weight.grad(), head.T @ hidden, rtol=1e-4)
    assert_close(a.weight.grad(), (head @ wb).T @ x, rtol=1e-4)
    assert_close(a.bias.grad(), (head @ wb).sum(axis=0), rtol=1e-4)


def test_shared_parameter_gets_summed_gradient(rng):
    net = linear_net(in_units=2, units=2)
    x = rng.standard_normal((3, 2)).astype(np.float32)
    with autograd.record():
        out = net(net(x))
    autograd.backward(out)
    w = np.asarray(net.weight.data())
    h = x @ w.T + np.asarray(net.bias.data())
    ones = np.ones((3, 2))
    expected = ones.T @ h + (ones @ w).T @ x
    assert_close(net.weight.grad(), expected, rtol=1e-4)


def test_head_computed_outside_blocks_is_recorded(rng):
    net = linear_net()
    x = rng.standard_normal((4, 3)).astype(np.float32)
    with autograd.record():
        out = net(x).mean()
    autograd.backward(out)
    # d mean(x W^T + b) / dW = mean over the batch of x, for each of the 2 outputs, divided by 2
    assert_close(net.weight.grad(), np.tile(x.mean(0), (2, 1)) / 2, rtol=1e-5)
    assert_close(net.bias.grad(), np.full(2, 0.5), rtol=1e-6)


def test_operation_between_blocks_is_recorded(rng):
    net, head_net = linear_net(), linear_net(in_units=2)
    x = rng.standard_normal((4, 3)).astype(np.float32)
    with autograd.record():
        out = head_net(jnp.tanh(net(x)))
    autograd.backward(out)
    w1, b1 = np.asarray(net.weight.data()), np.asarray(net.bias.data())
    w2 = np.asarray(head_net.weight.data())
    h = x @ w1.T + b1
    upstream = (np.ones((4, 2)) @ w2) * (1 - np.tanh(h) ** 2)
    assert_close(net.weight.grad(), upstream.T @ x, rtol=1e-5)


def test_backward_without_record_is_an_error(rng):
    net = linear_net()
    out = net(rng.standard_normal((4, 3)).astype(np.float32))
    with pytest.raises(AutogradError, match="not computed inside"):
        autograd.backward(out)


def test_heads_independent_of_recorded_parameters_is_an_error(rng):
    net = linear_net()
    x = rng.standard_normal((4, 3)).astype(np.float32)
    with autograd.record():
        net(x)
        out = jnp.asarray(x) * 2
    with pytest.raises(AutogradError, match="do not depend on any"):
        autograd.backward(out)


def test_paused_calls_are_not_recorded(rng):
    net = linear_net()
    x = rng.standard_normal((4, 3)).astype(np.float32)
    with autograd.record():
        out = net(x)
        with autograd.pause():
            net(x)  # not on the tape, so it cannot be an unreached node
    autograd.backward(out)
    assert_close(net.weight.grad(), np.ones((2, 4)) @ x, rtol=1e-5)


def test_retain_graph(rng):
    net = linear_net(hybridize=True)
    x = rng.standard_normal((4, 3)).astype(np.float32)
    with autograd.record():
        out = net(x)
    autograd.backward(out, retain_graph=True)
    autograd.backward(out)
    with pytest.raises(AutogradError):
        autograd.backward(out)


@pytest.mark.parametrize("hybridize", [False, True])
def test_value_and_grad_allows_free_jax_code(hybridize, rng):
    net = linear_net(hybridize)
    x = rng.standard_normal((4, 3)).astype(np.float32)
    fn = autograd.value_and_grad(lambda x: jnp.sum(jnp.tanh(net(x)) ** 2) / 4, net.collect_params())
    value, grads = fn(x)
    w, b = np.asarray(net.weight.data()), np.asarray(net.bias.data())
    t = np.tanh(x @ w.T + b)
    dpre = 2 * t * (1 - t ** 2) / 4
    assert_close(value, (t ** 2).sum() / 4, rtol=1e-5)
    assert_close(grads["weight"], dpre.T @ x, rtol=1e-4)
    assert_close(net.bias.grad(), dpre.sum(axis=0), rtol=1e-4)


def test_value_and_grad_updates_batchnorm_state(rng):
    net = nn.HybridSequential()
    net.add(nn.Dense(4), nn.BatchNorm())
    net.initialize()
    x = rng.standard_normal((8, 3)).astype(np.float32)
    fn = autograd.value_and_grad(lambda x: net(x).sum(), net.collect_params())
    fn(x)  # deferred shapes are inferred on the first call
    assert not np.allclose(np.asarray(net[1].running_mean.data()), 0.0)
    with pytest.raises(AutogradError, match="must return a scalar"):
        autograd.value_and_grad(lambda x: net(x), net.collect_params())(x)


def test_backward_method_takes_mxnets_arguments(rng):
    net = linear_net()
    x = rng.standard_normal((4, 3)).astype(np.float32)
    head = rng.standard_normal((4, 2)).astype(np.float32)
    with autograd.record():
        out = net(x)
    out.backward(head, retain_graph=True, train_mode=True)
    assert_close(net.weight.grad(), head.T @ x, rtol=1e-5)
    out.backward(out_grad=2 * head)
    assert_close(net.weight.grad(), 2 * head.T @ x, rtol=1e-5)
    with pytest.raises(AutogradError, match="already differentiated"):
        out.backward()


def test_two_backward_calls_in_a_compiled_step(rng):
    """d/dW sum(x W^T + b) is the column sums of x in every row; 'add' sums the two backward calls (1 + 2)."""
    net = linear_net(in_units=4, units=3)
    net.weight.grad_req = "add"
    x = rng.standard_normal((5, 4)).astype(np.float32)

    @hybrid.compile
    def twice(x):
        with autograd.record():
            net(x).sum().backward()
            (net(x) * 2).sum().backward()
        return net.weight.grad()

    net.zero_grad()
    assert_close(twice(x), 3 * np.tile(x.sum(axis=0), (3, 1)), rtol=1e-5)
