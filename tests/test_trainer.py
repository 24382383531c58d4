import jax
import numpy as np
import pytest

import hybrid
from hybrid import HybridBlock, Parameter, Trainer, autograd, init, nn, optimizer
from hybrid._core import lazy as _lazy
from hybrid.errors import StaleGradientError

from conftest import assert_close
from helpers import run_on_cpu_devices


class Scaled(HybridBlock):
    """out = w * x, so d(sum out)/dw = x."""

    def __init__(self, w0, **param_kwargs):
        super().__init__()
        self.w = Parameter("w", shape=(len(w0),), init=init.Constant(np.asarray(w0)), **param_kwargs)

    def forward(self, x):
        return self.w.data() * x


X = np.array([0.5, 4.0], np.float32)


def backward_once(block, x=X):
    with autograd.record():
        out = block(x)
    autograd.backward(out)


def test_sgd_momentum_steps_match_hand_computed_values():
    block = Scaled([1.0, -2.0])
    block.initialize()
    trainer = Trainer(block.collect_params(), "sgd", {"learning_rate": 0.1, "momentum": 0.9, "wd": 0.01})
    backward_once(block)
    trainer.step(2)
    # g = x/2 + wd*w = [0.26, 1.98]; mom = -0.1 g; w += mom
    assert_close(block.w.data(), [0.974, -2.198], rtol=1e-6)
    backward_once(block)
    trainer.step(2)
    # g = [0.25974, 1.97802]; mom = 0.9*[-0.026, -0.198] - 0.1 g = [-0.049374, -0.376002]
    assert_close(block.w.data(), [0.924626, -2.574002], rtol=1e-6)


def test_sgd_nesterov_and_plain_steps():
    block = Scaled([1.0, -2.0])
    block.initialize()
    trainer = Trainer(block.collect_params(), "sgd",
                      {"learning_rate": 0.1, "momentum": 0.9, "wd": 0.01, "nesterov": True})
    backward_once(block)
    trainer.step(2)
    # mom = -0.1 g = [-0.026, -0.198]; w += 0.9 mom - 0.1 g
    assert_close(block.w.data(), [0.9506, -2.3762], rtol=1e-6)
    plain = Scaled([1.0, -2.0])
    plain.initialize()
    trainer = Trainer(plain.collect_params(), "sgd", {"learning_rate": 0.5})
    backward_once(plain)
    trainer.step(1)
    assert_close(plain.w.data(), [0.75, -4.0], rtol=1e-6)


def test_lr_mult_and_wd_mult():
    frozen = Scaled([1.0, 1.0], lr_mult=0.0)
    no_decay = Scaled([1.0, 1.0], wd_mult=0.0)
    frozen.initialize()
    no_decay.initialize()
    params = {"a": frozen.w, "b": no_decay.w}
    trainer = Trainer(params, "sgd", {"learning_rate": 0.1, "wd": 0.5})
    backward_once(frozen)
    backward_once(no_decay)
    trainer.step(1)
    assert_close(frozen.w.data(), [1.0, 1.0])
    assert_close(no_decay.w.data(), 1.0 - 0.1 * X, rtol=1e-6)


def one_weight_step(how, optimizer_params):
    """A hybridized Dense(1) without bias, its weights ones, its SGD trainer, and ``step(x)``: recorded, or
    compiled with ``hybrid.compile``."""
    net = nn.Dense(1, in_units=2, use_bias=False)
    net.initialize(init.One())
    net.hybridize()
    trainer = Trainer(net.collect_params(), "sgd", optimizer_params)

    def step(x):
        with autograd.record():
            loss = net(x).sum()
        loss.backward()
        trainer.step(1)
    return net, trainer, hybrid.compile(step) if how == "compiled" else step


@pytest.mark.parametrize("how", ["recorded", "compiled"])
def test_a_multiplier_changed_between_steps_takes_effect(how):
    net, _, step = one_weight_step(how, {"learning_rate": 1.0, "wd": 0.5})
    x = jax.numpy.ones((1, 2))
    step(x)
    # gradient x = 1, decay 0.5 * w: w = 1 - (1 + 0.5) = -0.5
    assert_close(net.weight.data(), [[-0.5, -0.5]])
    forwards = dict(net._cached_op.entries)
    net.weight.lr_mult = 0.0
    step(x)
    assert_close(net.weight.data(), [[-0.5, -0.5]])
    net.weight.lr_mult, net.weight.wd_mult = 1.0, 0.0
    step(x)
    assert_close(net.weight.data(), [[-1.5, -1.5]])  # w = -0.5 - 1
    # a multiplier concerns the update only: the block's compiled forwards are kept
    assert net._cached_op.entries == forwards


@pytest.mark.parametrize("how", ["recorded", "compiled"])
def test_a_hyperparameter_changed_between_steps_takes_effect(how):
    net, trainer, step = one_weight_step(how, {"learning_rate": 0.5})
    x = jax.numpy.ones((1, 2))
    step(x)
    assert_close(net.weight.data(), [[0.5, 0.5]])
    trainer.optimizer.wd = 1.0
    step(x)
    assert_close(net.weight.data(), [[-0.25, -0.25]])  # w = 0.5 - 0.5 * (1 + 1.0 * 0.5)


def test_an_optimizer_pickles_without_its_trainers_links():
    import pickle
    net = nn.Dense(1, in_units=2)
    net.initialize()
    trainer = Trainer(net.collect_params(), "adam", {"learning_rate": 0.01, "wd": 0.1})
    copied = pickle.loads(pickle.dumps(trainer.optimizer))
    assert copied.hyperparameters() == trainer.optimizer.hyperparameters()
    program = trainer._program(trainer._trainable())
    copied.wd = 0.2  # concerns the copy only
    assert trainer._program(trainer._trainable()) is program


def numpy_adam(w, grads, lr, b1, b2, eps, wd):
    m = np.zeros_like(w)
    v = np.zeros_like(w)
    history = []
    for t, g in enumerate(grads, start=1):
        g = g + wd * w
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g * g
        w = w - lr * np.sqrt(1 - b2 ** t) / (1 - b1 ** t) * m / (np.sqrt(v) + eps)
        history.append(w.copy())
    return history


def test_adam_matches_numpy_step_by_step():
    block = Scaled([1.0, -2.0])
    block.initialize()
    trainer = Trainer(block.collect_params(), "adam", {"learning_rate": 0.01, "wd": 0.1})
    expected = numpy_adam(np.array([1.0, -2.0]), [X.astype(np.float64) / 4] * 3, 0.01, 0.9, 0.999, 1e-8, 0.1)
    for step in range(3):
        backward_once(block)
        trainer.step(4)
        # the gradient x/4 does not depend on w, so the NumPy reference can precompute it
        assert_close(block.w.data(), expected[step], rtol=1e-5)


def test_stale_gradients_raise_or_are_skipped(rng):
    used, unused = nn.Dense(2, in_units=2), nn.Dense(2, in_units=2)
    used.initialize()
    unused.initialize()
    params = {**{f"used.{k}": v for k, v in used.collect_params().items()},
              **{f"unused.{k}": v for k, v in unused.collect_params().items()}}
    trainer = Trainer(params, "sgd", {"learning_rate": 0.1})
    with autograd.record():
        out = used(rng.standard_normal((3, 2)).astype(np.float32))
    autograd.backward(out)
    before = np.asarray(unused.weight.data()).copy()
    with pytest.raises(StaleGradientError, match=r"\['unused.weight', 'unused.bias'\]"):
        trainer.step(3)
    trainer.step(3, ignore_stale_grad=True)
    np.testing.assert_array_equal(np.asarray(unused.weight.data()), before)
    with pytest.raises(StaleGradientError, match="used.weight"):
        trainer.step(3)  # the used gradients were consumed by the last step


def test_the_second_step_compiles_nothing():
    """The optimizer states made on the host are as uncommitted to a device as the initialised weights;
    otherwise the second step, whose weights come out of the first step's program, would compile that
    program again for the new placement of its arguments."""
    net = nn.HybridSequential()
    net.add(nn.Dense(8, activation="tanh", in_units=4), nn.Dense(3, in_units=8))
    net.initialize(init.Xavier())
    net.hybridize()
    trainer = Trainer(net.collect_params(), "sgd", {"learning_rate": 0.1, "momentum": 0.9})
    loss_fn = hybrid.loss.SoftmaxCELoss()
    x, y = np.ones((5, 4), np.float32), np.arange(5) % 3
    compiles = []

    def listen(event, *_args, **_kwargs):
        if event.endswith("backend_compile_duration"):
            compiles.append(event)

    def step():
        with autograd.record():
            loss = loss_fn(net(x), y).mean()
        autograd.backward(loss)
        trainer.step(1)
        return float(loss)

    jax.monitoring.register_event_duration_secs_listener(listen)
    try:
        first = step()
        assert compiles  # the listener sees the first step's compilations
        compiles.clear()
        losses = [step() for _ in range(3)]
    finally:
        jax.monitoring.unregister_event_duration_listener(listen)
    assert compiles == []
    assert losses[-1] < first


def test_one_compiled_program_with_donated_buffers_and_dynamic_lr():
    block = Scaled([1.0, -2.0])
    block.initialize()
    trainer = Trainer(block.collect_params(), "sgd", {"learning_rate": 0.1, "momentum": 0.5})
    for lr in (0.1, 0.2, 0.3):
        trainer.set_learning_rate(lr)
        backward_once(block)
        trainer.step(1)
        # nothing but the parameter held the old weight: the step's program reused its buffer
        *_, donated = next(reversed(_lazy._PROGRAMS))
        assert donated
    old = block.w.data()
    before = np.asarray(old).copy()
    backward_once(block)
    trainer.step(1)
    assert not old.is_deleted()  # held by the caller: kept, with its values
    np.testing.assert_array_equal(np.asarray(old), before)
    assert len(trainer._update_programs) == 1
    assert trainer.learning_rate == pytest.approx(0.3)


def test_update_program_is_one_xla_computation_for_many_parameters():
    net = nn.HybridSequential()
    for _ in range(5):
        net.add(nn.Dense(4, in_units=4))
    net.initialize()
    trainer = Trainer(net.collect_params(), "adam")
    with autograd.record():
        out = net(np.ones((2, 4), np.float32))
    autograd.backward(out)
    trainer.step(2)
    (program,) = trainer._update_programs.values()
    params = list(trainer._params)
    lowered = program[0].lower([p.data() for p in params], [p.grad() for p in params],
                            [trainer._states[p] for p in params], np.float32(0.1), np.float32(1.0), ())
    assert lowered.as_text().count("func.func public @main") == 1


def test_save_and_load_states_resume_identically(tmp_path, rng):
    def make():
        hybrid.random.seed(5)
        net = nn.Dense(3, in_units=4)
        net.initialize()
        return net, Trainer(net.collect_params(), "adam", {"learning_rate": 0.05})

    x = rng.standard_normal((6, 4)).astype(np.float32)

    def train(net, trainer, steps):
        for _ in range(steps):
            with autograd.record():
                out = net(x)
            autograd.backward(out, head_grads=np.asarray(out) * 2)  # d/dout of sum(out^2)
            trainer.step(6)

    net, trainer = make()
    train(net, trainer, 2)
    trainer.save_states(str(tmp_path / "opt.states"))
    net.save_parameters(str(tmp_path / "net.params"))
    train(net, trainer, 2)
    net2, trainer2 = make()
    net2.load_parameters(str(tmp_path / "net.params"))
    trainer2.load_states(str(tmp_path / "opt.states"))
    train(net2, trainer2, 2)
    np.testing.assert_array_equal(np.asarray(net2.weight.data()), np.asarray(net.weight.data()))
    other = Trainer(net2.collect_params(), "sgd")
    with pytest.raises(ValueError, match="states of optimizer Adam"):
        other.load_states(str(tmp_path / "opt.states"))


def test_momenta_follow_recorded_partial_and_eager_steps():
    """The momenta a recorded step stores are the ones the next steps and save_states use, whatever kind
    of step comes next (recorded on all parameters or on some, eager): SGD momentum by hand."""
    net = nn.HybridSequential()
    net.add(nn.Dense(1, in_units=1, use_bias=False), nn.Dense(1, in_units=1, use_bias=False))
    net.initialize(init.One())
    net.hybridize()
    first, second = net[0].weight, net[1].weight
    trainer = Trainer(net.collect_params(), "sgd", {"learning_rate": 0.1, "momentum": 0.5})
    x = jax.numpy.ones((1, 1))
    w, m = np.ones(2), np.zeros(2)

    def recorded(both=True):
        with autograd.record():
            loss = net(x).sum() if both else net[0](x).sum()
        loss.backward()
        trainer.step(1, ignore_stale_grad=not both)

    def expect(grads, active=(0, 1)):
        for i in active:  # Gluon's SGD: m = 0.5 m - 0.1 g; w = w + m (loss w1 * w0: each one's gradient is the other)
            m[i] = 0.5 * m[i] - 0.1 * grads[i]
            w[i] += m[i]

    for _ in range(3):
        g = (w[1], w[0])
        recorded()
        expect(g)
    recorded(both=False)  # only the first weight: gradient 1
    expect((1.0, None), active=(0,))
    g = (w[1], w[0])
    recorded()
    expect(g)
    assert_close([float(first.data()[0, 0]), float(second.data()[0, 0])], w, rtol=1e-6)
    assert_close([float(trainer._states[p][0][0, 0]) for p in (first, second)], m, rtol=1e-6)
    first.accumulate_grad(jax.numpy.full((1, 1), 2.0))  # an eager step on gradients that are arrays
    second.accumulate_grad(jax.numpy.full((1, 1), 3.0))
    trainer.step(1)
    expect((2.0, 3.0))
    g = (w[1], w[0])
    recorded()
    expect(g)
    assert_close([float(first.data()[0, 0]), float(second.data()[0, 0])], w, rtol=1e-6)
    assert_close([float(trainer._states[p][0][0, 0]) for p in (first, second)], m, rtol=1e-6)


def test_optimizer_errors():
    with pytest.raises(ValueError, match="unknown optimizer 'sgdd'"):
        Trainer([Parameter("w", shape=(1,))], "sgdd")
    with pytest.raises(ValueError, match="momentum"):
        optimizer.SGD(momentum=1.5)
    with pytest.raises(TypeError, match="dict"):
        Trainer(Parameter("w", shape=(1,)), "sgd")


STATES_ON_THE_WEIGHTS_DEVICE = """
import jax, jax.numpy as jnp
from hybrid import Trainer, autograd, nn
d1 = jax.devices()[1]
net = nn.HybridSequential()
net.add(nn.Dense(4, in_units=3), nn.Dense(2, in_units=4))
net.initialize(ctx=d1)
trainer = Trainer(net.collect_params(), "adam", {"learning_rate": 0.1})
with autograd.record():
    out = net(jax.device_put(jnp.ones((2, 3)), d1)).sum()
autograd.backward(out)
trainer.step(2)
leaves = [leaf for state in trainer._states.values() for leaf in state]
print(len(leaves), all(leaf.devices() == {d1} for leaf in leaves), net[0].weight.data().devices() == {d1})
"""


def test_optimizer_states_are_made_on_their_weights_device():
    """Two CPU devices in a subprocess: the states filled on the host go to the second device with their weights."""
    out = run_on_cpu_devices(STATES_ON_THE_WEIGHTS_DEVICE)
    assert out.split() == ["12", "True", "True"]  # 4 parameters x (mean, variance, step count)


@pytest.mark.parametrize("name", sorted(set(optimizer.optimizer._REGISTRY) - {"optax"}))
def test_states_made_together_equal_each_optimizers_own(name):
    params = [Parameter(f"p{i}", shape=shape) for i, shape in enumerate([(3, 2), (3,), (3, 2), ()])]
    for p in params:
        p.initialize()
    kwargs = {"momentum": 0.9} if name in ("sgd", "nag") else {}
    trainer = Trainer(params, name, kwargs)
    states = trainer._states_of(params)
    for p, state in zip(params, states):
        expected = trainer.optimizer.create_state_multi_precision(p.data())
        assert len(state) == len(expected)
        for got, want in zip(state, expected):
            assert got.dtype == want.dtype and got.shape == want.shape
            np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
    assert len({id(leaf) for state in states for leaf in state}) == sum(map(len, states))  # no buffer shared


def test_zero_states_are_made_without_compiling(caplog):
    import logging
    params = [Parameter(f"p{i}", shape=(4 + i, 3)) for i in range(3)]
    for p in params:
        p.initialize()
    trainer = Trainer(params, "adam")
    with jax.log_compiles(True), caplog.at_level(logging.WARNING, logger="jax"):
        trainer._states_of(params)
    assert not [r for r in caplog.records if r.getMessage().startswith("Compiling")]
    assert len(trainer._states) == 3
