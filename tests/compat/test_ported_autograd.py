"""Tests ported from Apache MXNet's tests/python/unittest/test_autograd.py (master and v1.9.1), the parts
that Gluon code uses. MXNet's ``x.attach_grad()`` / ``mark_variables`` and ``y.backward()`` then ``x.grad``
become ``autograd.grad(y, x)`` (porting-from-gluon.md, "Gradients"), or, where the test calls
``backward()``, a Parameter holding ``x`` (``attached`` below) whose ``grad()`` is read; ``nd.Dropout``
is ``nn.Dropout``; ``mx.autograd.Function`` is ``autograd.Function``."""
import jax.numpy as jnp
import numpy as np
import pytest

import hybrid
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


def attached(value, grad_req="write"):
    """MXNet's ``x.attach_grad(grad_req)`` for use with ``backward()``: a Parameter holding ``value``,
    read with ``x.data()``; its gradient is ``x.grad()``."""
    x = hybrid.Parameter("x", shape=np.shape(value), grad_req=grad_req)
    x.initialize()
    x.set_data(jnp.asarray(value, jnp.float32))
    return x


def test_is_train():
    """Port of test_autograd.py::test_is_train (apache/mxnet v1.9.1): several ``backward()`` calls in one
    recording, each on a value computed after the previous one."""
    x = attached(np.ones((10, 10)))
    dropout = nn.Dropout(0.5)
    with record(train_mode=True):
        assert is_recording()
        assert is_training()
        y = dropout(x.data())
        assert np.asarray(y).max() == 2 and np.asarray(y).min() == 0
        y.backward()
        assert (np.asarray(x.grad()) == np.asarray(y)).all()

        with predict_mode():
            assert is_recording()
            assert not is_training()
            y = dropout(x.data())
            assert (np.asarray(y) == np.asarray(x.data())).all()
            y.backward(train_mode=False)
            assert (np.asarray(x.grad()) == np.asarray(x.data())).all()

    with record(train_mode=False):
        assert is_recording()
        assert not is_training()
        y = dropout(x.data())
        assert (np.asarray(y) == np.asarray(x.data())).all()
        y.backward(train_mode=False)
        assert (np.asarray(x.grad()) == np.asarray(x.data())).all()

        with train_mode():
            assert is_recording()
            assert is_training()
            y = dropout(x.data())
            assert np.asarray(y).max() == 2 and np.asarray(y).min() == 0
            y.backward()
            assert (np.asarray(x.grad()) == np.asarray(y)).all()

    assert not is_recording()
    assert not is_training()
    y = dropout(x.data())
    assert (np.asarray(y) == np.asarray(x.data())).all()

    with train_mode():
        assert not is_recording()
        assert is_training()
        y = dropout(x.data())
        assert np.asarray(y).max() == 2 and np.asarray(y).min() == 0


def test_retain_grad():
    """Port of test_autograd.py::test_retain_grad (apache/mxnet v1.9.1), with ``backward()``."""
    x = attached(np.ones((2, 2)), grad_req="add")
    with record():
        y = x.data() + 1
        y.backward(retain_graph=False)
    assert (np.asarray(x.grad()) == 1).all()

    x.zero_grad()
    with record():
        y = x.data() + 1
        y.backward(retain_graph=True)
        y.backward(retain_graph=False)
    assert (np.asarray(x.grad()) == 2).all()

    with pytest.raises(AutogradError):
        with record():
            y = x.data() + 1
            y.backward()
            y.backward()


def test_attach_grad():
    """Port of test_autograd.py::test_attach_grad (apache/mxnet v1.9.1), dense storage only."""
    x = attached(np.zeros((10, 10)))
    with record():
        y = x.data() * 2
        y.backward(out_grad=jnp.ones_like(y))
    assert (np.asarray(x.grad()) == 2).all()


def test_function():
    """Port of test_autograd.py::test_function (apache/mxnet v1.9.1)."""
    class func(autograd.Function):
        def forward(self, x, y):
            m = x / y
            n = x * y
            self.save_for_backward(x, y)
            return m, n

        def backward(self, dm, dn):
            x, y = self.saved_tensors
            dx = dm / y + dn * y
            dy = dn * x - dm * x / y / y
            return dx, dy

    rng = np.random.default_rng(0)
    f = func()
    x = attached(rng.uniform(size=(10,)))
    y = attached(rng.uniform(size=(10,)))
    with record():
        m, n = f(x.data(), y.data())
        autograd.backward([m, n])

    dx1 = np.asarray(x.grad())
    dy1 = np.asarray(y.grad())

    with record():
        autograd.backward([x.data() / y.data(), x.data() * y.data()])

    # Non-zero atol required, as exposed by seed 630179191
    atol = 1e-6
    np.testing.assert_allclose(np.asarray(x.grad()), dx1, rtol=1e-5, atol=atol)
    np.testing.assert_allclose(np.asarray(y.grad()), dy1, rtol=1e-5, atol=atol)


def test_function1():
    """Port of test_autograd.py::test_function1 (apache/mxnet v1.9.1); ``X.wait_to_read()`` is
    ``block_until_ready()``."""
    class Foo(autograd.Function):
        def __init__(self):
            super(Foo, self).__init__()

        def forward(self, X):
            return X + 1

        def backward(self, dY):
            return dY

    with record():
        X = jnp.zeros((3, 4))
        for i in range(5):
            f = Foo()
            X = f(X)
        X.block_until_ready()
    assert (np.asarray(X) == 5).all()


def test_gradient():
    """Port of test_autograd.py::test_gradient (apache/mxnet v1.9.1): a gradient recorded with
    ``create_graph=True`` is differentiated with its own ``backward()``."""
    x = attached(np.ones((1,)))
    with record():
        z = jnp.exp(x.data()) + x.data()
    dx, = autograd.grad(z, [x.data()], create_graph=True)
    assert abs(float(dx[0]) - 3.71828175) < 1e-6
    dx.backward()
    assert abs(float(x.grad()[0]) - 2.71828175) < 1e-6
