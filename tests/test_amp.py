"""Mixed precision (hybrid.amp, hybrid.graph.precision) and low-precision optimizer updates.

References are plain JAX/NumPy computations of the same math with the casts written out."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import hybrid
from hybrid import Trainer, amp, autograd, init, loss, nn

from conftest import assert_close


@pytest.fixture(autouse=True)
def no_global_policy():
    yield
    amp.disable()


def make_mlp(hybridize=False):
    net = nn.HybridSequential()
    net.add(nn.Dense(16, activation="relu", in_units=8), nn.Dense(4, in_units=16))
    net.initialize(init.Xavier())
    if hybridize:
        net.hybridize()
    return net


def values(net):
    return [jnp.asarray(p.data()) for p in net.collect_params().values()]


def ref_forward(vals, x, dtype):
    w0, b0, w1, b1 = [v.astype(dtype) for v in vals]
    h = jax.nn.relu(x.astype(dtype) @ w0.T + b0)
    return h @ w1.T + b1


@pytest.mark.parametrize("hybridize", [False, True], ids=["eager", "hybridized"])
def test_dense_layers_run_in_bfloat16_and_gradients_reach_float32_weights(hybridize, rng):
    amp.init("bfloat16")
    net = make_mlp(hybridize)
    x = jnp.asarray(rng.standard_normal((6, 8)).astype(np.float32))
    y = jnp.asarray(rng.integers(0, 4, 6))
    out = net(x)
    assert out.dtype == jnp.bfloat16 and net[0].weight.data().dtype == jnp.float32
    vals = values(net)
    assert_close(np.asarray(out, np.float32), np.asarray(ref_forward(vals, x, jnp.bfloat16), np.float32),
                 rtol=1e-2, atol=1e-2)
    with autograd.record():
        l = loss.SoftmaxCELoss()(net(x), y)
    assert l.dtype == jnp.float32  # losses compute in float32
    autograd.backward(l)

    def ref_loss(v):
        logits = ref_forward(v, x, jnp.bfloat16).astype(jnp.float32)
        return -jnp.sum(jnp.take_along_axis(jax.nn.log_softmax(logits), y[:, None], axis=1))
    expected = jax.grad(ref_loss)(vals)
    for p, g in zip(net.collect_params().values(), expected):
        assert p.grad().dtype == jnp.float32
        assert_close(p.grad(), g, rtol=2e-2, atol=2e-2)


def test_the_graph_shows_low_and_float32_ops():
    amp.init("bfloat16")
    net = nn.HybridSequential()
    net.add(nn.Dense(8, in_units=4), nn.Activation("relu"))
    net.initialize()
    graph = str(hybrid.inspect(net, np.ones((2, 4), np.float32)).after)
    dense = next(line for line in graph.splitlines() if "dense" in line)
    assert dense.split("=")[0].strip().endswith("bf16[2,8]")  # the dense node's result is bfloat16
    soft = hybrid.inspect(nn.HybridLambda(lambda x: jax.nn.softmax(x)), np.ones((2, 4), jnp.bfloat16))
    assert "bf16" in str(soft.before)  # plain jax.nn code is not an op with a precision trait

    class Softmaxed(nn.HybridBlock):
        def forward(self, x):
            return hybrid.graph.layer_ops.softmax(x)
    graph = str(hybrid.inspect(Softmaxed(), np.ones((2, 4), jnp.bfloat16)).after)
    node = next(line for line in graph.splitlines() if "softmax" in line)
    assert "f32[2,4]" in node.split("=")[0]  # softmax runs in float32 on a bfloat16 input


def test_the_policy_is_part_of_the_cache_key(rng):
    net = make_mlp(hybridize=True)
    x = rng.standard_normal((3, 8)).astype(np.float32)
    assert net(x).dtype == jnp.float32
    amp.init("bfloat16")
    assert net(x).dtype == jnp.bfloat16
    amp.disable()
    assert net(x).dtype == jnp.float32


def test_convert_hybrid_block_shares_parameters_and_has_its_own_policy(rng):
    net = make_mlp(hybridize=True)
    low = amp.convert_hybrid_block(net, target_dtype="bfloat16")
    x = rng.standard_normal((3, 8)).astype(np.float32)
    assert low(x).dtype == jnp.bfloat16 and net(x).dtype == jnp.float32
    assert_close(np.asarray(low(x), np.float32), net(x), rtol=3e-2, atol=3e-2)
    assert low.collect_params()["block.0.weight"] is net[0].weight


def test_bad_policies_are_refused():
    with pytest.raises(ValueError, match="target_dtype must be 'float16' or 'bfloat16'"):
        amp.init("int8")
    with pytest.raises(ValueError, match=r"unknown ops \['matmul'\]"):
        amp.init("float16", fp32_ops=["matmul"])


def synthetic(rng, n):
    x = rng.standard_normal((n, 1, 8, 8)).astype(np.float32)
    y = ((x[:, 0, :4].mean(axis=(1, 2)) > x[:, 0, 4:].mean(axis=(1, 2))).astype(np.int32)
         + 2 * (x[:, 0, :, :4].mean(axis=(1, 2)) > 0).astype(np.int32))
    return x, y


def train_and_score(policy, make, rng_seed=0, steps=150):
    rng = np.random.default_rng(rng_seed)
    x, y = synthetic(rng, 512 + 256)
    hybrid.random.seed(1)
    if policy:
        amp.init(policy)
    net = make()
    net.initialize(init.Xavier())
    net.hybridize()
    trainer = Trainer(net.collect_params(), "adam", {"learning_rate": 0.01})
    loss_fn = loss.SoftmaxCELoss()
    for step in range(steps):
        at = (step * 64) % 512
        with autograd.record():
            l = loss_fn(net(x[at:at + 64]), y[at:at + 64])
        autograd.backward(l)
        trainer.step(64)
        assert np.isfinite(float(l.mean())), f"step {step}"
    pred = np.asarray(net(x[512:]), np.float32).argmax(axis=1)
    amp.disable()
    return np.mean(pred == y[512:])


def sequential(*layers):
    net = nn.HybridSequential()
    net.add(*layers)
    return net


@pytest.mark.parametrize("make", [
    lambda: sequential(nn.Flatten(), nn.Dense(32, activation="relu"), nn.Dense(4)),
    lambda: sequential(nn.Conv2D(8, 3, padding=1, activation="relu"), nn.MaxPool2D(2), nn.Flatten(), nn.Dense(4)),
], ids=["mlp", "cnn"])
def test_bfloat16_training_matches_float32_accuracy(make):
    full = train_and_score(None, make)
    mixed = train_and_score("bfloat16", make)
    assert full > 0.7, full  # four classes: chance is 0.25
    assert abs(mixed - full) <= 0.03, (full, mixed)  # 256 held-out samples: within 8 of them


def adam_ref(w, grads, lr=0.01, b1=0.9, b2=0.999, eps=1e-8):
    """MXNet's Adam on float32 values."""
    m = np.zeros_like(w)
    v = np.zeros_like(w)
    for t, g in enumerate(grads, start=1):
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g * g
        w = w - lr * np.sqrt(1 - b2 ** t) / (1 - b1 ** t) * m / (np.sqrt(v) + eps)
    return w


@pytest.mark.parametrize("multi_precision", [False, True])
def test_adam_on_float16_weights_stays_finite_and_follows_float32_math(multi_precision):
    w0 = np.array([0.5, -0.25, 1.0, 2e-3], np.float32)
    p = hybrid.Parameter("w", shape=(4,), dtype="float16")
    p.initialize()
    p.set_data(w0.astype(np.float16))
    trainer = Trainer([p], "adam", {"learning_rate": 0.01, "multi_precision": multi_precision})
    grads = [np.array([1e-4, -2e-4, 3e-3, 0.0], np.float32) * (k + 1) for k in range(5)]
    weights = []
    for g in grads:
        with autograd.record():
            out = jnp.sum(p.data() * jnp.asarray(g, jnp.float16))
        autograd.backward(out)
        trainer.step(1)
        weights.append(np.asarray(p.data(), np.float32))
    assert p.data().dtype == jnp.float16 and np.isfinite(weights).all()
    fp16_grads = [np.asarray(g.astype(np.float16), np.float32) for g in grads]
    if multi_precision:  # the float32 master follows the float32 math; the weight is its rounding
        master = trainer._states[p][0]
        assert master.dtype == jnp.float32
        assert_close(master, adam_ref(w0.astype(np.float16).astype(np.float32), fp16_grads), rtol=1e-5, atol=1e-7)
        assert_close(weights[-1], np.asarray(master).astype(np.float16).astype(np.float32), rtol=0, atol=0)
    else:  # each step in float32 from the rounded weight
        w = w0.astype(np.float16).astype(np.float32)
        assert_close(weights[0], adam_ref(w, fp16_grads[:1]).astype(np.float16).astype(np.float32), rtol=0, atol=0)


OVERFLOWS = (False, False, True, False, False, True, True)
# scale_window 2 from 8: good, good (x2), overflow (/2), good, good (x2), overflow, overflow
EXPECTED_SCALES = [8.0, 16.0, 8.0, 8.0, 16.0, 8.0, 4.0]


def scaled_sum_setup():
    p = hybrid.Parameter("w", shape=(3,))
    p.initialize()
    p.set_data(np.array([1.0, 2.0, 3.0], np.float32))
    trainer = Trainer([p], "sgd", {"learning_rate": 0.5, "momentum": 0.5})
    amp.init_trainer(trainer, init_scale=8.0, scale_window=2)
    return p, trainer, np.array([0.25, -0.5, 1.0], np.float32)


def expected_weights(g):
    """SGD with momentum 0.5, lr 0.5 on the constant gradient g; overflowed steps change nothing."""
    w, m, out = np.array([1.0, 2.0, 3.0], np.float32), np.zeros(3, np.float32), []
    for overflow in OVERFLOWS:
        if not overflow:
            m = 0.5 * m - 0.5 * g  # the gradient reaches the update unscaled
            w = w + m
        out.append(w)
    return out


def test_dynamic_loss_scale_grows_backs_off_and_skips_overflowed_steps():
    p, trainer, g = scaled_sum_setup()
    scaler = trainer.loss_scaler
    scales = []
    for overflow, w in zip(OVERFLOWS, expected_weights(g)):
        with autograd.record():
            loss_value = jnp.sum(p.data() * (jnp.inf if overflow else 1.0) * g)
        with amp.scale_loss(loss_value, trainer) as scaled:
            assert float(scaled) == pytest.approx(float(loss_value) * scaler.loss_scale) or overflow
            autograd.backward(scaled)
        trainer.step(1)
        assert_close(p.data(), w, rtol=0, atol=1e-6)
        scales.append(scaler.loss_scale)
    assert scales == EXPECTED_SCALES
    assert scaler.skipped_steps == 3 and scaler.good_steps == 0


def test_loss_scaling_in_a_compiled_step_follows_the_same_sequence():
    p, trainer, g = scaled_sum_setup()
    scaler = trainer.loss_scaler

    @hybrid.compile
    def step(factor):
        with autograd.record():
            loss_value = jnp.sum(p.data() * factor * g)
        with amp.scale_loss(loss_value, trainer) as scaled:
            autograd.backward(scaled)
        trainer.step(1)
        return scaled

    scales = []
    for overflow, w in zip(OVERFLOWS, expected_weights(g)):
        scale, before = scaler.loss_scale, np.array(p.data())
        scaled = step(jnp.float32(jnp.inf if overflow else 1.0))
        assert overflow or float(scaled) == pytest.approx(float(np.sum(before * g)) * scale)
        assert_close(p.data(), w, rtol=0, atol=1e-6)
        scales.append(scaler.loss_scale)
    assert scales == EXPECTED_SCALES and scaler.skipped_steps == 3
    assert step.num_programs == 1  # the scale is an input: nothing retraces as it changes


def test_a_scaled_step_does_not_wait_for_the_host():
    net = make_mlp(True)
    trainer = Trainer(net.collect_params(), "adam", {"learning_rate": 0.01})
    amp.init_trainer(trainer)
    x = jnp.ones((4, 8))
    y = jnp.asarray([0, 1, 2, 3])
    loss_fn = loss.SoftmaxCELoss()
    loss_fn.hybridize()

    def step():
        with autograd.record():
            l = loss_fn(net(x), y)
        with amp.scale_loss(l, trainer) as scaled:
            autograd.backward(scaled)
        trainer.step(4)
    step()
    step()
    with jax.transfer_guard_device_to_host("disallow"):  # the overflow check runs inside the step's program
        step()
        step()
    assert trainer.loss_scaler.good_steps == 4


def test_the_overflow_check_updates_donated_buffers_in_place():
    net = nn.HybridSequential()
    net.add(nn.Dense(256, in_units=64), nn.Dense(256, in_units=256), nn.Dense(10, in_units=256))
    net.initialize()
    trainer = Trainer(net.collect_params(), "adam", {"learning_rate": 0.01})
    amp.init_trainer(trainer)
    params = list(net.collect_params().values())
    weights, states = [p.data() for p in params], trainer._states_of(params)
    updated_bytes = sum(a.nbytes for a in weights + [leaf for s in states for leaf in s])
    temps = {}
    for guard in (None, amp.OverflowGuard(True, 2.0, 2000, 1.0)):
        program = trainer._program(params, guard)[0]
        scaler_state = trainer.loss_scaler.state() if guard else ()
        analysis = program.lower(weights, weights, states, np.float32(0.1), np.float32(1.0),
                                 scaler_state).compile().memory_analysis()
        assert analysis.alias_size_in_bytes >= updated_bytes  # weights and states reuse their buffers
        temps["guarded" if guard else "plain"] = analysis.temp_size_in_bytes
    # a select between new and old values would hold a second copy of most of them (about 0.7x)
    assert temps["guarded"] - temps["plain"] < 0.15 * updated_bytes, temps


def test_unscale_inside_a_compiled_step_gives_the_true_gradients():
    p = hybrid.Parameter("w", shape=(2,))
    p.initialize()
    p.set_data(np.array([1.0, 1.0], np.float32))
    trainer = Trainer([p], "sgd", {"learning_rate": 1.0, "clip_gradient": 2.0})
    amp.init_trainer(trainer, init_scale=1024.0)

    @hybrid.compile
    def step():
        with autograd.record():
            loss_value = jnp.sum(p.data() * jnp.asarray([3.0, -1.0]))
        with amp.scale_loss(loss_value, trainer) as scaled:
            autograd.backward(scaled)
        amp.unscale(trainer)
        grad = p.grad()
        trainer.step(1)
        return grad

    assert_close(step(), [3.0, -1.0])
    assert_close(p.data(), [1.0 - 2.0, 1.0 + 1.0], rtol=0, atol=1e-6)  # clipped at 2 after unscaling


def test_unscale_gives_the_true_gradients_before_step():
    p = hybrid.Parameter("w", shape=(2,))
    p.initialize()
    trainer = Trainer([p], "sgd", {"learning_rate": 1.0})
    amp.init_trainer(trainer, init_scale=1024.0)
    with autograd.record():
        loss_value = jnp.sum(p.data() * jnp.asarray([3.0, -1.0]))
    with amp.scale_loss(loss_value, trainer) as scaled:
        autograd.backward(scaled)
    assert_close(p.grad(), [3072.0, -1024.0])
    amp.unscale(trainer)
    assert_close(p.grad(), [3.0, -1.0])
    before = np.asarray(p.data())
    trainer.step(1)
    assert_close(p.data(), before - np.array([3.0, -1.0]), rtol=0, atol=1e-6)
    with pytest.raises(ValueError, match="init_trainer"):
        amp.unscale(Trainer([p], "sgd"))


def test_float16_training_with_adam_and_loss_scaling():
    make = lambda: sequential(nn.Flatten(), nn.Dense(32, activation="relu"), nn.Dense(4))  # noqa: E731
    full = train_and_score(None, make)
    rng = np.random.default_rng(0)
    x, y = synthetic(rng, 512 + 256)
    hybrid.random.seed(1)
    amp.init("float16")
    net = make()
    net.initialize(init.Xavier())
    net.hybridize()
    trainer = Trainer(net.collect_params(), "adam", {"learning_rate": 0.01})
    amp.init_trainer(trainer)
    loss_fn = loss.SoftmaxCELoss()
    for step in range(150):
        at = (step * 64) % 512
        with autograd.record():
            l = loss_fn(net(x[at:at + 64]), y[at:at + 64])
        with amp.scale_loss(l, trainer) as scaled:
            autograd.backward(scaled)
        trainer.step(64)
        assert np.isfinite(float(l.mean())), f"step {step}"
    mixed = np.mean(np.asarray(net(x[512:]), np.float32).argmax(axis=1) == y[512:])
    assert abs(mixed - full) <= 0.03, (full, mixed)
    assert 0 < trainer.loss_scaler.skipped_steps <= 6  # 2**16 overflows float16 at first, then it fits


def test_a_compiled_step_runs_under_the_policy(rng):
    amp.init("bfloat16")
    net = make_mlp()
    trainer = Trainer(net.collect_params(), "sgd", {"learning_rate": 0.1})
    x = jnp.asarray(rng.standard_normal((6, 8)).astype(np.float32))
    y = jnp.asarray(rng.integers(0, 4, 6))
    vals = [jnp.asarray(np.array(p.data())) for p in net.collect_params().values()]  # copies: compile donates

    @hybrid.compile
    def step(x, y):
        with autograd.record():
            out = net(x)
            l = loss.SoftmaxCELoss()(out, y)
        autograd.backward(l)
        trainer.step(6)
        return out

    assert step(x, y).dtype == jnp.bfloat16

    def ref_loss(v):
        logits = ref_forward(v, x, jnp.bfloat16).astype(jnp.float32)
        return -jnp.mean(jnp.take_along_axis(jax.nn.log_softmax(logits), y[:, None], axis=1))
    expected = jax.grad(ref_loss)(vals)
    for p, v, g in zip(net.collect_params().values(), vals, expected):
        assert p.data().dtype == jnp.float32
        assert_close(p.data(), v - 0.1 * g, rtol=2e-2, atol=2e-3)


def float16_trainer_after_steps(init_scale=2.0 ** 20):
    amp.init("float16")
    net = make_mlp()
    trainer = Trainer(net.collect_params(), "adam", {"learning_rate": 0.01})
    amp.init_trainer(trainer, init_scale=init_scale)
    x, y = jnp.ones((4, 8)) * 300.0, jnp.asarray([0, 1, 2, 3])
    for _ in range(3):  # 2**20 and large inputs overflow float16: the scale backs off
        with autograd.record():
            l = loss.SoftmaxCELoss()(net(x), y)
        with amp.scale_loss(l, trainer) as scaled:
            autograd.backward(scaled)
        trainer.step(4)
    return net, trainer


@pytest.mark.parametrize("backend", ["states-file", "npz", "orbax"])
def test_the_loss_scale_is_saved_and_restored_with_the_trainer(backend, tmp_path):
    from hybrid.export import load_checkpoint, save_checkpoint
    net, trainer = float16_trainer_after_steps()
    saved = trainer.loss_scaler.state_dict()
    assert saved["skipped_steps"] > 0 and saved["loss_scale"] < 2.0 ** 20
    other = Trainer(net.collect_params(), "adam", {"learning_rate": 0.01})
    amp.init_trainer(other)
    if backend == "states-file":
        trainer.save_states(str(tmp_path / "t.states"))
        other.load_states(str(tmp_path / "t.states"))
    else:
        save_checkpoint(tmp_path / "ckpt", net, trainer, step=3, backend=backend)
        load_checkpoint(tmp_path / "ckpt", net, other)
    assert other.loss_scaler.state_dict() == saved
    assert other.optimizer.num_update == trainer.optimizer.num_update == 3


def test_a_bad_loss_scaler_state_is_refused_and_changes_nothing():
    scaler = amp.LossScaler(init_scale=8.0)
    for bad in ({"loss_scale": -1.0, "good_steps": 0, "skipped_steps": 0},
                {"loss_scale": 8.0, "good_steps": 1.5, "skipped_steps": 0},
                {"loss_scale": float("nan"), "good_steps": 0, "skipped_steps": 0}, {"loss_scale": 8.0}, [8.0, 0, 0]):
        with pytest.raises(ValueError, match="not a loss scaler state"):
            scaler.load_state_dict(bad)
    assert scaler.state_dict() == {"loss_scale": 8.0, "good_steps": 0, "skipped_steps": 0}
    scaler.load_state_dict({"loss_scale": 512.0, "good_steps": 7, "skipped_steps": 2})
    assert (scaler.loss_scale, scaler.good_steps, scaler.skipped_steps) == (512.0, 7, 2)


def test_a_step_that_updates_nothing_does_not_carry_its_scale_to_the_next():
    a, b = hybrid.Parameter("a", shape=(2,)), hybrid.Parameter("b", shape=(2,))
    for p in (a, b):
        p.initialize()
        p.set_data(np.ones(2, np.float32))
    trainer = Trainer([a], "sgd", {"learning_rate": 0.5})
    amp.init_trainer(trainer, init_scale=64.0)
    with autograd.record():
        other = jnp.sum(b.data() * 3.0)  # a loss that reaches no parameter of the trainer
    with amp.scale_loss(other, trainer) as scaled:
        autograd.backward(scaled)
    trainer.step(1, ignore_stale_grad=True)  # nothing to update
    with autograd.record():
        plain = jnp.sum(a.data() * jnp.asarray([2.0, -4.0]))
    autograd.backward(plain)  # not scaled: the step must not divide by 64
    trainer.step(1)
    assert_close(a.data(), [1.0 - 1.0, 1.0 + 2.0], rtol=0, atol=1e-6)
