"""Bad training inputs are refused with errors that say what was expected (issue 13's training-input cases)."""
import math

import jax.numpy as jnp
import numpy as np
import pytest

from hybrid import Trainer, autograd, nn, optimizer
from hybrid.errors import ShapeError


@pytest.mark.parametrize("hybridize", [False, True])
def test_batchnorm_refuses_an_empty_batch_in_training_and_keeps_its_statistics(hybridize):
    bn = nn.BatchNorm(in_channels=3)
    bn.initialize()
    if hybridize:
        bn.hybridize()
    with pytest.raises(ShapeError, match="empty batch"):
        with autograd.record():
            bn(np.zeros((0, 3, 4, 4), np.float32))
    assert np.isfinite(np.asarray(bn.running_mean.data())).all()
    assert np.isfinite(np.asarray(bn.running_var.data())).all()
    assert bn(np.zeros((0, 3, 4, 4), np.float32)).shape == (0, 3, 4, 4)  # predict mode: nothing to estimate


def test_dense_refuses_complex_inputs():
    dense = nn.Dense(2, in_units=3)
    dense.initialize()
    with pytest.raises(TypeError, match="imaginary part"):
        dense(jnp.ones((4, 3), jnp.complex64))


@pytest.mark.parametrize("kwargs, error", [
    ({"learning_rate": float("nan")}, ValueError),
    ({"learning_rate": -0.1}, ValueError),
    ({"learning_rate": "0.1"}, TypeError),
    ({"wd": float("nan")}, ValueError),
    ({"learning_rate": math.inf}, ValueError),
])
def test_optimizer_refuses_bad_hyperparameters(kwargs, error):
    with pytest.raises(error, match=next(iter(kwargs))):
        optimizer.SGD(**kwargs)


def test_set_learning_rate_refuses_nan_and_negative_values():
    net = nn.Dense(1, in_units=1)
    net.initialize()
    trainer = Trainer(net.collect_params(), "sgd", {"learning_rate": 0.1})
    for bad in (float("nan"), -1.0):
        with pytest.raises(ValueError, match="learning_rate"):
            trainer.set_learning_rate(bad)
    assert trainer.learning_rate == pytest.approx(0.1)


@pytest.mark.parametrize("bad", [[1, 2, 3], "abc", None])
@pytest.mark.parametrize("hybridize", [False, True])
def test_a_non_array_input_is_named(bad, hybridize):
    net = nn.HybridSequential()
    net.add(nn.Dense(2, in_units=3))
    net.initialize()
    if hybridize:
        net.hybridize()
    expected = f"Dense expects arrays as inputs, but input 0 is of type {type(bad).__name__}"
    with pytest.raises(TypeError, match=expected):
        net(bad)


def test_trainer_refuses_a_list_of_non_parameters():
    with pytest.raises(TypeError, match="item 0 is of type int"):
        Trainer([1, 2], "sgd")


def _trained_trainer(order):
    import hybrid
    hybrid.random.seed(0)
    a, b = nn.Dense(2, in_units=2), nn.Dense(3, in_units=2)
    a.initialize()
    b.initialize()
    params = {"a.weight": a.weight, "a.bias": a.bias, "b.weight": b.weight, "b.bias": b.bias}
    trainer = Trainer({k: params[k] for k in order}, "adam", {"learning_rate": 0.1})
    with autograd.record():
        loss = a(np.ones((1, 2), np.float32)).sum() + 2 * b(np.ones((1, 2), np.float32)).sum()
    autograd.backward(loss)
    trainer.step(1)
    return trainer, params


def test_trainer_states_are_matched_by_name(tmp_path):
    order = ["a.weight", "a.bias", "b.weight", "b.bias"]
    saved, params = _trained_trainer(order)
    saved.save_states(str(tmp_path / "t.states"))
    reordered = Trainer({k: params[k] for k in reversed(order)}, "adam", {"learning_rate": 0.1})
    reordered.load_states(str(tmp_path / "t.states"))
    for name, param in params.items():
        for mine, theirs in zip(reordered._states[param], saved._states[param]):
            np.testing.assert_array_equal(np.asarray(mine), np.asarray(theirs))


def _rewrite_meta(path, change):
    import json
    with np.load(path) as file:
        arrays = dict(file)
    meta = json.loads(arrays["__meta__"].tobytes().decode())
    change(meta)
    arrays["__meta__"] = np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8)
    np.savez(path, **arrays)


@pytest.mark.parametrize("change, message", [
    (lambda m: m.update(num_update=-5), "num_update"),
    (lambda m: m.update(num_update=10 ** 300), "num_update"),
    (lambda m: m.update(num_update="3"), "damaged"),
    (lambda m: m.pop("optimizer"), "damaged"),
    (lambda m: m["params"][0].update(name=7), "damaged"),
    (lambda m: m["params"][0].update(name="other.weight"), "other parameters"),
])
def test_forged_trainer_state_metadata_is_refused_and_changes_nothing(tmp_path, change, message):
    order = ["a.weight", "a.bias", "b.weight", "b.bias"]
    trainer, params = _trained_trainer(order)
    path = str(tmp_path / "t.states.npz")
    trainer.save_states(path)
    _rewrite_meta(path, change)
    before = {p: [np.asarray(s) for s in trainer._states[p]] for p in params.values()}
    updates = trainer.optimizer.num_update
    with pytest.raises(ValueError, match=message):
        trainer.load_states(path)
    assert trainer.optimizer.num_update == updates
    for p, states in before.items():
        for now, then in zip(trainer._states[p], states):
            np.testing.assert_array_equal(np.asarray(now), then)
