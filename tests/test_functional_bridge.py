"""The functional bridge: ``state()``, ``apply()``, ``load_state()``, and calls under JAX transformations.

References are independent of hybrid's code paths: hand-written JAX math for gradients, the eager
Gluon-style call for running statistics, and per-example calls for ``vmap``.
"""
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from jax.experimental import checkify
from jax.sharding import Mesh, PartitionSpec as P

import hybrid
from hybrid import Parameter, autograd, init, nn
from hybrid.errors import ShapeError, TransformStateError


def bn_net(hybridize=False, dropout=True):
    net = nn.HybridSequential()
    net.add(nn.Dense(8), nn.BatchNorm(), nn.Dropout(0.5 if dropout else 0.0), nn.Dense(2))
    net.initialize(init.Xavier())
    net(jnp.ones((4, 3)))
    if hybridize:
        net.hybridize()
    return net


@pytest.fixture
def x():
    return jnp.asarray(np.random.default_rng(0).standard_normal((4, 3)), jnp.float32)


def snapshot(net):
    return {name: np.array(value) for name, value in net.state().items()}


def assert_same(a, b):
    assert a.keys() == b.keys()
    for name in a:
        np.testing.assert_array_equal(a[name], b[name], err_msg=name)


class ScratchBatchNorm(nn.Block):
    """d2l's from-scratch batch norm: running statistics as plain array attributes replaced in forward."""

    def __init__(self, n):
        super().__init__()
        self.gamma = Parameter("gamma", shape=(1, n), init=init.One())
        self.moving_mean = jnp.zeros((1, n))

    def forward(self, X):
        if autograd.is_training():
            mean = X.mean(axis=0, keepdims=True)
            self.moving_mean = 0.9 * self.moving_mean + 0.1 * mean
        else:
            mean = self.moving_mean
        return self.gamma.data() * (X - mean)


def test_state_lists_parameters_running_statistics_and_array_attributes_once():
    net = nn.Sequential()
    shared = nn.Dense(3, in_units=3)
    net.add(shared, ScratchBatchNorm(3))
    net.add(nn.Dense(3, in_units=3, params=shared.collect_params()))
    net.initialize()
    state = net.state()
    assert list(state) == ["0.weight", "0.bias", "1.gamma", "1.moving_mean"]  # the shared Dense once
    assert state["0.weight"] is net[0].weight.data()
    assert state["1.moving_mean"] is net[1].moving_mean
    deferred = nn.Dense(2)
    deferred.initialize()
    with pytest.raises(hybrid.errors.DeferredInitializationError):
        deferred.state()


@pytest.mark.parametrize("hybridize", [False, True])
def test_apply_matches_the_stateful_calls_and_changes_nothing(x, hybridize):
    net = bn_net(hybridize)
    state, before = net.state(), snapshot(net)
    out, new_state = net.apply(state, x)
    np.testing.assert_allclose(out, net(x), rtol=1e-6)
    assert all(new_state[k] is state[k] for k in state)  # inference writes nothing

    out, new_state = jax.jit(lambda s, x: net.apply(s, x, training=True, key=jax.random.key(3)))(state, x)
    assert_same(snapshot(net), before)
    _, reference_state = net.apply(state, x, training=True, key=jax.random.key(3))
    with autograd.train_mode():
        net(x)
    np.testing.assert_allclose(reference_state["1.running_mean"], net[1].running_mean.data(), rtol=1e-6)
    np.testing.assert_allclose(reference_state["1.running_var"], net[1].running_var.data(), rtol=1e-6)
    assert not np.allclose(new_state["1.running_mean"], before["1.running_mean"])


def test_dropout_needs_a_key_and_the_key_decides_the_mask(x):
    net = bn_net()
    state = net.state()
    with pytest.raises(ValueError, match="key"):
        net.apply(state, x, training=True)
    run = jax.jit(lambda s, x, k: net.apply(s, x, training=True, key=k)[0])
    a, b, c = run(state, x, jax.random.key(0)), run(state, x, jax.random.key(0)), run(state, x, jax.random.key(1))
    np.testing.assert_array_equal(a, b)
    assert not np.allclose(a, c)


def test_grad_of_apply_is_the_gradient_of_the_same_math(x):
    net = nn.Dense(3, in_units=3, activation="tanh")
    net.initialize(init.Xavier())
    state = net.state()

    def reference(w, b):
        return jnp.sum(jnp.tanh(x @ w.T + b) ** 2)

    grads = jax.grad(lambda s: jnp.sum(net.apply(s, x)[0] ** 2))(state)
    expected = jax.grad(reference, argnums=(0, 1))(state["weight"], state["bias"])
    np.testing.assert_allclose(grads["weight"], expected[0], rtol=1e-5)
    np.testing.assert_allclose(grads["bias"], expected[1], rtol=1e-5)


def test_vmap_scan_checkify_and_shard_map(x):
    net = bn_net(hybridize=True)
    state = net.state()
    per_example = jax.vmap(lambda xi: net.apply(state, xi[None])[0][0])(x)
    np.testing.assert_allclose(per_example, net(x), rtol=1e-5, atol=1e-6)

    def body(s, xi):
        out, s = net.apply(s, xi, training=True, key=jax.random.key(0))
        return s, out.sum()
    final, _ = jax.lax.scan(body, state, jnp.stack([x, 2 * x]))
    s1 = net.apply(state, x, training=True, key=jax.random.key(0))[1]
    s2 = net.apply(s1, 2 * x, training=True, key=jax.random.key(0))[1]
    np.testing.assert_allclose(final["1.running_var"], s2["1.running_var"], rtol=1e-5)

    error, out = checkify.checkify(lambda s, x: net.apply(s, x)[0])(state, x)
    error.throw()
    np.testing.assert_allclose(out, net(x), rtol=1e-5)

    mesh = Mesh(np.array(jax.devices()[:1]), ("batch",))
    sharded = jax.shard_map(lambda s, x: net.apply(s, x)[0], mesh=mesh, in_specs=(P(), P("batch")),
                            out_specs=P("batch"))
    np.testing.assert_allclose(sharded(state, x), net(x), rtol=1e-5)


def test_attribute_state_of_a_from_scratch_layer(x):
    net = ScratchBatchNorm(3)
    net.initialize()
    state = net.state()
    out, new_state = jax.jit(lambda s, x: net.apply(s, x, training=True))(state, x)
    np.testing.assert_allclose(new_state["moving_mean"], 0.1 * x.mean(axis=0, keepdims=True), rtol=1e-6)
    assert np.all(np.asarray(net.moving_mean) == 0)  # the block itself is unchanged
    net.load_state(new_state)
    np.testing.assert_array_equal(net.moving_mean, new_state["moving_mean"])


def test_an_attribute_first_assigned_in_forward_is_not_state(x):
    class Keeps(nn.HybridBlock):
        def forward(self, x):
            self.scores = jax.nn.softmax(x)
            return x * 2

    net = Keeps()
    out, new_state = net.apply(net.state(), x)
    assert new_state == {} and not hasattr(net, "scores")
    np.testing.assert_allclose(out, 2 * x)


def test_load_state_checks_everything_before_changing_anything(x):
    net = bn_net()
    before = snapshot(net)
    state = {k: v + 1 for k, v in net.state().items()}
    with pytest.raises(ValueError, match=r"missing \['3.bias'\]"):
        net.load_state({k: v for k, v in state.items() if k != "3.bias"})
    with pytest.raises(ValueError, match="'nope'"):
        net.load_state({**state, "nope": jnp.zeros(2)})
    with pytest.raises(ShapeError, match="'3.weight'"):
        net.load_state({**state, "3.weight": jnp.zeros((3, 3))})
    with pytest.raises(TransformStateError):
        jax.jit(lambda s: net.load_state(s))(state)
    assert_same(snapshot(net), before)
    net.load_state(state)
    np.testing.assert_allclose(net[3].bias.data(), before["3.bias"] + 1)


@pytest.mark.parametrize("hybridize", [False, True])
def test_stateful_calls_under_a_transformation_raise_and_leave_the_block_usable(x, hybridize):
    for dropout, message in ((True, "random key|running_mean"), (False, "running_mean")):
        net = bn_net(hybridize, dropout)
        before = snapshot(net)
        with autograd.train_mode(), pytest.raises(TransformStateError, match=message) as raised:
            jax.jit(lambda x: net(x).sum())(x)
        assert "net.apply(" in str(raised.value)
        assert_same(snapshot(net), before)
        np.testing.assert_allclose(net(x), net.apply(net.state(), x)[0], rtol=1e-6)
        with autograd.train_mode():
            assert np.all(np.isfinite(np.asarray(net(x))))


def test_deferred_initialisation_and_attributes_under_a_transformation_raise(x):
    net = nn.Dense(2)
    net.initialize()
    with pytest.raises(TransformStateError, match="deferred"):
        jax.jit(net)(x)
    assert net.weight._data is None
    net(x)  # still usable: initialised by an ordinary call

    scratch = ScratchBatchNorm(3)
    scratch.initialize()
    with autograd.train_mode(), pytest.raises(TransformStateError, match="moving_mean"):
        jax.jit(scratch)(x)
    assert np.all(np.asarray(scratch.moving_mean) == 0)


@pytest.mark.parametrize("hybridize", [False, True])
def test_pure_calls_under_a_transformation_work(x, hybridize):
    net = nn.HybridSequential()
    net.add(nn.Dense(4, in_units=3, activation="tanh"), nn.Dense(1, in_units=4))
    net.initialize(init.Xavier())
    if hybridize:
        net.hybridize()
    w1, b1, w2, b2 = (net.state()[k] for k in ("0.weight", "0.bias", "1.weight", "1.bias"))
    saliency = jax.grad(lambda x: net(x).sum())(x)
    expected = jax.grad(lambda x: jnp.sum(jnp.tanh(x @ w1.T + b1) @ w2.T + b2))(x)
    np.testing.assert_allclose(saliency, expected, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(jax.jit(net)(x), net(x), rtol=1e-6)


def test_gluon_apply_of_a_function_still_visits_every_block():
    net = nn.HybridSequential()
    net.add(nn.Dense(2), nn.Dense(2))
    seen = []
    assert net.apply(lambda b: seen.append(type(b).__name__)) is net
    assert seen == ["Dense", "Dense", "HybridSequential"]
    with pytest.raises(TypeError, match="state"):
        net.apply(print, jnp.ones(2))


def test_optax_loop_over_apply_matches_the_gluon_loop():
    rng = np.random.default_rng(1)
    data = rng.standard_normal((5, 16, 6)).astype(np.float32)
    labels = rng.integers(0, 3, (5, 16))

    def make():
        net = nn.HybridSequential()
        net.add(nn.Dense(8, in_units=6, activation="relu"), nn.BatchNorm(in_channels=8), nn.Dense(3, in_units=8))
        net.initialize(init.Xavier())
        return net

    hybrid.random.seed(0)
    gluon_net = make()
    hybrid.random.seed(0)
    jax_net = make()
    loss_fn = hybrid.loss.SoftmaxCrossEntropyLoss()
    trainer = hybrid.Trainer(gluon_net.collect_params(), "sgd", {"learning_rate": 0.1})
    for xb, yb in zip(data, labels):
        with autograd.record():
            loss = loss_fn(gluon_net(xb), yb)
        autograd.backward(loss)
        trainer.step(16)

    optimizer = optax.sgd(0.1)
    state = jax_net.state()
    trainable = {k: v for k, v in state.items() if "running" not in k}
    opt_state = optimizer.init(trainable)

    @jax.jit
    def step(state, opt_state, xb, yb):
        def loss_of(trainable):
            out, new_state = jax_net.apply({**state, **trainable}, xb, training=True)
            logp = jax.nn.log_softmax(out)
            return -jnp.mean(jnp.take_along_axis(logp, yb[:, None], axis=1)), new_state
        (_, new_state), grads = jax.value_and_grad(loss_of, has_aux=True)(
            {k: v for k, v in state.items() if "running" not in k})
        updates, opt_state = optimizer.update(grads, opt_state)
        trainable = optax.apply_updates({k: new_state[k] for k in grads}, updates)
        return {**new_state, **trainable}, opt_state

    for xb, yb in zip(data, labels):
        state, opt_state = step(state, opt_state, xb, yb)
    jax_net.load_state(state)
    for name, value in gluon_net.state().items():
        np.testing.assert_allclose(jax_net.state()[name], value, rtol=2e-5, atol=2e-6, err_msg=name)


def test_a_jitted_closure_over_a_block_warns_that_its_parameters_are_constants(x):
    net = nn.Dense(2, in_units=3)
    net.initialize()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        jax.grad(lambda x: net(x).sum())(x)           # traced afresh at every call: nothing to warn about
        jax.vmap(lambda row: net(row[None])[0])(x)
        assert not caught
        closure = jax.jit(lambda x: net(x))
        before = closure(x)
        jax.jit(lambda x: net(x) * 2)(x)
        assert len(caught) == 1 and "as constants" in str(caught[0].message) and "apply" in str(caught[0].message)
    net.weight.set_data(net.weight.data() + 1)         # what the warning is about: the closure kept the old weights
    np.testing.assert_array_equal(closure(x), before)
    pure = jax.jit(lambda state, x: net.apply(state, x)[0])
    np.testing.assert_allclose(pure(net.state(), x), net(x), rtol=1e-6)
