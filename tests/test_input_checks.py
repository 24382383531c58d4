"""Bad training inputs are refused with errors that say what was expected (issue 13's training-input cases)."""
import math

import jax.numpy as jnp
import numpy as np
import pytest

from hybrid import Trainer, autograd, nn, optimizer
from hybrid import loss as loss_mod
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


@pytest.mark.parametrize("bad", [[1, "a", 3], "abc", None])
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


# -- loss labels ---------------------------------------------------------------------------
LABEL_CASES = [
    # (loss, inputs before the label, bad label, error, message)
    ("softmax_out_of_range", loss_mod.SoftmaxCELoss(), [np.zeros((2, 3), np.float32)], np.array([3, 0]), ValueError,
     r"label 3 is outside the 3 classes"),
    ("softmax_negative", loss_mod.SoftmaxCELoss(), [np.zeros((2, 3), np.float32)], np.array([-1, 0]), ValueError,
     r"label -1 is outside"),
    ("softmax_fractional", loss_mod.SoftmaxCELoss(), [np.zeros((2, 3), np.float32)], np.array([1.5, 0.0]),
     ValueError, r"whole numbers\), got 1.5"),
    ("ctc_class_of_blank", loss_mod.CTCLoss(), [np.zeros((2, 5, 4), np.float32)], np.array([[1, 3], [2, 0]]),
     ValueError, r"label 3 is outside the 3 classes before the blank"),
    ("cosine_zero", loss_mod.CosineEmbeddingLoss(), [np.ones((2, 3), np.float32)] * 2, np.array([1, 0]), ValueError,
     r"1 \(similar\) or -1 \(dissimilar\), got 0"),
    ("cosine_list", loss_mod.CosineEmbeddingLoss(), [np.ones((2, 3), np.float32)] * 2, [1, -1], TypeError,
     r"CosineEmbeddingLoss: the label \(input 2\) must be an array"),
    ("string_label", loss_mod.L2Loss(), [np.ones((2, 3), np.float32)], np.array(["a", "b"]), TypeError,
     r"L2Loss: the label \(input 1\) must hold real numbers"),
]


@pytest.mark.parametrize("case", LABEL_CASES, ids=[c[0] for c in LABEL_CASES])
def test_losses_refuse_bad_labels_eagerly(case):
    _, loss_fn, inputs, label, error, message = case
    with pytest.raises(error, match=message):
        loss_fn(*inputs, label)


def test_good_labels_pass_and_float_class_indices_are_accepted():
    pred = np.zeros((2, 3), np.float32)
    ce = loss_mod.SoftmaxCELoss()
    assert np.allclose(ce(pred, np.array([2.0, 0.0], np.float32)), np.log(3))
    assert np.allclose(loss_mod.CTCLoss()(np.zeros((2, 5, 4), np.float32), np.array([[1, -1], [2, 0]])).shape, (2,))


def test_hybridized_losses_check_label_values_in_debug_mode_only():
    pred, bad = np.zeros((2, 3), np.float32), jnp.array([5, 0])
    ce = loss_mod.SoftmaxCELoss()
    ce.hybridize()
    assert np.isfinite(np.asarray(ce(pred, bad))).all()  # no host read of the labels by default
    loss_mod.check_label_values(True)
    try:
        with pytest.raises(ValueError, match="label 5 is outside"):
            ce(pred, bad)
    finally:
        loss_mod.check_label_values(False)


def test_ctc_lengths_are_checked():
    with pytest.raises(ValueError, match=r"label_lengths must lie in \[0, 2\]"):
        loss_mod.CTCLoss()(np.zeros((2, 5, 4), np.float32), np.array([[1, 2], [2, 0]]), None, np.array([3, 1]))


@pytest.mark.parametrize("hybridize", [False, True])
def test_dropout_draws_the_same_mask_under_train_mode_and_record(hybridize):
    import hybrid

    class Net(nn.HybridBlock):
        def __init__(self):
            super().__init__()
            self.drop = nn.Dropout(0.5)

        def forward(self, x):
            return self.drop(x) * 2

    x = np.ones((8, 16), np.float32)
    for block in (nn.Dropout(0.5), Net()):
        if hybridize:
            block.hybridize()
        hybrid.random.seed(3)
        with autograd.train_mode():
            plain = np.asarray(block(x))
        hybrid.random.seed(3)
        with autograd.record():
            recorded = np.asarray(block(x))
        assert 0 < (plain == 0).sum() < plain.size  # a real mask
        np.testing.assert_array_equal(plain, recorded)


def test_ctc_padding_beyond_label_lengths_is_not_checked():
    """Entries after label_lengths[i] are padding (any value, as in MXNet); the same call hybridized agrees."""
    pred, label = np.ones((2, 25, 4), np.float32), np.array([[2, 1, 3, 3], [0, 2, 2, 3]])
    lengths = (np.array([20, 20]), np.array([2, 3]))
    eager = loss_mod.CTCLoss()(pred, label, *lengths)
    hybridized = loss_mod.CTCLoss()
    hybridized.hybridize()
    np.testing.assert_allclose(np.asarray(eager), np.asarray(hybridized(pred, label, *lengths)), rtol=1e-6)
    with pytest.raises(ValueError, match="label 3 is outside"):
        loss_mod.CTCLoss()(pred, np.array([[2, 3, 3, 3], [0, 2, 2, 3]]), *lengths)
