"""``mx.optimizer`` against MXNet 1.9.1: three ``gluon.Trainer`` steps of every optimizer MXNet registers and
hybrid provides, with MXNet's keywords, on a fixed Dense layer (``fixtures/mxnet_init/cases.py``,
``OPTIMIZERS``); the names hybrid leaves out raise saying what to use.
"""
import numpy as np
import pytest

import hybrid
import hybrid.mxnet as mx
from helpers import fixture_module

cases = fixture_module("mxnet_init")
compare_with_mxnet = fixture_module("mxnet_init", "compare").compare_with_mxnet

# MXNet 1.9.1's registry (mx.optimizer.Optimizer.opt_registry) and, for the names hybrid leaves out, a word
# of what their error proposes
MXNET_NAMES = ["adadelta", "adagrad", "adam", "adamax", "ccsgd", "dcasgd", "ftml", "ftrl", "groupadagrad", "lamb",
               "lars", "lbsgd", "nadam", "nag", "rmsprop", "sgd", "sgld", "signum", "test"]
LEFT_OUT = {"groupadagrad": "optax.adagrad", "lars": "optax.lars", "lbsgd": "lr_scheduler", "sgld": "optax.noisy_sgd",
            "test": "its own tests"}


@pytest.mark.parametrize("case", sorted(cases.OPTIMIZERS))
def test_trainer_steps_give_mxnets_weights(case):
    name, params = cases.OPTIMIZERS[case]
    results = cases._trajectory(mx, name, params, case not in cases.ONE_PARAMETER)
    compare_with_mxnet("optimizers", results, prefix=case + "/", rtol=2e-5, atol=1e-6)


def test_every_optimizer_name_of_mxnet_is_covered():
    tested = {name for name, _ in cases.OPTIMIZERS.values()}
    assert set(MXNET_NAMES) == tested | set(LEFT_OUT)


@pytest.mark.parametrize("name", sorted(LEFT_OUT))
def test_a_left_out_optimizer_says_what_to_use(name):
    with pytest.raises(ValueError, match=f"'{name}'.*not provided.*{LEFT_OUT[name]}"):
        mx.optimizer.create(name)
    net = mx.gluon.nn.Dense(1, in_units=1)
    net.initialize()
    with pytest.raises(ValueError, match="not provided"):
        mx.gluon.Trainer(net.collect_params(), name)


def test_left_out_classes_and_the_updater_say_what_to_use():
    with pytest.raises(ValueError, match="optax.lars"):
        mx.optimizer.LARS
    with pytest.raises(AttributeError, match="compiles the update"):
        mx.optimizer.get_updater
    with pytest.raises(AttributeError, match="no attribute 'Nope'"):
        mx.optimizer.Nope


def test_create_takes_mxnets_keywords():
    opt = mx.optimizer.create("adam", learning_rate=0.5, beta1=0.8)
    compare_with_mxnet("optimizers", {"class": type(opt).__name__, "lr": float(opt.learning_rate),
                                      "beta1": float(opt.beta1)}, prefix="create_")
    nag = mx.optimizer.create("nag")                             # MXNet 1.x's defaults, not hybrid's NAG's
    compare_with_mxnet("optimizers", {"nag": str((float(nag.learning_rate), float(nag.momentum)))}, prefix="defaults_")
    assert isinstance(mx.optimizer.create("AdaGrad", eps=1e-3), mx.optimizer.AdaGrad)
    assert mx.optimizer.create(opt) is opt
    with pytest.raises(ValueError, match="already an optimizer"):
        mx.optimizer.create(opt, learning_rate=1.0)


def test_mxnet1_classes_are_the_alias_names_and_hybrids_own_stay():
    for name in ("AdaGrad", "AdaDelta", "NAG", "Adam", "RMSProp"):
        assert getattr(mx.optimizer, name) is not getattr(hybrid.optimizer, name)
        assert type(hybrid.optimizer.create(name.lower())) is getattr(hybrid.optimizer, name)
    net = mx.gluon.nn.Dense(1, in_units=1)
    net.initialize()
    trainer = mx.gluon.Trainer(net.collect_params(), "adadelta", {"rho": 0.5})
    assert isinstance(trainer.optimizer, mx.optimizer.AdaDelta) and trainer.optimizer.epsilon == 1e-5
    assert isinstance(trainer, hybrid.Trainer)


def test_mxnet1_adagrad_by_hand():
    """history += g**2; w -= lr * (g / sqrt(history + eps) + wd * w), with g the rescaled gradient."""
    p = hybrid.Parameter("w", shape=(2,), init=hybrid.init.Constant(np.array([1.0, -2.0])))
    p.initialize()
    trainer = mx.gluon.Trainer([p], "adagrad", {"learning_rate": 0.1, "wd": 0.5, "eps": 0.25})
    w, history = np.array([1.0, -2.0]), np.zeros(2)
    for grad in ([0.5, 1.0], [-1.0, 2.0]):
        with hybrid.autograd.record():
            loss = (p.data() * np.array(grad, np.float32)).sum() * 2.0
        loss.backward()
        trainer.step(2)                                           # the gradient 2 * grad, rescaled by 1/2
        g = np.array(grad)
        history += g ** 2
        w = w - 0.1 * (g / np.sqrt(history + 0.25) + 0.5 * w)
        np.testing.assert_allclose(p.data(), w, rtol=1e-6)


def test_signum_and_dcasgd_reject_a_momentum_outside_0_1():
    with pytest.raises(ValueError, match="momentum"):
        mx.optimizer.Signum(momentum=1.0)
    with pytest.raises(ValueError, match="momentum"):
        mx.optimizer.DCASGD(momentum=-0.1)


def test_dcasgd_with_momentum_by_hand():
    """MXNet 1.9.1 raises for DCASGD with momentum (it tests an array's truth); the formula it means:
    mom = momentum * mom - lr * (g + wd w + lamda g**2 (w - w_prev)); w += mom."""
    p = hybrid.Parameter("w", shape=(2,), init=hybrid.init.Constant(np.array([1.0, -2.0])))
    p.initialize()
    trainer = mx.gluon.Trainer([p], "dcasgd", {"learning_rate": 0.1, "momentum": 0.5, "lamda": 2.0, "wd": 0.1})
    w, prev, mom = np.array([1.0, -2.0]), np.array([1.0, -2.0]), np.zeros(2)
    for _ in range(3):
        with hybrid.autograd.record():
            loss = (p.data() ** 2).sum()
        loss.backward()
        trainer.step(1)
        g = 2 * w
        mom = 0.5 * mom - 0.1 * (g + 0.1 * w + 2.0 * g ** 2 * (w - prev))
        prev, w = w, w + mom
        np.testing.assert_allclose(p.data(), w, rtol=1e-5)
