import jax.numpy as jnp
import numpy as np
import pytest

import hybrid
from hybrid import Constant, Parameter, init
from hybrid.errors import DeferredInitializationError, ShapeError, UninitializedParameterError


def test_initialize_creates_data_of_shape_and_dtype():
    p = Parameter("w", shape=(3, 4), dtype="float32", init=init.One())
    p.initialize()
    assert p.data().shape == (3, 4) and p.data().dtype == jnp.float32
    np.testing.assert_array_equal(np.asarray(p.data()), np.ones((3, 4)))
    assert p.shape == (3, 4) and p.dtype == np.float32


def test_data_before_initialize_raises_clear_error():
    p = Parameter("w", shape=(2,))
    with pytest.raises(UninitializedParameterError, match="'w' has not been initialized"):
        p.data()


def test_unknown_shape_without_deferral_is_rejected():
    p = Parameter("w", shape=(0, 3))
    with pytest.raises(ValueError, match="unknown dimensions"):
        p.initialize()


def test_deferred_initialisation_waits_for_shape():
    p = Parameter("w", shape=(0, 3), allow_deferred_init=True, init=init.Constant(2.0))
    p.initialize()
    with pytest.raises(DeferredInitializationError):
        p.data()
    p.shape = (5, 3)
    p.finish_deferred_init()
    np.testing.assert_array_equal(np.asarray(p.data()), np.full((5, 3), 2.0))


def test_shape_setter_refuses_incompatible_shapes():
    p = Parameter("w", shape=(4, 0))
    p.shape = (4, 7)
    with pytest.raises(ShapeError):
        p.shape = (5, 7)
    assert Parameter("v", shape=(-1, 2)).shape == (0, 2)


def test_set_data_checks_shape_and_casts_dtype():
    p = Parameter("w", shape=(2, 2))
    p.initialize()
    p.set_data(np.arange(4, dtype=np.float64).reshape(2, 2))
    assert p.data().dtype == jnp.float32
    with pytest.raises(ShapeError, match=r"expects shape \(2, 2\)"):
        p.set_data(np.zeros((3, 2)))


def test_grad_is_zero_until_written_and_zero_grad_resets():
    p = Parameter("w", shape=(3,))
    p.initialize()
    np.testing.assert_array_equal(np.asarray(p.grad()), np.zeros(3))
    p.accumulate_grad(jnp.ones(3))
    np.testing.assert_array_equal(np.asarray(p.grad()), np.ones(3))
    p.zero_grad()
    np.testing.assert_array_equal(np.asarray(p.grad()), np.zeros(3))


def test_grad_req_add_accumulates_and_null_has_no_grad():
    p = Parameter("w", shape=(2,), grad_req="add")
    p.initialize()
    p.accumulate_grad(jnp.ones(2))
    p.accumulate_grad(jnp.ones(2) * 2)
    np.testing.assert_array_equal(np.asarray(p.grad()), [3.0, 3.0])
    p.grad_req = "null"
    with pytest.raises(RuntimeError, match="grad_req='null'"):
        p.grad()
    with pytest.raises(ValueError, match="grad_req must be one of"):
        p.grad_req = "sometimes"


def test_cast_converts_data_and_grad():
    p = Parameter("w", shape=(2,))
    p.initialize()
    p.grad()
    p.cast("float16")
    assert p.data().dtype == jnp.float16 and p.grad().dtype == jnp.float16 and p.dtype == np.float16


def test_reinitialize_warns_unless_forced():
    p = Parameter("w", shape=(2,), init=init.Zero())
    p.initialize()
    with pytest.warns(UserWarning, match="already initialized"):
        p.initialize(init=init.One())
    np.testing.assert_array_equal(np.asarray(p.data()), [0.0, 0.0])
    p.initialize(init=init.One(), force_reinit=True)
    np.testing.assert_array_equal(np.asarray(p.data()), [1.0, 1.0])


def test_constant_never_gets_a_gradient():
    c = Constant(np.array([[1.0, 2.0]]))
    c.initialize()
    assert c.grad_req == "null" and c.shape == (1, 2) and c.dtype == np.float32
    np.testing.assert_array_equal(np.asarray(c.data()), [[1.0, 2.0]])
    c.grad_req = "write"
    assert c.grad_req == "null"
