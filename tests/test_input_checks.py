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
