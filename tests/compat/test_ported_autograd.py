"""Tests ported from Apache MXNet's tests/python/unittest/test_autograd.py (master), the parts that Gluon
code uses. MXNet's ``x.attach_grad()`` / ``mark_variables`` and ``y.backward()`` then ``x.grad`` become
``autograd.grad(y, x)`` (porting-from-gluon.md, "Gradients"); ``nd.Dropout`` is ``nn.Dropout``."""
import jax.numpy as jnp
import numpy as np
import pytest

from hybrid import autograd, nn
from hybrid.autograd import is_recording, is_training, pause, predict_mode, record, train_mode
from hybrid.errors import AutogradError


def test_training():
    """Port of test_autograd.py::test_training (apache/mxnet master)."""
    x = jnp.ones((10, 10))
    dropout = nn.Dropout(0.5)
    with record():
        y = dropout(x)
        assert not (np.asarray(y) == np.asarray(x)).all()
        with pause():
            y = dropout(x)
            assert (np.asarray(y) == np.asarray(x)).all()


def test_out_grads():
    """Port of test_autograd.py::test_out_grads (apache/mxnet master); ``da = None`` means ones."""
    x = jnp.ones((3, 5))
    da = None
    db = jnp.array([1, 2, 3, 4, 5], jnp.float32)
    dc = jnp.array([5, 4, 3, 2, 1], jnp.float32)
    with record():
        a, b, c = (jnp.squeeze(part, 0) for part in jnp.split(x, 3, axis=0))
        dx = autograd.grad([a, b, c], x, head_grads=[da, db, dc])
    assert (np.asarray(dx) == np.array([[1, 1, 1, 1, 1], [1, 2, 3, 4, 5], [5, 4, 3, 2, 1]])).all()


def test_retain_graph():
    """Port of test_autograd.py::test_retain_graph (apache/mxnet master). ``grad_reqs='add'`` accumulation
    is written as the sum of the two gradients."""
    x = jnp.ones((2, 2))
    with record():
        y = x + 1
        dx = autograd.grad(y, x, retain_graph=False)
    assert (np.asarray(dx) == 1).all()

    with record():
        y = x + 1
        dx = autograd.grad(y, x, retain_graph=True) + autograd.grad(y, x, retain_graph=False)
    assert (np.asarray(dx) == 2).all()

    with pytest.raises(AutogradError):
        with record():
            y = x + 1
            autograd.grad(y, x)
            autograd.grad(y, x)


def test_is_train():
    """Port of test_autograd.py::test_is_train (apache/mxnet master). The original runs several
    ``backward`` calls inside one recording; here each gradient but the last keeps the recording
    (``retain_graph=True``), the documented difference for several backward passes in one scope."""
    x = jnp.ones((10, 10))
    dropout = nn.Dropout(0.5)
    with record(train_mode=True):
        assert is_recording()
        assert is_training()
        y = dropout(x)
        assert np.asarray(y).max() == 2 and np.asarray(y).min() == 0
        grad = autograd.grad(y, x, retain_graph=True)
        assert (np.asarray(grad) == np.asarray(y)).all()

        with predict_mode():
            assert is_recording()
            assert not is_training()
            y = dropout(x)
            assert (np.asarray(y) == np.asarray(x)).all()
            assert (np.asarray(autograd.grad(y, x, retain_graph=True)) == np.asarray(x)).all()

    with record(train_mode=False):
        assert is_recording()
        assert not is_training()
        y = dropout(x)
        assert (np.asarray(y) == np.asarray(x)).all()
        assert (np.asarray(autograd.grad(y, x, retain_graph=True)) == np.asarray(x)).all()

        with train_mode():
            assert is_recording()
            assert is_training()
            y = dropout(x)
            assert np.asarray(y).max() == 2 and np.asarray(y).min() == 0
            assert (np.asarray(autograd.grad(y, x, retain_graph=True)) == np.asarray(y)).all()

    assert not is_recording()
    assert not is_training()
    y = dropout(x)
    assert (np.asarray(y) == np.asarray(x)).all()

    with train_mode():
        assert not is_recording()
        assert is_training()
        y = dropout(x)
        assert np.asarray(y).max() == 2 and np.asarray(y).min() == 0
