"""hybrid.compile: a whole imperative step as one program, equal to the uncompiled step."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import hybrid
from hybrid import autograd, loss, metric, nn
from hybrid.errors import CompileError

from conftest import assert_close


def model(hybridize, dropout=0.0, optimizer="sgd", opt_params=None, seed=0):
    hybrid.random.seed(seed)
    net = nn.HybridSequential()
    net.add(nn.Dense(16, activation="relu"), nn.BatchNorm(), nn.Dense(3))
    if dropout:
        net.add(nn.Dropout(dropout))
    net.initialize(hybrid.init.Xavier())
    net(np.ones((2, 5), np.float32))
    if hybridize:
        net.hybridize()
    trainer = hybrid.Trainer(net.collect_params(), optimizer,
                             opt_params or {"learning_rate": 0.1, "momentum": 0.9, "wd": 1e-3})
    return net, loss.SoftmaxCrossEntropyLoss(), trainer


def make_step(net, loss_fn, trainer):
    def step(x, y):
        with autograd.record():
            out = loss_fn(net(x), y)
        autograd.backward(out)
        trainer.step(x.shape[0])
        return out
    return step


@pytest.fixture
def batch(rng):
    return rng.standard_normal((8, 5)).astype(np.float32), rng.integers(0, 3, 8).astype(np.int32)


@pytest.mark.parametrize("optimizer,opt_params", [("sgd", None), ("adam", {"learning_rate": 0.01})])
@pytest.mark.parametrize("hybridize", [False, True])
def test_compiled_step_equals_uncompiled(hybridize, optimizer, opt_params, batch):
    x, y = batch
    plain = model(hybridize, optimizer=optimizer, opt_params=opt_params)
    compiled = model(hybridize, optimizer=optimizer, opt_params=opt_params)
    step, fast = make_step(*plain), hybrid.compile(make_step(*compiled))
    for _ in range(3):
        assert_close(fast(x, y), step(x, y), rtol=1e-5, atol=1e-6)
    for p, q in zip(plain[0].collect_params().values(), compiled[0].collect_params().values()):
        assert_close(q.data(), p.data(), rtol=1e-5, atol=1e-6)
    assert compiled[2].optimizer.num_update == plain[2].optimizer.num_update == 3
    assert fast.num_programs == 1


def test_recompiles_only_for_new_signatures(batch):
    x, y = batch
    fast = hybrid.compile(make_step(*model(True)))
    fast(x, y)
    fast(x * 2, y)
    assert fast.num_programs == 1
    fast(x[:4], y[:4])
    assert fast.num_programs == 2


def test_a_step_is_traced_twice_at_its_first_call_and_never_after(batch):
    x, y = batch
    net, loss_fn, trainer = model(True)
    body = make_step(net, loss_fn, trainer)
    runs = []

    def step(x, y):
        runs.append(1)
        return body(x, y)

    fast = hybrid.compile(step)
    fast(x, y)
    assert len(runs) == 2  # one trace finds the state the step touches, one traces the program
    fast(x, y)
    fast(x + 1, y)
    assert len(runs) == 2


def test_state_first_read_in_the_second_trace_is_traced_again():
    a, b = hybrid.Parameter("a", shape=(3,)), hybrid.Parameter("b", shape=(3,))
    for p, value in ((a, [1.0, 2.0, 3.0]), (b, [4.0, 5.0, 6.0])):
        p.initialize()
        p.set_data(np.asarray(value, np.float32))
    runs = []

    def step(x):
        runs.append(1)
        p = a if len(runs) == 1 else b  # Python state that changes between traces
        with autograd.record():
            out = (p.data() * x).sum()
        autograd.backward(out)
        return out

    fast = hybrid.compile(step, keep_grads=True)
    x = jnp.asarray([1.0, 1.0, 2.0])
    assert float(fast(x)) == 4.0 + 5.0 + 12.0
    assert len(runs) == 3  # the second trace read b, which the first had not: a third trace takes it as input
    b.set_data(np.asarray([1.0, 1.0, 1.0], np.float32))
    assert float(fast(x)) == 4.0  # b is an input of the program, not a constant
    assert_close(b.grad(), x)


def test_state_buffers_are_donated_and_written_back(batch):
    x, y = batch
    net, loss_fn, trainer = model(True)
    fast = hybrid.compile(make_step(net, loss_fn, trainer))
    fast(x, y)
    old = net[0].weight.data()
    old_mean = np.asarray(net[1].running_mean.data())
    fast(x, y)
    assert old.is_deleted()
    assert not np.allclose(np.asarray(net[1].running_mean.data()), old_mean)  # BatchNorm state written back
    assert not net[0].weight.data().is_deleted()


def test_whole_step_is_one_program(batch):
    x, y = batch
    fast = hybrid.compile(make_step(*model(True)))
    fast(x, y)
    (program,) = fast._programs.values()
    assert program.jitted._cache_size() == 1
    donated, kept, host = program.state_inputs()
    text = program.jitted.lower(donated, kept, [jnp.asarray(x), jnp.asarray(y)], host).as_text()
    assert text.count("func.func public @main") == 1
    assert "dot_general" in text  # forward, backward and update are all inside it


def test_gradients_are_kept_on_request(batch):
    x, y = batch
    plain = model(True)
    compiled = model(True)
    dropped = model(True)
    step = make_step(*plain)
    kept = hybrid.compile(make_step(*compiled), keep_grads=True)
    dropping = hybrid.compile(make_step(*dropped))
    step(x, y), kept(x, y), dropping(x, y)
    for p, q in zip(plain[0].collect_params().values(), compiled[0].collect_params().values()):
        if p.grad_req != "null":
            assert_close(q.grad(), p.grad(), rtol=1e-5, atol=1e-6)
    with pytest.raises(RuntimeError, match="keep_grads=True"):
        dropped[0][0].weight.grad()


def test_learning_rate_changes_without_recompiling(batch):
    x, y = batch
    net, loss_fn, trainer = model(True, opt_params={"learning_rate": 0.1})
    fast = hybrid.compile(make_step(net, loss_fn, trainer))
    fast(x, y)
    before = np.asarray(net[2].weight.data())
    trainer.set_learning_rate(0.0)
    fast(x, y)
    np.testing.assert_array_equal(np.asarray(net[2].weight.data()), before)
    assert fast.num_programs == 1


def test_dropout_draws_fresh_masks_and_follows_the_seed(batch):
    x, _ = batch
    net = nn.Dropout(0.5)

    @hybrid.compile
    def apply(x):
        with autograd.train_mode():
            return net(x)

    hybrid.random.seed(4)
    first, second = np.asarray(apply(x)), np.asarray(apply(x))
    assert not np.array_equal(first, second)
    hybrid.random.seed(4)
    np.testing.assert_array_equal(np.asarray(apply(x)), first)


def test_grad_req_add_accumulates_across_calls(batch):
    x, y = batch
    net, loss_fn, _ = model(True)
    for p in net.collect_params().values():
        if p.grad_req != "null":
            p.grad_req = "add"

    @hybrid.compile
    def accumulate(x, y):
        with autograd.record():
            out = loss_fn(net(x), y)
        autograd.backward(out)

    accumulate(x, y)
    once = np.asarray(net[0].weight.grad())
    accumulate(x, y)
    assert_close(net[0].weight.grad(), 2 * once, rtol=1e-5)


def test_metrics_update_on_the_host(batch):
    x, y = batch
    net, loss_fn, trainer = model(True)
    accuracy = metric.Accuracy()

    @hybrid.compile
    def step(x, y):
        with autograd.record():
            out = net(x)
            batch_loss = loss_fn(out, y)
        autograd.backward(batch_loss)
        trainer.step(x.shape[0])
        accuracy.update(y, out)
        return out

    out = step(x, y)
    out2 = step(x, y)
    expected = ((np.asarray(out).argmax(1) == y).sum() + (np.asarray(out2).argmax(1) == y).sum()) / 16
    assert accuracy.num_inst == 16
    assert accuracy.get()[1] == pytest.approx(expected)


def test_clear_errors_for_what_cannot_be_compiled(batch):
    x, y = batch
    net, loss_fn, trainer = model(True)

    @hybrid.compile
    def logs_inside(x, y):
        with autograd.record():
            out = loss_fn(net(x), y)
        print(float(out.mean()))
        return out

    with pytest.raises(CompileError, match="logs_inside uses the value of an array in Python"):
        logs_inside(x, y)

    @hybrid.compile
    def returns_python(x):
        return {"loss": 1.0}

    with pytest.raises(CompileError, match="returned a float"):
        returns_python(x)

    other = nn.Dense(2, in_units=5)
    other.initialize()
    trainer2 = hybrid.Trainer(other.collect_params(), "sgd")

    @hybrid.compile
    def stale(x, y):
        with autograd.record():
            out = loss_fn(net(x), y)
        autograd.backward(out)
        trainer2.step(x.shape[0])

    with pytest.raises(hybrid.errors.StaleGradientError):
        stale(x, y)
