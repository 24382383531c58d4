"""NAG, AdamW, RMSProp, AdaGrad, AdaDelta, LAMB and the optax adapter, step by step against NumPy."""
import numpy as np
import optax
import pytest

from hybrid import HybridBlock, Parameter, Trainer, autograd, init, optimizer

from conftest import assert_close

X = np.array([[0.5, 1.0, 2.0], [1.5, -1.0, 0.25]])
W0 = np.array([[1.0, -2.0, 0.5], [0.3, 0.8, -1.2]])


class Scaled(HybridBlock):
    """out = w * x; with head gradient ``out`` (loss 0.5 * sum(out**2)) the gradient is w * x**2."""

    def __init__(self, w0, **param_kwargs):
        super().__init__()
        self.w = Parameter("w", shape=w0.shape, init=init.Constant(w0), **param_kwargs)

    def forward(self, x):
        return self.w.data() * x


def backward(block, x=X):
    with autograd.record():
        out = block(np.float32(x))
    autograd.backward(out, head_grads=np.asarray(out))


def train(opt, opt_params=None, steps=3, batch_size=2, w0=W0):
    """Weights after each of ``steps`` Trainer steps."""
    block = Scaled(w0)
    block.initialize()
    trainer = Trainer(block.collect_params(), opt, opt_params)
    history = []
    for _ in range(steps):
        backward(block)
        trainer.step(batch_size)
        history.append(np.asarray(block.w.data(), np.float64))
    return history


def simulate(rule, lr, wd=0.0, clip=None, steps=3, batch_size=2, w0=W0, **hyper):
    """The same run in float64 NumPy; ``rule(w, g, state, lr, wd, t, **hyper)`` returns the new weight."""
    w, state, history = w0.copy(), {}, []
    for t in range(1, steps + 1):
        g = w * X ** 2 / batch_size
        if clip is not None:
            g = np.clip(g, -clip, clip)
        w = rule(w, g, state, lr, wd, t, **hyper)
        history.append(w.copy())
    return history


# -- NumPy update rules ------------------------------------------------------------------------
def zeros(state, w, *names):
    return [state.setdefault(name, np.zeros_like(w)) for name in names]


def np_nag(w, g, state, lr, wd, t, momentum):
    g = g + wd * w
    state["mom"] = momentum * state.get("mom", 0.0) - lr * g
    return w + momentum * state["mom"] - lr * g


def np_adamw(w, g, state, lr, wd, t, beta1=0.9, beta2=0.999, epsilon=1e-6, correct_bias=True):
    m, v = zeros(state, w, "m", "v")
    m[:] = beta1 * m + (1 - beta1) * g
    v[:] = beta2 * v + (1 - beta2) * g * g
    m_hat, v_hat = (m / (1 - beta1 ** t), v / (1 - beta2 ** t)) if correct_bias else (m, v)
    return w - lr * (m_hat / (np.sqrt(v_hat) + epsilon) + wd * w)


def np_rmsprop(w, g, state, lr, wd, t, rho=0.9, momentum=0.9, epsilon=1e-8, centered=False, clip_weights=None):
    g = g + wd * w
    var, mean, mom = zeros(state, w, "var", "mean", "mom")
    var[:] = rho * var + (1 - rho) * g * g
    if centered:
        mean[:] = rho * mean + (1 - rho) * g
        mom[:] = momentum * mom - lr * g / np.sqrt(var - mean ** 2 + epsilon)
        w = w + mom
    else:
        w = w - lr * g / np.sqrt(var + epsilon)
    return w if clip_weights is None else np.clip(w, -clip_weights, clip_weights)


def np_adagrad(w, g, state, lr, wd, t, epsilon=1e-6):
    g = g + wd * w
    (history,) = zeros(state, w, "history")
    history += g * g
    return w - lr * g / (np.sqrt(history) + epsilon)


def np_adadelta(w, g, state, lr, wd, t, rho=0.9, epsilon=1e-6):
    g = g + wd * w
    acc_g, acc_delta = zeros(state, w, "acc_g", "acc_delta")
    acc_g[:] = rho * acc_g + (1 - rho) * g * g
    delta = np.sqrt(acc_delta + epsilon) / np.sqrt(acc_g + epsilon) * g
    acc_delta[:] = rho * acc_delta + (1 - rho) * delta * delta
    return w - lr * delta


def np_lamb(w, g, state, lr, wd, t, beta1=0.9, beta2=0.999, epsilon=1e-6, lower_bound=None, upper_bound=None,
            bias_correction=True):
    m, v = zeros(state, w, "m", "v")
    m[:] = beta1 * m + (1 - beta1) * g
    v[:] = beta2 * v + (1 - beta2) * g * g
    m_hat, v_hat = (m / (1 - beta1 ** t), v / (1 - beta2 ** t)) if bias_correction else (m, v)
    r = m_hat / (np.sqrt(v_hat) + epsilon) + wd * w
    r1 = np.linalg.norm(w)
    r1 = r1 if lower_bound is None else max(r1, lower_bound)
    r1 = r1 if upper_bound is None else min(r1, upper_bound)
    r2 = np.linalg.norm(r)
    ratio = r1 / r2 if r1 > 0 and r2 > 0 else 1.0
    return w - lr * ratio * r


CASES = [
    ("nag", np_nag, dict(learning_rate=0.1, momentum=0.9)),
    ("nag", np_nag, dict(learning_rate=0.1, momentum=0.0)),
    ("adamw", np_adamw, dict(learning_rate=0.01)),
    ("adamw", np_adamw, dict(learning_rate=0.01, beta1=0.8, epsilon=1e-3, correct_bias=False)),
    ("rmsprop", np_rmsprop, dict(learning_rate=0.01, epsilon=0.1)),
    ("rmsprop", np_rmsprop, dict(learning_rate=0.01, centered=True, momentum=0.5, clip_weights=1.0)),
    ("adagrad", np_adagrad, dict(learning_rate=0.1)),
    ("adadelta", np_adadelta, dict(learning_rate=1.0, rho=0.8)),
    ("lamb", np_lamb, dict(learning_rate=0.05)),
    ("lamb", np_lamb, dict(learning_rate=0.05, upper_bound=1.0, bias_correction=False)),
    ("lamb", np_lamb, dict(learning_rate=0.05, lower_bound=5.0)),
]


@pytest.mark.parametrize("clip", [None, 0.5])
@pytest.mark.parametrize("name, rule, hyper", CASES, ids=[f"{c[0]}{i}" for i, c in enumerate(CASES)])
def test_steps_match_numpy(name, rule, hyper, clip):
    """Three steps with weight decay, rescale_grad = 1/batch_size and (optionally) gradient clipping."""
    lr = hyper["learning_rate"]
    extra = {k: v for k, v in hyper.items() if k != "learning_rate"}
    got = train(name, dict(hyper, wd=0.05, clip_gradient=clip))
    expected = simulate(rule, lr, wd=0.05, clip=clip, **extra)
    for g, e in zip(got, expected):
        assert_close(g, e, rtol=2e-5, atol=1e-6)


def test_nag_and_adagrad_first_steps_by_hand():
    w0, x = np.array([[1.0, -2.0]]), np.array([[0.5, 4.0]])
    for name, params, expected in [
        # g = w x^2 / 2 = [0.125, -16]; mom = -0.1 g; w += 0.9 mom - 0.1 g = -0.19 g
        ("nag", {"learning_rate": 0.1, "momentum": 0.9}, [[1 - 0.02375, -2 + 3.04]]),
        # history = g^2; w -= 0.1 g / (|g| + 1e-6)
        ("adagrad", {"learning_rate": 0.1}, [[1 - 0.1 * 0.125 / 0.125001, -2 + 0.1 * 16 / 16.000001]]),
    ]:
        block = Scaled(w0)
        block.initialize()
        trainer = Trainer(block.collect_params(), name, params)
        backward(block, x)
        trainer.step(2)
        assert_close(block.w.data(), expected, rtol=1e-6)


def test_lamb_trust_ratio_is_one_for_zero_weights():
    # r1 = ||w|| = 0, so the step is lr * m_hat / (sqrt(v_hat) + eps) = lr * g / (|g| + eps) ~ lr * sign(g)
    w0 = np.zeros((2, 3))
    block = Scaled(w0)
    block.initialize()
    trainer = Trainer(block.collect_params(), "lamb", {"learning_rate": 0.1})
    with autograd.record():
        out = block(np.float32(X))
    autograd.backward(out)  # gradient x, not w x^2 (which is zero here)
    trainer.step(1)
    assert_close(block.w.data(), -0.1 * np.sign(X), rtol=1e-5)


def test_rmsprop_clip_weights_bounds_the_weights():
    history = train("rmsprop", {"learning_rate": 0.5, "clip_weights": 0.4}, steps=1)
    assert np.abs(history[0]).max() == pytest.approx(0.4)


def test_registered_names_and_errors():
    for name, cls in [("nag", optimizer.NAG), ("adamw", optimizer.AdamW), ("rmsprop", optimizer.RMSProp),
                      ("adagrad", optimizer.AdaGrad), ("adadelta", optimizer.AdaDelta), ("lamb", optimizer.LAMB)]:
        assert type(optimizer.create(name)) is cls
    with pytest.raises(ValueError, match="AdamW: beta1"):
        optimizer.AdamW(beta1=1.0)
    with pytest.raises(ValueError, match="LAMB: lower_bound"):
        optimizer.LAMB(lower_bound=2.0, upper_bound=1.0)
    with pytest.raises(ValueError, match="clip_gradient"):
        optimizer.RMSProp(clip_gradient=-1.0)


# -- optax adapter ---------------------------------------------------------------------------------
def test_optax_adamw_matches_numpy_and_native_adamw():
    tx = optax.adamw(0.01, b1=0.9, b2=0.999, eps=1e-6, weight_decay=0.05)
    got = train(tx, {"clip_gradient": 0.5})
    expected = simulate(np_adamw, 0.01, wd=0.05, clip=0.5)
    for g, e in zip(got, expected):
        assert_close(g, e, rtol=2e-5, atol=1e-6)
    native = train("adamw", {"learning_rate": 0.01, "wd": 0.05, "clip_gradient": 0.5})
    assert_close(native[-1], got[-1], rtol=1e-5)


def test_optax_sees_all_parameters_at_once():
    """clip_by_global_norm needs every gradient of the step: the update is one whole-list call."""
    first, second = Scaled(W0), Scaled(2 * W0[:1])
    first.initialize()
    second.initialize()
    trainer = Trainer({"a": first.w, "b": second.w}, optax.chain(optax.clip_by_global_norm(1.0), optax.sgd(0.1)))
    backward(first)
    backward(second, X[:1])
    trainer.step(1)
    grads = [W0 * X ** 2, 2 * W0[:1] * X[:1] ** 2]
    norm = np.sqrt(sum((g ** 2).sum() for g in grads))
    assert norm > 1.0
    assert_close(first.w.data(), W0 - 0.1 * grads[0] / norm, rtol=1e-5)
    assert_close(second.w.data(), 2 * W0[:1] - 0.1 * grads[1] / norm, rtol=1e-5)
    assert len(trainer._update_programs) == 1


def test_optax_instance_learning_rate_and_lr_mult():
    frozen, free = Scaled(W0, lr_mult=0.0), Scaled(W0)
    frozen.initialize()
    free.initialize()
    trainer = Trainer({"frozen": frozen.w, "free": free.w}, optimizer.Optax(optax.sgd(1.0), learning_rate=0.2))
    backward(frozen)
    backward(free)
    trainer.step(2)
    assert_close(frozen.w.data(), W0)
    assert_close(free.w.data(), W0 - 0.2 * W0 * X ** 2 / 2, rtol=1e-6)  # Trainer lr scales the optax update


def test_optax_state_is_split_per_parameter_saved_and_skipped(tmp_path):
    def make():
        a, b = Scaled(W0), Scaled(-W0)
        a.initialize()
        b.initialize()
        return a, b, Trainer({"a": a.w, "b": b.w}, optax.adam(0.05))

    a, b, trainer = make()
    for _ in range(2):
        backward(a)
        backward(b)
        trainer.step(2)
    trainer.save_states(str(tmp_path / "opt.states"))
    saved = [np.asarray(a.w.data()), np.asarray(b.w.data())]
    backward(a)  # b's gradient is stale: only a is updated, with a count of its own
    trainer.step(2, ignore_stale_grad=True)
    count_a, count_b = (int(trainer._states[p][0]) for p in (a.w, b.w))
    assert (count_a, count_b) == (3, 2)
    np.testing.assert_array_equal(np.asarray(b.w.data()), saved[1])
    after_skip = np.asarray(a.w.data())
    backward(a)
    backward(b)
    trainer.step(2)  # the step count shared by a step comes from its first parameter
    assert [int(trainer._states[p][0]) for p in (a.w, b.w)] == [4, 4]

    a2, b2, trainer2 = make()
    a2.w.set_data(saved[0])
    b2.w.set_data(saved[1])
    trainer2.load_states(str(tmp_path / "opt.states"))
    backward(a2)
    trainer2.step(2, ignore_stale_grad=True)
    np.testing.assert_array_equal(np.asarray(a2.w.data()), after_skip)


def test_optax_rejects_non_transformations():
    with pytest.raises(TypeError, match="Optax: expected an optax GradientTransformation"):
        optimizer.Optax("adam")


@pytest.mark.parametrize("lr", [0.1, 0.0])
def test_sgd_momentum_weight_is_weight_plus_new_momentum_bit_for_bit(lr):
    """The new weight is ``weight + mom`` exactly, as the same step written plainly computes it."""
    import jax
    import jax.numpy as jnp
    rng = np.random.default_rng(0)
    w, g, m = (jnp.asarray(rng.standard_normal((8, 5)), jnp.float32) for _ in range(3))

    def plain(w, g, m, lr):
        mom = 0.9 * m - lr * g
        return w + mom, mom
    sgd = optimizer.SGD(momentum=0.9)
    new_w, (new_m,) = jax.jit(sgd.update_rule)(w, g, (m,), jnp.float32(lr), jnp.float32(0.0))
    want_w, want_m = jax.jit(plain)(w, g, m, jnp.float32(lr))
    np.testing.assert_array_equal(new_m, want_m)
    np.testing.assert_array_equal(new_w, want_w)
    assert_close(new_w, np.asarray(w) + 0.9 * np.asarray(m) - lr * np.asarray(g), rtol=1e-6, atol=1e-6)
