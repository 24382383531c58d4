"""Recording everything inside ``autograd.record()`` (hybrid/_core/lazy/).

Every expected value is computed with plain JAX (``jax.grad`` of the same math written
with the parameter values read from ``p.data()``) or NumPy, never with hybrid itself.
"""
import gc
import weakref

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import hybrid
from hybrid import Block, HybridBlock, Parameter, Trainer, autograd, init, loss, nn
from hybrid._core import lazy as _lazy
from hybrid.errors import AutogradError

from conftest import assert_close

HYBRID = pytest.mark.parametrize("hybridize", [False, True], ids=["eager", "hybridized"])
TOL = dict(rtol=1e-4, atol=1e-5)


# -- helpers ----------------------------------------------------------------------------
def make_mlp(hybridize, in_units=4, hidden=5, out=3, act="tanh"):
    net = nn.HybridSequential()
    net.add(nn.Dense(hidden, activation=act, in_units=in_units), nn.Dense(out, in_units=hidden))
    net.initialize(init.Xavier())
    if hybridize:
        net.hybridize()
    return net


def values_of(net):
    """The parameters' values as NumPy copies, in collect_params() order."""
    return [np.array(p.data()) for p in net.collect_params().values()]


def ref_mlp(vals, x):
    """Plain-JAX version of make_mlp(..., act='tanh') (Dense: x @ W.T + b)."""
    w0, b0, w1, b1 = vals
    return jnp.tanh(x @ w0.T + b0) @ w1.T + b1


def ref_softmax_ce(out, y):
    return -jnp.take_along_axis(jax.nn.log_softmax(out, axis=-1), y[:, None], axis=-1)[:, 0]


def squared_loss(y_hat, y):
    """d2l's squared loss."""
    return (y_hat - y.reshape(y_hat.shape)) ** 2 / 2


def assert_grads(net, expected, **tol):
    for (name, p), g in zip(net.collect_params().items(), expected):
        assert_close(p.grad(), g, **(tol or TOL))


@pytest.fixture
def data(rng):
    x = rng.standard_normal((6, 4)).astype(np.float32)
    labels = rng.integers(0, 3, size=(6,)).astype(np.int32)
    targets = rng.standard_normal((6, 3)).astype(np.float32)
    return x, labels, targets


# -- 1. gradients of recorded JAX code equal jax.grad ---------------------------------------
COEF = np.linspace(-1.0, 1.0, 18, dtype=np.float32).reshape(6, 3)

CASES = {
    # name: (hybrid head(net, x, labels, targets), plain-JAX scalar ref(vals, x, labels, targets))
    "softmax_ce_mean": (lambda net, x, y, t: loss.SoftmaxCELoss()(net(x), y).mean(),
                        lambda v, x, y, t: jnp.mean(ref_softmax_ce(ref_mlp(v, x), y))),
    "jnp_mean_of_l2loss": (lambda net, x, y, t: jnp.mean(loss.L2Loss()(net(x), t)),
                           lambda v, x, y, t: jnp.mean(0.5 * jnp.mean((ref_mlp(v, x) - t) ** 2, axis=1))),
    "square_sum": (lambda net, x, y, t: (net(x) ** 2).sum(),
                   lambda v, x, y, t: jnp.sum(ref_mlp(v, x) ** 2)),
    "two_calls_added": (lambda net, x, y, t: net(x) + net(x),
                        lambda v, x, y, t: jnp.sum(2 * ref_mlp(v, x))),
    "indexing": (lambda net, x, y, t: net(x)[:, 0],
                 lambda v, x, y, t: jnp.sum(ref_mlp(v, x)[:, 0])),
    "d2l_squared_loss": (lambda net, x, y, t: squared_loss(net(x), t.reshape(-1)),
                         lambda v, x, y, t: jnp.sum((ref_mlp(v, x) - t) ** 2 / 2)),
    "l2_penalty": (lambda net, x, y, t: loss.SoftmaxCELoss()(net(x), y).mean()
                   + 0.05 * sum(jnp.sum(p.data() ** 2) for p in net.collect_params().values()),
                   lambda v, x, y, t: jnp.mean(ref_softmax_ce(ref_mlp(v, x), y))
                   + 0.05 * sum(jnp.sum(a ** 2) for a in v)),
    "jax_nn_relu": (lambda net, x, y, t: jnp.sum(jax.nn.relu(net(x)) ** 2),
                    lambda v, x, y, t: jnp.sum(jnp.maximum(ref_mlp(v, x), 0) ** 2)),
    "jax_nn_softmax": (lambda net, x, y, t: jnp.sum(jax.nn.softmax(net(x), axis=-1) * COEF),
                       lambda v, x, y, t: jnp.sum(jnp.exp(ref_mlp(v, x))
                                                  / jnp.sum(jnp.exp(ref_mlp(v, x)), axis=-1, keepdims=True)
                                                  * COEF)),
    "array_methods": (lambda net, x, y, t: net(x).reshape(-1).clip(-0.5, 0.5).mean(),
                      lambda v, x, y, t: jnp.mean(jnp.clip(ref_mlp(v, x).reshape(-1), -0.5, 0.5))),
}


@HYBRID
@pytest.mark.parametrize("case", list(CASES))
def test_backward_equals_jax_grad(case, hybridize, data):
    x, y, t = data
    head_fn, ref_fn = CASES[case]
    net = make_mlp(hybridize)
    vals = values_of(net)
    with autograd.record():
        head = head_fn(net, x, y, t)
        assert isinstance(head, hybrid._core.lazy.LazyArray)
    autograd.backward(head)
    expected_value = ref_fn(vals, x, y, t)
    assert_close(jnp.sum(head), expected_value, **TOL)
    assert_grads(net, jax.grad(ref_fn)(vals, x, y, t))


@HYBRID
def test_backward_with_head_grads(hybridize, data):
    x, _, _ = data
    net = make_mlp(hybridize)
    vals = values_of(net)
    head_grad = np.arange(18, dtype=np.float32).reshape(6, 3) / 10
    with autograd.record():
        out = jnp.sin(net(x))
    autograd.backward(out, head_grads=head_grad)
    assert_grads(net, jax.grad(lambda v: jnp.sum(jnp.sin(ref_mlp(v, x)) * head_grad))(vals))


# -- 2a. d2l linear regression from scratch --------------------------------------------------
def test_linear_regression_from_scratch_converges(rng):
    true_w, true_b = np.array([2.0, -3.4], np.float32), np.float32(4.2)
    features = rng.standard_normal((200, 2)).astype(np.float32)
    labels = (features @ true_w + true_b + 0.01 * rng.standard_normal(200)).astype(np.float32).reshape(-1, 1)
    w = jnp.asarray(rng.normal(0, 0.01, (2, 1)).astype(np.float32))
    b = jnp.zeros(1, jnp.float32)
    lr, batch_size = 0.1, 10

    def ref_loss(w, b, X, y):
        return jnp.sum(squared_loss(X @ w + b, y))

    first = True
    for epoch in range(5):
        for i in range(0, 200, batch_size):
            X, y = features[i:i + batch_size], labels[i:i + batch_size]
            with autograd.record():
                l = squared_loss(X @ w + b, y)
            gw, gb = autograd.grad(l, [w, b])
            if first:
                ew, eb = jax.grad(ref_loss, argnums=(0, 1))(w, b, X, y)
                assert gw.shape == (2, 1) and gb.shape == (1,)
                assert_close(gw, ew, **TOL)
                assert_close(gb, eb, **TOL)
                first = False
            w = w - lr * gw / batch_size
            b = b - lr * gb / batch_size
        train_l = squared_loss(features @ w + b, labels)
        assert np.isfinite(float(train_l.mean()))
    assert_close(np.asarray(w).reshape(-1), true_w, rtol=0, atol=2e-2)
    assert_close(np.asarray(b), [true_b], rtol=0, atol=2e-2)
    assert float(squared_loss(features @ w + b, labels).mean()) < 1e-3


# -- 2b. d2l BatchNorm from scratch: state kept as plain attributes ---------------------------
def scratch_batch_norm(X, gamma, beta, moving_mean, moving_var, eps, momentum):
    if not autograd.is_training():
        X_hat = (X - moving_mean) / jnp.sqrt(moving_var + eps)
    else:
        mean = X.mean(axis=0)
        var = ((X - mean) ** 2).mean(axis=0)
        X_hat = (X - mean) / jnp.sqrt(var + eps)
        moving_mean = momentum * moving_mean + (1.0 - momentum) * mean
        moving_var = momentum * moving_var + (1.0 - momentum) * var
    Y = gamma * X_hat + beta
    return Y, moving_mean, moving_var


def _bn_init(self, num_features):
    shape = (1, num_features)
    self.gamma = Parameter("gamma", shape=shape, init=init.One())
    self.beta = Parameter("beta", shape=shape, init=init.Zero())
    self.moving_mean = jnp.zeros(shape)
    self.moving_var = jnp.ones(shape)


def _bn_forward(self, X):
    Y, self.moving_mean, self.moving_var = scratch_batch_norm(
        X, self.gamma.data(), self.beta.data(), self.moving_mean, self.moving_var, eps=1e-5, momentum=0.9)
    return Y


class ScratchBN(Block):
    __init__ = lambda self, n: (Block.__init__(self), _bn_init(self, n))[0]  # noqa: E731
    forward = _bn_forward


class ScratchHybridBN(HybridBlock):
    __init__ = lambda self, n: (HybridBlock.__init__(self), _bn_init(self, n))[0]  # noqa: E731
    forward = _bn_forward


@HYBRID
def test_scratch_batchnorm_attributes_hold_concrete_running_stats(hybridize, rng):
    if hybridize:
        net = nn.HybridSequential()
        bn = ScratchHybridBN(3)
    else:
        net = nn.Sequential()
        bn = ScratchBN(3)
    net.add(bn, nn.Dense(2, in_units=3))
    net.initialize(init.Xavier())
    if hybridize:
        net.hybridize()
    trainer = Trainer(net.collect_params(), "sgd", {"learning_rate": 0.1})
    l2 = loss.L2Loss()
    mm, mv = np.zeros((1, 3)), np.ones((1, 3))
    for step in range(4):
        X = (rng.standard_normal((8, 3)) * (step + 1) + step).astype(np.float32)
        target = rng.standard_normal((8, 2)).astype(np.float32)
        with autograd.record():
            l = l2(net(X), target)
        autograd.backward(l)
        trainer.step(8)
        mean, var = X.mean(axis=0, keepdims=True), X.var(axis=0, keepdims=True)
        mm, mv = 0.9 * mm + 0.1 * mean, 0.9 * mv + 0.1 * var
        assert_close(np.asarray(bn.moving_mean), mm, **TOL)
        assert_close(np.asarray(bn.moving_var), mv, **TOL)
    if hybridize:  # written back after the call as concrete arrays, not tracers
        assert not isinstance(bn.moving_mean, jax.core.Tracer)
        assert not isinstance(bn.moving_var, jax.core.Tracer)
    # the attributes are usable after the step: plain JAX, jit, and an inference forward
    assert_close(bn.moving_mean + 1, mm + 1, **TOL)
    assert_close(jax.jit(lambda a: jnp.sqrt(a))(bn.moving_var), np.sqrt(mv), **TOL)
    X = rng.standard_normal((5, 3)).astype(np.float32)
    gamma, beta = np.array(bn.gamma.data()), np.array(bn.beta.data())
    w, b = np.array(net[1].weight.data()), np.array(net[1].bias.data())
    expected = (gamma * (X - mm) / np.sqrt(mv + 1e-5) + beta) @ w.T + b
    assert_close(net(X), expected, **TOL)
    assert_close(np.asarray(bn.moving_mean), mm, **TOL)  # inference does not update them


class Attend(HybridBlock):
    """Keeps its attention weights as an attribute (written, never read, in forward)."""

    def __init__(self):
        super().__init__()
        self.proj = nn.Dense(3, in_units=4)

    def forward(self, x):
        w = jax.nn.softmax(self.proj(x), axis=-1)
        self.attention_weights = w
        return w @ jnp.ones((3, 2))


@HYBRID
def test_attribute_assigned_in_forward_is_written_back(hybridize, data):
    x, _, _ = data
    blk = Attend()
    blk.initialize(init.Xavier())
    if hybridize:
        blk.hybridize()
    w, b = np.array(blk.proj.weight.data()), np.array(blk.proj.bias.data())
    expected = np.asarray(jax.nn.softmax(x @ w.T + b, axis=-1))
    with autograd.record():
        out = blk(x)
        l = jnp.sum(out * blk.attention_weights[:, :2])
    autograd.backward(l)
    assert_close(blk.attention_weights, expected, **TOL)
    assert_close(jnp.sum(blk.attention_weights, axis=-1), np.ones(6), **TOL)
    blk(x[:2] * 2)  # outside record: a new value
    assert not isinstance(blk.attention_weights, jax.core.Tracer)
    assert_close(blk.attention_weights, jax.nn.softmax(2 * x[:2] @ w.T + b, axis=-1), **TOL)


# -- 2c. softmax regression with a Trainer ------------------------------------------------------
@HYBRID
def test_softmax_regression_with_trainer(hybridize, rng):
    centers = np.array([[2, 0], [-2, 2], [0, -2]], np.float32)
    labels = rng.integers(0, 3, size=(90,)).astype(np.int32)
    features = (centers[labels] + 0.5 * rng.standard_normal((90, 2))).astype(np.float32)
    net = nn.Dense(3, in_units=2)
    net.initialize(init.Normal(0.01))
    if hybridize:
        net.hybridize()
    ce = loss.SoftmaxCELoss()
    lr = 0.5
    trainer = Trainer(net.collect_params(), "sgd", {"learning_rate": lr})

    def ref_loss(vals, X, y):
        w, b = vals
        return jnp.mean(ref_softmax_ce(X @ w.T + b, y))

    def full_loss():
        return float(ce(net(features), labels).mean())

    start = full_loss()
    for epoch in range(3):
        for i in range(0, 90, 15):
            X, y = features[i:i + 15], labels[i:i + 15]
            vals = values_of(net)
            with autograd.record():
                l = ce(net(X), y).mean()
            autograd.backward(l)
            trainer.step(1)
            if epoch == 0 and i == 0:
                expected = jax.grad(ref_loss)(vals, X, y)
                assert_grads(net, expected)
                assert_close(net.weight.data(), vals[0] - lr * expected[0], **TOL)
                assert_close(net.bias.data(), vals[1] - lr * expected[1], **TOL)
                assert_close(l, ref_loss(vals, X, y), **TOL)
    end = full_loss()
    assert end < 0.5 * start
    accuracy = float(jnp.mean(jnp.argmax(net(features), axis=1) == labels))
    assert accuracy > 0.9


# -- 3. gradient penalty (create_graph) -----------------------------------------------------------
@HYBRID
def test_gradient_penalty_equals_nested_jax_grad(hybridize, data):
    x, y, _ = data
    x = jnp.asarray(x)
    net = make_mlp(hybridize)
    vals = values_of(net)
    ce = loss.SoftmaxCELoss()
    with autograd.record():
        out = net(x)
        gx = autograd.grad(out.sum(), x, create_graph=True)
        total = ce(out, y).mean() + jnp.sum(gx ** 2)
    autograd.backward(total)

    def ref(v):
        base = jnp.mean(ref_softmax_ce(ref_mlp(v, x), y))
        gx = jax.grad(lambda xx: jnp.sum(ref_mlp(v, xx)))(x)
        return base + jnp.sum(gx ** 2)

    assert_close(gx, jax.grad(lambda xx: jnp.sum(ref_mlp(vals, xx)))(x), **TOL)
    assert_close(total, ref(vals), **TOL)
    assert_grads(net, jax.grad(ref)(vals))


# -- 4. printing, float and if inside record() --------------------------------------------------
@HYBRID
def test_print_float_and_if_inside_record(hybridize, data, capsys):
    x, _, t = data
    net = make_mlp(hybridize)
    vals = values_of(net)
    l2 = loss.L2Loss()

    def ref(v):
        return jnp.sum(0.5 * jnp.mean((ref_mlp(v, x) - t) ** 2, axis=1))

    with autograd.record():
        l = l2(net(x), t)
        print(l)
        value = float(l.sum())
        if l.mean() > 0:
            head = l * 1.0
        else:
            head = l * -1.0
        as_numpy = np.asarray(head)
        text = f"{l.mean():.6f}"
    assert value == pytest.approx(float(ref(vals)), rel=1e-4)
    assert_close(as_numpy, 0.5 * np.mean((np.asarray(ref_mlp(vals, x)) - t) ** 2, axis=1), **TOL)
    assert float(text) == pytest.approx(float(ref(vals)) / 6, rel=1e-4, abs=1e-6)
    printed = capsys.readouterr().out
    assert printed.strip()
    printed_values = np.array([float(s) for s in printed.replace("[", " ").replace("]", " ").split()])
    assert_close(printed_values, as_numpy, rtol=1e-3, atol=1e-5)
    autograd.backward(head)
    assert_grads(net, jax.grad(ref)(vals))


# -- 5. the split step: backward, read/clip grads, step -----------------------------------------
@HYBRID
def test_split_step_with_clip_global_norm(hybridize, data):
    x, y, _ = data
    net = make_mlp(hybridize)
    vals = values_of(net)
    lr, max_norm, batch = 0.3, 0.05, 6
    trainer = Trainer(net.collect_params(), "sgd", {"learning_rate": lr})
    ce = loss.SoftmaxCELoss()
    with autograd.record():
        l = ce(net(x), y)
    autograd.backward(l)

    def ref(v):
        return jnp.sum(ref_softmax_ce(ref_mlp(v, x), y))

    expected = [np.asarray(g) for g in jax.grad(ref)(vals)]
    read = [np.array(p.grad()) for p in net.collect_params().values()]
    for got, want in zip(read, expected):
        assert_close(got, want, **TOL)
    norm = hybrid.utils.clip_global_norm(net.collect_params(), max_norm)
    true_norm = np.sqrt(sum(np.sum(g.astype(np.float64) ** 2) for g in expected))
    assert norm == pytest.approx(true_norm, rel=1e-4)
    assert true_norm > max_norm  # clipping is active
    scale = max_norm / (true_norm + 1e-8)
    trainer.step(batch)
    for p, v, g in zip(net.collect_params().values(), vals, expected):
        assert_close(p.data(), v - lr * g * scale / batch, **TOL)


@HYBRID
def test_split_step_reading_grads_then_step(hybridize, data):
    x, y, _ = data
    net = make_mlp(hybridize)
    vals = values_of(net)
    lr = 0.2
    trainer = Trainer(net.collect_params(), "sgd", {"learning_rate": lr})
    with autograd.record():
        l = loss.SoftmaxCELoss()(net(x), y).mean()
    autograd.backward(l)
    expected = jax.grad(lambda v: jnp.mean(ref_softmax_ce(ref_mlp(v, x), y)))(vals)
    assert_grads(net, expected)  # forces the gradients before the step
    trainer.step(1)
    for p, v, g in zip(net.collect_params().values(), vals, expected):
        assert_close(p.data(), v - lr * g, **TOL)


@HYBRID
def test_gradients_read_after_the_fused_step_equal_jax_grad(hybridize, data):
    """The fused step returns the gradients packed; reading them afterwards (from the parameter, or
    from a gradient array taken before the step) gives jax.grad's values, for every dtype."""
    x, y, _ = data
    net = make_mlp(hybridize)
    net[1].bias.cast("bfloat16")  # a second dtype: a second packed buffer
    vals = values_of(net)
    trainer = Trainer(net.collect_params(), "sgd", {"learning_rate": 0.1})
    with autograd.record():
        l = loss.SoftmaxCELoss()(net(x), y).mean()
    autograd.backward(l)
    held = net[0].weight.grad()  # not computed yet
    trainer.step(1)

    def ref(v):
        w0, b0, w1, b1 = v
        out = jnp.tanh(x @ w0.T + b0) @ w1.T + b1.astype(jnp.bfloat16).astype(jnp.float32)
        return jnp.mean(ref_softmax_ce(out, y))
    expected = jax.grad(ref)([jnp.asarray(v, jnp.float32) for v in vals])
    assert_close(held, expected[0], **TOL)
    grads = [p.grad() for p in net.collect_params().values()]
    assert grads[3].dtype == jnp.bfloat16 and grads[0].dtype == jnp.float32
    for g, e in zip(grads, expected):
        assert tuple(g.shape) == tuple(e.shape)
        assert_close(np.asarray(g, np.float32), e, rtol=2e-2, atol=1e-2)
    assert_close(grads[0], expected[0], **TOL)


def test_trainer_keep_grads_false_updates_and_refuses_reading_gradients_afterwards(data):
    x, y, _ = data
    net = make_mlp(True)
    vals = values_of(net)
    trainer = Trainer(net.collect_params(), "sgd", {"learning_rate": 0.5}, keep_grads=False)
    with autograd.record():
        l = loss.SoftmaxCELoss()(net(x), y).mean()
    autograd.backward(l)
    held = net[0].weight.grad()
    trainer.step(1)
    expected = jax.grad(lambda v: jnp.mean(ref_softmax_ce(ref_mlp(v, x), y)))(vals)
    for p, v, g in zip(net.collect_params().values(), vals, expected):
        assert_close(p.data(), v - 0.5 * g, **TOL)
    with pytest.raises(RuntimeError, match="keep_grads=True"):
        net[0].weight.grad()
    with pytest.raises(AutogradError, match="keep_grads=False"):
        np.asarray(held)
    # the split step still reads gradients before the step
    cur = values_of(net)
    with autograd.record():
        l = loss.SoftmaxCELoss()(net(x), y).mean()
    autograd.backward(l)
    expected = jax.grad(lambda v: jnp.mean(ref_softmax_ce(ref_mlp(v, x), y)))(cur)
    assert_close(net[1].bias.grad(), expected[3], **TOL)
    trainer.step(1)
    assert_close(net[1].bias.data(), cur[3] - 0.5 * expected[3], **TOL)


# -- 6. arrays held across a step keep their values -----------------------------------------------
@HYBRID
@pytest.mark.parametrize("where", ["before_record", "inside_record"])
def test_data_held_across_step_keeps_old_value(hybridize, where, data):
    x, y, _ = data
    net = make_mlp(hybridize)
    trainer = Trainer(net.collect_params(), "sgd", {"learning_rate": 0.5})
    ce = loss.SoftmaxCELoss()
    # a warm step so that the step program (with donation) is compiled
    with autograd.record():
        l = ce(net(x), y).mean()
    autograd.backward(l)
    trainer.step(1)
    old = values_of(net)
    w0 = net[0].weight.data() if where == "before_record" else None
    with autograd.record():
        if where == "inside_record":
            w0 = net[0].weight.data()
        l = ce(net(x), y).mean()
    autograd.backward(l)
    trainer.step(1)
    assert_close(np.asarray(w0), old[0], rtol=0, atol=0)
    assert_close(w0 * 1.0, old[0], rtol=0, atol=0)  # still usable in JAX code
    new = np.asarray(net[0].weight.data())
    assert not np.allclose(new, old[0])
    expected = jax.grad(lambda v: jnp.mean(ref_softmax_ce(ref_mlp(v, x), y)))(old)
    assert_close(new, old[0] - 0.5 * expected[0], **TOL)
    # a third step (nothing held now) still updates correctly
    cur = values_of(net)
    with autograd.record():
        l = ce(net(x), y).mean()
    autograd.backward(l)
    trainer.step(1)
    expected = jax.grad(lambda v: jnp.mean(ref_softmax_ce(ref_mlp(v, x), y)))(cur)
    for p, v, g in zip(net.collect_params().values(), cur, expected):
        assert_close(p.data(), v - 0.5 * g, **TOL)


@HYBRID
@pytest.mark.parametrize("order", ["array_first", "forward_first"])
def test_a_weight_array_taken_before_record_is_the_parameter_inside(data, hybridize, order):
    """An array read with ``p.data()`` before ``record()`` and used inside it is the parameter's value:
    its use adds to the parameter's gradient, whether it is used before or after the forward reads it."""
    x, y, t = data
    net = make_mlp(hybridize)
    params = list(net.collect_params().values())
    vals = values_of(net)
    w = params[0].data()
    with autograd.record():
        penalty = (w ** 2).sum() if order == "array_first" else None
        out = net(x).sum()
        l = out + (penalty if penalty is not None else (w ** 2).sum())
    l.backward()
    expected = jax.grad(lambda v: jnp.sum(ref_mlp(v, x)) + jnp.sum(v[0] ** 2))(vals)
    for p, g in zip(params, expected):
        assert_close(p.grad(), g, **TOL)


def test_a_held_array_keeps_its_buffer_and_the_others_are_reused(data):
    """Holding one weight across a step keeps that buffer out of the donation; every other weight and
    every momentum is still updated in place (its new array lives in the old buffer)."""
    x, y, _ = data
    net = make_mlp(True)
    trainer = Trainer(net.collect_params(), "sgd", {"learning_rate": 0.5, "momentum": 0.9})
    params = list(net.collect_params().values())
    ce = loss.SoftmaxCELoss()
    for _ in range(2):  # the second step runs the program that donates
        _train_step(net, trainer, x, y, ce)

    def pointers():  # no array is kept: holding one would stop its donation
        return ([p.data().unsafe_buffer_pointer() for p in params],
                [leaf.unsafe_buffer_pointer() for p in params for leaf in trainer._states[p]])
    weights_before, states_before = pointers()
    held = params[0].data()
    _train_step(net, trainer, x, y, ce)
    weights_after, states_after = pointers()
    assert held.unsafe_buffer_pointer() == weights_before[0] != weights_after[0]
    assert weights_after[1:] == weights_before[1:]
    assert states_after == states_before


def test_a_held_momentum_keeps_its_value_and_the_step_still_reuses_the_weights(data):
    """The momenta are staged as one group: holding one of them keeps the group's buffers out of the
    donation (the held array still reads its old value), while the weights are still updated in place;
    the values equal a step in which nothing is held."""
    x, y, _ = data
    nets, trainers = [], []
    for _ in range(2):
        nets.append(make_mlp(True))
        trainers.append(Trainer(nets[-1].collect_params(), "sgd", {"learning_rate": 0.5, "momentum": 0.9}))
    for p, q in zip(nets[0].collect_params().values(), nets[1].collect_params().values()):
        q.set_data(p.data() + 0)
    ce = loss.SoftmaxCELoss()
    for _ in range(2):
        for net, trainer in zip(nets, trainers):
            _train_step(net, trainer, x, y, ce)
    params = list(nets[0].collect_params().values())
    weights_before = [p.data().unsafe_buffer_pointer() for p in params]
    held = trainers[0]._states[params[0]][0]
    held_value = np.asarray(held).copy()
    for net, trainer in zip(nets, trainers):
        _train_step(net, trainer, x, y, ce)
    np.testing.assert_array_equal(np.asarray(held), held_value)
    assert [p.data().unsafe_buffer_pointer() for p in params] == weights_before
    for (name, p), q in zip(nets[0].collect_params().items(), nets[1].collect_params().values()):
        np.testing.assert_array_equal(np.asarray(p.data()), np.asarray(q.data()), err_msg=name)
        np.testing.assert_array_equal(np.asarray(trainers[0]._states[p][0]), np.asarray(trainers[1]._states[q][0]))


# -- 7. no retrace for unrelated objects; structural changes do recompile ---------------------
def _train_step(net, trainer, x, y, ce):
    with autograd.record():
        l = ce(net(x), y).mean()
    autograd.backward(l)
    trainer.step(1)
    return l


def test_unrelated_blocks_and_parameters_cause_no_retrace(data):
    x, y, _ = data
    net = make_mlp(True)
    ce = loss.SoftmaxCELoss()
    trainer = Trainer(net.collect_params(), "sgd", {"learning_rate": 0.1})
    for _ in range(2):
        _train_step(net, trainer, x, y, ce)
    compiles, flushes = autograd.stats.compiles, autograd.stats.flushes
    _train_step(net, trainer, x, y, ce)
    assert autograd.stats.compiles == compiles
    assert autograd.stats.flushes == flushes + 1  # forward, loss, backward and update: one program
    others = [nn.Dense(5), nn.Dense(4, in_units=2), hybrid.Parameter("w", shape=(3,)), nn.HybridSequential()]
    others[1].initialize()
    others[2].initialize()
    others[3].add(nn.Dense(2))
    others[3].hybridize()
    for _ in range(2):
        compiles = autograd.stats.compiles
        vals = values_of(net)
        _train_step(net, trainer, x, y, ce)
        assert autograd.stats.compiles == compiles
        expected = jax.grad(lambda v: jnp.mean(ref_softmax_ce(ref_mlp(v, x), y)))(vals)
        for p, v, g in zip(net.collect_params().values(), vals, expected):
            assert_close(p.data(), v - 0.1 * g, **TOL)


@pytest.mark.parametrize("change", ["add_child", "cast_roundtrip", "grad_req_null", "rehybridize"])
def test_structural_change_recompiles_and_stays_correct(change, data):
    x, y, _ = data
    net = make_mlp(True)
    ce = loss.SoftmaxCELoss()
    lr = 0.1
    trainer = Trainer(net.collect_params(), "sgd", {"learning_rate": lr})
    for _ in range(2):
        _train_step(net, trainer, x, y, ce)
    compiles = autograd.stats.compiles
    frozen = set()
    ref_net = ref_mlp
    if change == "add_child":
        extra = nn.Dense(3, in_units=3)
        extra.initialize(init.Xavier())
        net.add(extra)
        trainer = Trainer(net.collect_params(), "sgd", {"learning_rate": lr})
        ref_net = lambda v, x: ref_mlp(v[:4], x) @ v[4].T + v[5]  # noqa: E731
    elif change == "cast_roundtrip":
        net.cast("float16")
        assert net[0].weight.data().dtype == jnp.float16
        net.cast("float32")
        assert net[0].weight.data().dtype == jnp.float32
    elif change == "grad_req_null":
        net[0].bias.grad_req = "null"
        frozen.add(1)
    else:
        net.hybridize()
    vals = values_of(net)
    l = _train_step(net, trainer, x, y, ce)
    assert autograd.stats.compiles > compiles
    ref_loss = lambda v: jnp.mean(ref_softmax_ce(ref_net(v, x), y))  # noqa: E731
    assert_close(l, ref_loss(vals), **TOL)
    expected = jax.grad(ref_loss)(vals)
    for i, (p, v, g) in enumerate(zip(net.collect_params().values(), vals, expected)):
        assert_close(p.data(), v if i in frozen else v - lr * g, **TOL)
    # and the next step reuses the new program
    compiles = autograd.stats.compiles
    _train_step(net, trainer, x, y, ce)
    assert autograd.stats.compiles == compiles


# -- 8. errors ---------------------------------------------------------------------------------
@HYBRID
def test_backward_on_unrecorded_array_raises(hybridize, data):
    x, _, _ = data
    net = make_mlp(hybridize)
    out = net(x)
    with pytest.raises(AutogradError):
        autograd.backward(out)
    with pytest.raises(AutogradError):
        autograd.backward(jnp.ones(3))


def test_grad_on_unused_variable_raises(data):
    x, _, _ = data
    a, unused = jnp.asarray(x), jnp.ones((4,))
    with autograd.record():
        l = jnp.sum(a ** 2)
    with pytest.raises(AutogradError):
        autograd.grad(l, unused)
    with pytest.raises(AutogradError):
        autograd.grad(l, [a, unused])
    assert_close(autograd.grad(l, a), 2 * x, **TOL)


@HYBRID
def test_second_backward_without_retain_graph_raises(hybridize, data):
    x, _, _ = data
    net = make_mlp(hybridize)
    vals = values_of(net)
    with autograd.record():
        l = jnp.sum(net(x) ** 2)
    autograd.backward(l, retain_graph=True)
    autograd.backward(l)
    assert_grads(net, jax.grad(lambda v: jnp.sum(ref_mlp(v, x) ** 2))(vals))
    with pytest.raises(AutogradError):
        autograd.backward(l)
    with pytest.raises(AutogradError):
        autograd.grad(l, net[0].weight.data())


# -- 9. stop_gradient ---------------------------------------------------------------------------
@HYBRID
def test_stop_gradient_detaches(hybridize, data):
    x, _, _ = data
    net = make_mlp(hybridize)
    vals = values_of(net)
    with autograd.record():
        out = net(x)
        l = jnp.sum(jax.lax.stop_gradient(out) * out) + jnp.sum(jax.lax.stop_gradient(out ** 3))
    autograd.backward(l)

    def ref(v):
        o = ref_mlp(v, x)
        return jnp.sum(jax.lax.stop_gradient(o) * o) + jnp.sum(jax.lax.stop_gradient(o ** 3))

    assert_grads(net, jax.grad(ref)(vals))
    # only through the stopped branch: zero gradient
    a = jnp.asarray(x)
    with autograd.record():
        l = jnp.sum(jax.lax.stop_gradient(a ** 2)) + jnp.sum(3.0 * a)
        stopped = jnp.sum(jax.lax.stop_gradient(a) ** 2)
    ga = autograd.grad(l, a, retain_graph=True)
    assert_close(ga, np.full_like(x, 3.0), rtol=0, atol=0)
    gs = autograd.grad(stopped, a)
    assert_close(gs, np.zeros_like(x), rtol=0, atol=0)


# -- 10. supported JAX versions ------------------------------------------------------------------
def test_check_jax_version():
    with pytest.raises(ImportError):
        hybrid._core.lazy.check_jax_version("0.5.0")
    with pytest.raises(ImportError):
        hybrid._core.lazy.check_jax_version("99.0.0")
    hybrid._core.lazy.check_jax_version(jax.__version__)
    hybrid._core.lazy.check_jax_version()


def test_structural_change_releases_the_programs_that_used_the_block():
    net = nn.HybridSequential()
    net.add(nn.Dense(4, in_units=3), nn.Dense(2, in_units=4))
    net.initialize()
    net.hybridize()
    trainer = hybrid.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.1})
    x = np.ones((2, 3), np.float32)

    def step():
        with autograd.record():
            loss = net(x).sum()
        autograd.backward(loss)
        trainer.step(1)

    step()
    gc.collect()  # programs of other tests' discarded blocks go now, not during the counts below
    gc.disable()
    try:
        cached = _lazy.cached_programs()
        last_run = weakref.ref(next(reversed(_lazy._PROGRAMS.values()))[0])
        net[1].weight.grad_req = "null"  # the hybridized net's compiled calls depend on it
        assert _lazy.cached_programs() == cached - 1  # the step's program is released with them
        assert last_run() is None  # nothing else keeps it, although it was the last one run
        step()
        assert _lazy.cached_programs() == cached
    finally:
        gc.enable()


@jax.custom_vjp
def _clipped_gradient(v):
    return v


_clipped_gradient.defvjp(lambda v: (v, None), lambda _, g: (jnp.clip(g, -0.1, 0.1),))

TRANSFORMS = {
    "jit": lambda w, x: jax.jit(lambda a, b: jnp.sum(jnp.tanh(b @ a)))(w, x),
    "scan": lambda w, x: jnp.sum(jax.lax.scan(lambda c, _: (jnp.tanh(c @ w), None), x, None, length=3)[0]),
    "vmap": lambda w, x: jnp.sum(jax.vmap(lambda r: jnp.tanh(r @ w))(x)),
    "checkpoint": lambda w, x: jnp.sum(jax.checkpoint(lambda a: jnp.tanh(x @ a))(w)),
    "custom_vjp": lambda w, x: jnp.sum(_clipped_gradient(x @ w) * 3.0),
    "cond": lambda w, x: jax.lax.cond(True, lambda a: jnp.sum(a ** 2), jnp.sum, x @ w),
    "fori_loop": lambda w, x: jnp.sum(jax.lax.fori_loop(0, 3, lambda i, c: jnp.tanh(c @ w), x)),
    "logsumexp": lambda w, x: jnp.sum(jax.nn.softmax(x @ w)) + jax.scipy.special.logsumexp(x @ w),
    "relu_at_zero": lambda w, x: jnp.sum(jax.nn.relu(x @ w * 0.0)),
    "random": lambda w, x: jnp.sum(jax.random.normal(jax.random.key(0), (4, 3)) * (x @ w)),
}


@pytest.mark.parametrize("name", list(TRANSFORMS))
def test_jax_transformations_inside_record_differentiate_like_jax_grad(name):
    """jit, control flow, vmap, checkpoint and custom derivative rules inside record(): the gradient is
    jax.grad's, custom rules (custom_vjp clipping, relu's jvp at 0) included."""
    f = TRANSFORMS[name]
    rng = np.random.default_rng(0)
    w = jnp.asarray(rng.standard_normal((3, 3)), jnp.float32)
    x = jnp.asarray(rng.standard_normal((4, 3)), jnp.float32)
    with autograd.record():
        value = f(w, x)
    assert_close(autograd.grad(value, w), jax.grad(f)(w, x), rtol=1e-5, atol=1e-6)
    assert_close(value, f(w, x), rtol=1e-5, atol=1e-6)


REDUCTIONS = {
    "mean": lambda a: a.mean(),
    "sum_axis": lambda a: a.sum(axis=0) * jnp.arange(3.0),
    "sum_keepdims_dtype": lambda a: a.sum(axis=1, keepdims=True, dtype=jnp.float16).astype(jnp.float32) ** 2,
    "max_and_min": lambda a: a.max(axis=1) - a.min(),
    "prod": lambda a: (a * 0.5 + 1.0).prod(axis=0),
    "var_std": lambda a: a.var(ddof=1) + a.std(axis=0),
    "argmax_picks": lambda a: jnp.take_along_axis(a, a.argmax(axis=1, keepdims=True), axis=1)
                              + a.argmin(),
    "any_all_where": lambda a: jnp.where((a > 0).any() & ~(a > 9).all(), a.sum(where=a > 0), 0.0),
}


@pytest.mark.parametrize("name", list(REDUCTIONS))
def test_reductions_called_as_methods_equal_jax(name):
    """``l.mean()``, ``l.sum(axis=...)`` and the other reductions called as methods inside record() (staged
    from a cache of their own): values and gradients are JAX's, whatever the arguments."""
    f = REDUCTIONS[name]
    w = jnp.asarray(np.random.default_rng(0).standard_normal((4, 3)), jnp.float32)

    def head(w):
        return jnp.sum(f(jnp.tanh(w) * 2.0))
    for _ in range(2):  # the second time from the cache
        with autograd.record():
            value = head(w)
        assert_close(value, head(w), rtol=1e-3, atol=1e-4)
        assert_close(autograd.grad(value, w), jax.grad(head)(w), rtol=1e-3, atol=1e-4)


OPERATORS = {
    "scalars_both_sides": lambda a, c: 2.0 * a - 1 + a / 3 - 0.5 / (a * a + 1.0),
    "arrays": lambda a, c: a * c + c - a @ jnp.ones((3, 3)) + jnp.ones((4, 4)) @ a,
    "two_recorded": lambda a, c: (a + a.T.T) * a / (a * a + 2),
    "powers": lambda a, c: a ** 2 + a ** 3 + 2.0 ** a + (a * a + 1) ** 0.5 + a ** -1,
    "floordiv_mod": lambda a, c: (a * 7.0) // 2 + (a * 7.0) % 3.0 + a,
    "promotion": lambda a, c: a.astype(jnp.int32) * 2.5 + (a > 0) * a + a * True,
    "float16": lambda a, c: (a.astype(jnp.float16) * 3 + 1.5).astype(jnp.float32),
}


@pytest.mark.parametrize("name", list(OPERATORS))
def test_arithmetic_operators_equal_jax(name):
    """Operators on recorded values (staged from a cache of their own): values, dtypes and gradients are
    JAX's, for Python numbers and arrays on either side."""
    f = OPERATORS[name]
    w = jnp.asarray(np.random.default_rng(1).standard_normal((4, 3)), jnp.float32) + 0.1
    c = jnp.asarray(np.random.default_rng(2).standard_normal((4, 3)), jnp.float32)

    def head(w):
        return f(jnp.tanh(w) * 2.0, c)
    for _ in range(2):  # the second time from the cache
        with autograd.record():
            value = head(w)
        assert value.dtype == head(w).dtype and value.shape == head(w).shape
        assert_close(value, head(w), rtol=1e-3, atol=1e-3)
        with autograd.record():
            total = jnp.sum(head(w))
        assert_close(autograd.grad(total, w), jax.grad(lambda w: jnp.sum(head(w)))(w), rtol=1e-3, atol=1e-3)


def test_a_number_that_changes_every_step_compiles_once(data):
    x, y, _ = data
    net = make_mlp(True)
    trainer = Trainer(net.collect_params(), "sgd", {"learning_rate": 0.1})
    loss_fn = loss.SoftmaxCELoss()
    losses = []
    for step in range(4):
        compiles = autograd.stats.compiles
        with autograd.record():
            l = loss_fn(net(x), y).mean() * (1.0 / (step + 1)) + step
        autograd.backward(l)
        trainer.step(1)
        losses.append(float(l))
        if step >= 1:
            assert autograd.stats.compiles == compiles
    assert losses[3] - 3 < (losses[2] - 2) < (losses[1] - 1) < losses[0]  # the scale is each step's


def test_reductions_with_other_arguments_are_other_computations():
    x = jnp.arange(6.0).reshape(2, 3)
    results = []
    for axis in (0, 1, None, 0):
        with autograd.record():
            results.append(np.asarray((x * 1.0).sum(axis=axis)))
    assert_close(results[0], [3.0, 5.0, 7.0])
    assert_close(results[1], [3.0, 12.0])
    assert_close(results[2], 15.0)
    assert_close(results[3], results[0])


def test_steady_state_steps_copy_nothing_between_host_and_device(data):
    x, y, _ = data
    x, y = jnp.asarray(x), jnp.asarray(y)
    net = make_mlp(True)
    trainer = Trainer(net.collect_params(), "sgd", {"learning_rate": 0.1, "momentum": 0.9})
    loss_fn = loss.SoftmaxCELoss()

    def step():
        with autograd.record():
            l = loss_fn(net(x), y)
        autograd.backward(l)
        trainer.step(x.shape[0])
    step()
    step()
    with jax.transfer_guard("disallow"):  # the learning rate and rescale factor stay on the device
        step()
        step()
    trainer.set_learning_rate(0.05)  # a new value is copied once
    step()


def test_a_gradient_read_again_is_the_same_array_and_unread_ones_still_update(data):
    """backward makes an array for a gradient only when it is read; a second read gives that array again,
    and the step applies every gradient, read or not."""
    x, y, _ = data
    net = make_mlp(True)
    vals = values_of(net)
    trainer = Trainer(net.collect_params(), "sgd", {"learning_rate": 0.5})
    with autograd.record():
        l = loss.SoftmaxCELoss()(net(x), y).mean()
    autograd.backward(l)
    first = net[1].bias.grad()
    assert net[1].bias.grad() is first
    float(l)  # runs the recording
    assert net[1].bias.grad() is first
    trainer.step(1)
    expected = jax.grad(lambda v: jnp.mean(ref_softmax_ce(ref_mlp(v, x), y)))(vals)
    assert_close(first, expected[3], **TOL)
    for p, v, g in zip(net.collect_params().values(), vals, expected):
        assert_close(p.data(), v - 0.5 * g, **TOL)
        assert_close(p.grad(), g, **TOL)


def test_waiting_for_packed_gradients_does_not_split_them(data):
    x, y, _ = data
    net = make_mlp(True)
    vals = values_of(net)
    with autograd.record():
        l = loss.SoftmaxCELoss()(net(x), y).mean()
    autograd.backward(l)
    np.asarray(l)  # runs the recording: the gradients come back packed
    grad = net[0].weight.grad()
    jax.block_until_ready(grad)
    assert grad._packed[0].values is None  # still one buffer
    expected = jax.grad(lambda v: jnp.mean(ref_softmax_ce(ref_mlp(v, x), y)))(vals)
    assert_close(grad, expected[0], **TOL)


def test_large_gradients_come_back_as_they_are_and_small_ones_packed(rng):
    """A gradient of at least PACK_BELOW_BYTES is a program output of its own (copying it into the packed
    buffer would cost more than the output saves); the small ones share one buffer. Both equal jax.grad."""
    x = jnp.asarray(rng.standard_normal((8, 256)), jnp.float32)
    y = jnp.asarray(rng.integers(0, 3, 8))
    net = nn.HybridSequential()
    net.add(nn.Dense(128, activation="tanh", in_units=256), nn.Dense(3, in_units=128))
    net.initialize(init.Xavier())
    vals = values_of(net)
    assert vals[0].nbytes >= _lazy.PACK_BELOW_BYTES > max(v.nbytes for v in vals[1:])
    with autograd.record():
        l = loss.SoftmaxCELoss()(net(x), y).mean()
    autograd.backward(l)
    np.asarray(l)
    grads = [p.grad() for p in net.collect_params().values()]
    pack = grads[0]._packed[0]
    assert all(g._packed[0] is pack for g in grads)
    assert [a.shape for a in pack.layout.buffer_avals] == [(128 + 3 * 128 + 3,), (128, 256)]
    assert pack.buffers[1].shape == (128, 256)  # the large gradient itself, not a slice of a buffer

    def ref(v):
        w0, b0, w1, b1 = v
        return jnp.mean(ref_softmax_ce(jnp.tanh(x @ w0.T + b0) @ w1.T + b1, y))
    for g, e in zip(grads, jax.grad(ref)(vals)):
        assert_close(g, e, **TOL)


@pytest.mark.parametrize("hybridize", [False, True], ids=["eager", "hybridized"])
def test_finished_steps_leave_no_cyclic_garbage(hybridize, data):
    """Every object of a recorded step is freed by reference counting: cyclic garbage would make Python's
    collector run every few steps, at a cost growing with everything else the process holds."""
    x, y, _ = data
    net = make_mlp(hybridize)
    trainer = Trainer(net.collect_params(), "sgd", {"learning_rate": 0.1, "momentum": 0.9})
    loss_fn = loss.SoftmaxCELoss()

    def step():
        with autograd.record():
            l = loss_fn(net(x), y).mean()
        autograd.backward(l)
        trainer.step(1)
        return float(l)
    for _ in range(3):  # the first steps compile (with the optimizer states created, and without)
        step()
    gc.disable()
    try:
        for _ in range(2):
            gc.collect()  # the first time: also what other tests left, freed as their caches let go
            for _ in range(5):
                step()
        assert gc.collect() == 0
    finally:
        gc.enable()


# -- 11. loss.backward() and several backward() in one record() scope ------------------------------
@HYBRID
def test_loss_backward_method_equals_jax_grad(hybridize, data):
    x, _, targets = data
    net = make_mlp(hybridize)
    vals = values_of(net)
    head = np.linspace(0.5, 1.5, 18, dtype=np.float32).reshape(6, 3)
    with autograd.record():
        l = loss.L2Loss()(net(x), targets)
    l.backward()
    assert_grads(net, jax.grad(lambda v: jnp.sum(0.5 * jnp.mean((ref_mlp(v, x) - targets) ** 2, axis=1)))(vals))
    with autograd.record():
        out = net(x)
    out.backward(out_grad=head)
    assert_grads(net, jax.grad(lambda v: jnp.sum(ref_mlp(v, x) * head))(vals))
    with pytest.raises(AutogradError, match="already differentiated"):
        out.backward()
    with pytest.raises(AttributeError, match=r"autograd.record\(\)"):
        jnp.ones(3).backward()


def scalar_param(values):
    w = Parameter("w", shape=(3,))
    w.initialize()
    w.set_data(jnp.asarray(values, jnp.float32))
    return w


# The expected values below were observed with MXNet 1.9.1 running the same code (w.attach_grad() on
# w = [1, 2, 3], x = [2, 3, 4]), and match the hand-derived gradients given with them.
W0, X0 = np.array([1.0, 2.0, 3.0], np.float32), np.array([2.0, 3.0, 4.0], np.float32)


@pytest.mark.parametrize("req, expected", [("write", [2.0, 4.0, 6.0]), ("add", [4.0, 7.0, 10.0])])
def test_second_backward_in_one_scope_overwrites_or_adds(req, expected):
    w = scalar_param(W0)
    w.grad_req = req
    with autograd.record():
        (w.data() * X0).sum().backward()              # d/dw = x
        assert_close(w.grad(), X0, rtol=0, atol=0)
        (w.data() * w.data()).sum().backward()        # d/dw = 2 w: written over x, or added to it
    assert_close(w.grad(), expected, rtol=0, atol=0)


def test_retained_head_differentiated_twice_then_a_new_head():
    w = scalar_param(W0)
    w.grad_req = "add"
    with autograd.record():
        y = (w.data() * X0).sum()
        y.backward(retain_graph=True)
        y.backward()
        (w.data() ** 2).sum().backward()
    assert_close(w.grad(), 2 * X0 + 2 * W0, rtol=0, atol=0)  # MXNet: [6, 10, 14]


@pytest.mark.parametrize("first, retain, expected", [
    ("h", False, W0 * X0),               # h = w x freed: a constant of the second head, d/dw (h w) = h
    ("2h", False, W0 * X0),              # freed through g = 2 h as well
    ("3w", False, 2 * W0 * X0),          # h not on the first head's path: d/dw (w x w) = 2 w x
    ("h", True, 2 * W0 * X0),            # retained: h still depends on w
])
def test_values_freed_by_a_backward_are_constants_of_later_heads(first, retain, expected):
    w = scalar_param(W0)
    with autograd.record():
        h = w.data() * X0
        head = {"h": lambda: h.sum(), "2h": lambda: (h * 2).sum(), "3w": lambda: (w.data() * 3).sum()}[first]()
        head.backward(retain_graph=retain)
        (h * w.data()).sum().backward()
    assert_close(w.grad(), expected, rtol=0, atol=0)


def test_backward_errors_after_a_backward_freed_the_graph():
    w = scalar_param(W0)
    with autograd.record():
        h = w.data() * X0
        y = h.sum()
        y.backward()
        with pytest.raises(AutogradError, match="already differentiated"):
            autograd.backward([y, (w.data() ** 2).sum()])
        with pytest.raises(AutogradError, match="only through values that an earlier backward"):
            (h * h).sum().backward()
        with pytest.raises(AutogradError, match="already differentiated"):
            autograd.grad(y, w.data())
        g = autograd.grad((h * w.data()).sum(), h)   # a freed value can still be a variable
    assert_close(g, W0, rtol=0, atol=0)


@HYBRID
def test_two_models_stepped_after_two_backward_in_one_scope(hybridize, data):
    x, labels, targets = data
    nets = [make_mlp(hybridize), make_mlp(hybridize)]
    trainers = [Trainer(n.collect_params(), "sgd", {"learning_rate": 0.1}) for n in nets]
    refs = [lambda v: jnp.sum(ref_softmax_ce(ref_mlp(v, x), labels)),
            lambda v: jnp.sum(0.5 * jnp.mean((ref_mlp(v, x) - targets) ** 2, axis=1))]
    ce, l2 = loss.SoftmaxCELoss(), loss.L2Loss()
    compiles = []
    for step in range(3):
        before = [values_of(n) for n in nets]
        count = autograd.stats.compiles
        with autograd.record():
            ce(nets[0](x), labels).backward()
            l2(nets[1](x), targets).backward()
        trainers[0].step(1)
        trainers[1].step(1)
        compiles.append(autograd.stats.compiles - count)
        for net, vals, ref in zip(nets, before, refs):
            expected = [v - 0.1 * g for v, g in zip(vals, jax.grad(ref)(vals))]
            for p, e in zip(net.collect_params().values(), expected):
                assert_close(p.data(), e, **TOL)
    assert compiles[1:] == [0, 0]


def test_rnn_cell_unrolled_twice_with_a_backward_each(rng):
    """MXNet's check_rnn_forward (test_gluon_rnn.py) pattern: two unrolls and two backward() in one scope;
    the gradients are those of the second unroll (grad_req 'write')."""
    cell = hybrid.rnn.RNNCell(4, input_size=3)
    cell.initialize()
    inputs = rng.standard_normal((2, 3, 3)).astype(np.float32)   # NTC
    wi, wh, bi, bh = (np.asarray(cell.collect_params()[k].data())
                      for k in ("i2h_weight", "h2h_weight", "i2h_bias", "h2h_bias"))

    def ref(wi, wh, bi, bh, steps):
        h, total = jnp.zeros((2, 4)), 0.0
        for t in range(steps):
            h = jnp.tanh(inputs[:, t] @ wi.T + bi + h @ wh.T + bh)
            total = total + h.sum()
        return total

    with autograd.record():
        outs = cell.unroll(2, inputs[:, :2], layout="NTC", merge_outputs=False)[0]
        autograd.backward(outs)
        cell.unroll(3, inputs, layout="NTC", merge_outputs=True)[0].backward()
    expected = jax.grad(ref, argnums=(0, 1, 2, 3))(wi, wh, bi, bh, 3)
    for name, g in zip(("i2h_weight", "h2h_weight", "i2h_bias", "h2h_bias"), expected):
        assert_close(cell.collect_params()[name].grad(), g, **TOL)
