"""Visible compilation (hybrid/compile_log.py): log lines, the recompile warning, the cache listing."""
import gc
import logging

import jax.numpy as jnp
import numpy as np
import pytest

import hybrid
from hybrid import Trainer, autograd, compile_log, loss, nn
from hybrid._compiled import cached_op as _cached_op
from hybrid._core import lazy as _lazy


@pytest.fixture
def restore_logging():
    root = logging.getLogger("hybrid")
    level, handlers, limit = root.level, list(root.handlers), compile_log.recompile_limit()
    yield
    compile_log.set_verbosity(recompile_limit=limit)
    root.setLevel(level)
    root.handlers[:] = handlers


def make_net():
    net = nn.HybridSequential()
    net.add(nn.Dense(3, activation="relu", in_units=4), nn.Dense(2, in_units=3))
    net.initialize()
    net.hybridize()
    return net


def messages(caplog, level=logging.INFO):
    return [r.getMessage() for r in caplog.records if r.name == "hybrid.compile" and r.levelno == level]


def test_a_hybridized_block_logs_its_trace_and_compile_once_per_signature(caplog):
    net = make_net()
    with caplog.at_level(logging.INFO, logger="hybrid"):
        net(np.ones((2, 4), np.float32))
        net(np.ones((2, 4), np.float32))
        net(np.ones((5, 4), np.float32))
    lines = messages(caplog)
    name = net.name
    assert [line.split(" for ")[0] for line in lines] == [f"traced HybridSequential {name!r}",
                                                          f"compiled HybridSequential {name!r}"] * 2
    assert "(float32[2,4])" in lines[0] and "(float32[5,4])" in lines[2]
    assert all(line.endswith(" s") for line in lines)


def test_recorded_steps_and_compiled_steps_log_their_compiles(caplog):
    net = make_net()
    loss_fn = loss.L2Loss()
    trainer = Trainer(net.collect_params(), "sgd", {"learning_rate": 0.1})
    x, y = np.ones((3, 4), np.float32), np.zeros((3, 2), np.float32)

    def step(x, y):
        with autograd.record():
            l = loss_fn(net(x), y)
        autograd.backward(l)
        trainer.step(3)
        return l
    with caplog.at_level(logging.INFO, logger="hybrid"):
        step(x, y)
        step(x, y)
    recorded = [m for m in messages(caplog) if m.startswith("compiled a recorded step program")]
    assert len(recorded) == 1 and "input arrays" in recorded[0]
    caplog.clear()
    compiled = hybrid.compile(step)
    with caplog.at_level(logging.INFO, logger="hybrid"):
        compiled(jnp.asarray(x), jnp.asarray(y))
        compiled(jnp.asarray(x), jnp.asarray(y))
    assert [m.split(" in ")[0] for m in messages(caplog) if m.startswith("compiled step")] == [
        "compiled step function 'step' for (float32[3,4], float32[3,2])"]


def test_a_block_compiling_for_many_shapes_warns_once_naming_it_and_the_shapes(caplog, restore_logging):
    hybrid.set_verbosity("WARNING", recompile_limit=3)
    net = make_net()
    with caplog.at_level(logging.WARNING, logger="hybrid"):
        for n in range(1, 7):
            net(np.ones((n, 4), np.float32))
    (warning,) = messages(caplog, logging.WARNING)
    assert f"HybridSequential {net.name!r} has compiled for 4 different input signatures" in warning
    assert "(float32[4,4])" in warning and "Pad" in warning


def test_compiled_steps_warn_too(caplog, restore_logging):
    hybrid.set_verbosity("WARNING", recompile_limit=2)
    step = hybrid.compile(lambda x: x * 2)
    with caplog.at_level(logging.WARNING, logger="hybrid"):
        for n in range(1, 5):
            step(jnp.ones((n,)))
    (warning,) = messages(caplog, logging.WARNING)
    assert "has compiled for 3 different input signatures" in warning


def test_set_verbosity_shows_info_lines_on_stderr(capfd, restore_logging):
    logging.getLogger("hybrid").handlers[:] = []
    hybrid.set_verbosity("info")
    make_net()(np.ones((2, 4), np.float32))
    err = capfd.readouterr().err
    assert "hybrid: traced HybridSequential" in err and "hybrid: compiled HybridSequential" in err


@pytest.mark.parametrize("kwargs, match", [({"level": "LOUD"}, "unknown level 'LOUD'"),
                                           ({"recompile_limit": 0}, "positive integer")])
def test_set_verbosity_rejects_bad_values(kwargs, match, restore_logging):
    with pytest.raises(ValueError, match=match):
        hybrid.set_verbosity(**kwargs)


def test_compile_caches_lists_signatures_and_forgets_changed_blocks():
    net = make_net()
    net(np.ones((2, 4), np.float32))
    with autograd.train_mode():
        net(np.ones((3, 4), np.float32))
    mine = [e for e in hybrid.compile_caches() if e.owner == f"HybridSequential {net.name!r}"]
    assert {(e.kind, e.signature) for e in mine} == {("hybridized block", "(float32[2,4])"),
                                                     ("hybridized block", "(float32[3,4]) training")}
    assert [e for e in hybrid.inspect() if e.owner == f"HybridSequential {net.name!r}"] == mine  # the same listing
    net.add(nn.Dense(1))  # a structural change: its programs go
    assert not [e for e in hybrid.compile_caches() if e.owner == f"HybridSequential {net.name!r}"]
    with pytest.raises(TypeError, match="without a block"):
        hybrid.inspect(None, np.ones(2))


def test_programs_of_a_discarded_block_are_released():
    net = make_net()
    trainer = Trainer(net.collect_params(), "sgd", {"learning_rate": 0.1})
    gc.collect()
    _cached_op.release_unused()
    before = _lazy.cached_programs()
    loss_fn = loss.L2Loss()
    with autograd.record():
        l = loss_fn(net(np.ones((3, 4), np.float32)), np.zeros((3, 2), np.float32))
    autograd.backward(l)
    trainer.step(3)
    assert _lazy.cached_programs() == before + 1
    del l, loss_fn
    gc.collect()
    assert _lazy.cached_programs() == before + 1  # kept for an equal loss block (one made in the next step)
    _cached_op.release_unused()  # (the oldest go once 512 programs are kept)
    assert _lazy.cached_programs() == before
