"""``mx.test_utils``: MXNet 1.9.1's tolerances and comparison outcomes (fixtures/mxnet_kvstore, made by its
``make_fixtures.py``), the random inputs, numeric gradients against autograd, and the offline data helpers."""
import gzip
import os
import socket
import struct
import zipfile

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import hybrid.mxnet as mx
from hybrid.mxnet import nd
from hybrid.mxnet.handle import NDArray
from helpers import fixture_module

tu = mx.test_utils
cases = fixture_module("mxnet_kvstore")
compare_with_mxnet = fixture_module("mxnet_kvstore", "compare").compare_with_mxnet


@pytest.mark.parametrize("case", ["default_tolerances", "comparisons"])
def test_case_gives_mxnets_results(case):
    compare_with_mxnet(case, cases.CASES[case](mx))


def test_message_names_the_worst_element():
    with pytest.raises(AssertionError) as info:
        tu.assert_almost_equal(nd.array([[1, 2], [3, 4]]), nd.array([[1, 2.01], [3, 4.5]]), names=("mine", "ref"))
    text = str(info.value)
    assert "Location of maximum error: (1, 1), mine=4.00000000, ref=4.50000000" in text
    assert "rtol=1.000000e-04, atol=1.000000e-03" in text and "mismatch 50.000000%: 2 of 4 elements" in text
    with pytest.raises(ValueError, match=r"mine has shape \(2,\) and ref has shape \(3,\), which do not broadcast"):
        tu.assert_almost_equal(np.ones(2), np.ones(3), names=("mine", "ref"))
    with pytest.raises(AssertionError, match=r"a.shape = \(2, 3\) and b.shape = \(3,\)"):
        tu.assert_almost_equal(np.ones((2, 3)), np.ones(3), use_broadcast=False)
    with pytest.raises(AssertionError, match="differ"):
        tu.assert_almost_equal(np.array([True]), np.array([False]))


def test_tolerances_beyond_mxnets_table_and_their_errors():
    assert tu.get_tols(jnp.ones(2, jnp.bfloat16), np.ones(2, np.float32), None, None) == (5e-2, 1e-1)
    assert tu.get_tols(np.ones(2, np.int16), np.ones(2, np.int16), None, None) == (0, 0)
    with pytest.raises(TypeError, match="no default tolerance for dtype complex64; give rtol= and atol="):
        tu.get_tols(np.ones(2, np.complex64), np.ones(2, np.complex64), None, None)
    assert tu.get_tols(np.ones(2, np.complex64), np.ones(2), 0.1, 0.2) == (0.1, 0.2)
    tu.assert_almost_equal(jnp.array([1.0], jnp.bfloat16), jnp.array([1.03], jnp.bfloat16))
    with pytest.raises(AssertionError):
        tu.assert_almost_equal(np.array([1], np.int16), np.array([2], np.int16))


def test_other_comparisons():
    tu.assert_almost_equal_with_err(np.array([1.0, 2.0, 3.0, 4.0]), np.array([1.0, 2.0, 3.0, 9.0]), etol=0.3)
    with pytest.raises(AssertionError, match="more than etol=0.2"):
        tu.assert_almost_equal_with_err(np.array([1.0, 2.0, 3.0, 4.0]), np.array([1.0, 2.0, 3.0, 9.0]), etol=0.2)
    tu.assert_almost_equal_ignore_nan(np.array([1.0, np.nan]), np.array([1.0, 5.0]))
    with pytest.raises(AssertionError):
        tu.assert_almost_equal_ignore_nan(np.array([2.0, np.nan]), np.array([1.0, 5.0]))
    tu.compare_ndarray_tuple((nd.ones((2,)), (nd.zeros((1,)),)), (np.ones(2), (np.zeros(1),)))
    np.testing.assert_array_equal(tu.collapse_sum_like(np.ones((2, 3, 4)), (3, 1)), np.full((3, 1), 8.0))


def test_assert_exception_and_retry():
    tu.assert_exception(int, ValueError, "x")
    with pytest.raises(AssertionError, match="int did not raise ValueError"):
        tu.assert_exception(int, ValueError, "3")
    with pytest.raises(AssertionError, match="did not raise AssertionError"):
        tu.assert_exception(lambda: None, AssertionError)   # MXNet's own assert(False) would be swallowed here
    calls = []

    @tu.retry(3)
    def flaky():
        calls.append(1)
        assert len(calls) >= 2

    flaky()
    assert len(calls) == 2

    @tu.retry(2)
    def failing():
        calls.append(1)
        raise AssertionError("always")

    with pytest.raises(AssertionError, match="always"):
        failing()


def test_same_array_follows_views():
    x = nd.zeros((3, 2))
    assert tu.same_array(x, x) and tu.same_array(x[0:3], x)
    assert not tu.same_array(x.copy(), x)
    np.testing.assert_array_equal(x.asnumpy(), np.zeros((3, 2)))  # restored exactly


# -- random data and contexts --------------------------------------------------------------------------
def test_random_inputs():
    np.random.seed(0)
    for _ in range(20):
        shape = tu.rand_shape_2d(3, 4)
        assert len(shape) == 2 and 1 <= shape[0] <= 3 and 1 <= shape[1] <= 4
        assert all(1 <= d <= 5 for d in tu.rand_shape_3d(5, 5, 5))
        nd_shape = tu.rand_shape_nd(4, dim=2)
        assert len(nd_shape) == 4 and all(1 <= d <= 2 for d in nd_shape)
    assert 0 in {d for _ in range(50) for d in tu.rand_shape_2d(1, 1, allow_zero_size=True)}
    x = tu.rand_ndarray((2, 3), dtype="float16")
    assert isinstance(x, NDArray) and x.shape == (2, 3) and x.dtype == np.float16 and x.context == tu.default_context()
    assert tu.rand_ndarray((4,)).dtype == np.float32
    with pytest.raises(NotImplementedError, match="stype='csr'.*dense"):
        tu.rand_ndarray((2, 2), "csr", density=0.5)
    a, b = tu.random_arrays((2, 3), ())
    assert a.shape == (2, 3) and a.dtype == np.float32 and b.shape == () and b.dtype == np.float32
    assert tu.random_arrays((4,)).shape == (4,)
    u = tu.random_uniform_arrays((100,), low=2.0, high=3.0)
    assert u.min() >= 2.0 and u.max() < 3.0
    assert sorted(tu.random_sample(range(5), 5)) == [0, 1, 2, 3, 4]
    assert tu.default_dtype() is np.float32


def test_default_context_can_be_set():
    assert tu.default_context() == mx.current_context()
    try:
        tu.set_default_context(mx.cpu(0))
        assert tu.default_context() == mx.cpu(0)
    finally:
        tu._default_context.clear()
        jax.config.update("jax_default_device", None)
    with pytest.raises(TypeError, match="mx.Context"):
        tu.set_default_context("cpu")
    assert list(tu.list_gpus()) == list(range(mx.num_gpus()))


def test_environment_sets_and_restores(monkeypatch):
    monkeypatch.setenv("HYBRID_TU_A", "old")
    monkeypatch.delenv("HYBRID_TU_B", raising=False)
    with tu.environment({"HYBRID_TU_A": "new", "HYBRID_TU_B": "1"}):
        assert os.environ["HYBRID_TU_A"] == "new" and os.environ["HYBRID_TU_B"] == "1"
    assert os.environ["HYBRID_TU_A"] == "old" and "HYBRID_TU_B" not in os.environ
    with pytest.raises(RuntimeError):
        with tu.environment("HYBRID_TU_A", None):
            assert "HYBRID_TU_A" not in os.environ
            raise RuntimeError
    assert os.environ["HYBRID_TU_A"] == "old"
    with tu.environment("CD_JOB", "1"):
        assert tu.is_cd_run()
    with tu.environment("CD_JOB", None):
        assert not tu.is_cd_run()


# -- gradients -------------------------------------------------------------------------------------------
def test_numeric_grad_of_a_function():
    grads = tu.numeric_grad(lambda x, y: x * x * y, [np.array([1.0, 2.0]), np.array([3.0, 0.5])], eps=1e-2)
    np.testing.assert_allclose(grads[0], [6.0, 2.0], rtol=1e-3)
    np.testing.assert_allclose(grads[1], [1.0, 4.0], rtol=1e-3)
    by_name = tu.numeric_grad(lambda x: nd.exp(x), {"x": np.zeros((2,))}, eps=1e-3, dtype=np.float64)
    np.testing.assert_allclose(by_name["x"], [1.0, 1.0], rtol=1e-4)  # float32 values unless jax_enable_x64


def test_check_numeric_gradient_passes_for_true_gradients():
    np.random.seed(1)

    def layer(data, weight):
        return nd.tanh(nd.dot(data, weight))

    tu.check_numeric_gradient(layer, [np.random.randn(3, 4), np.random.randn(4, 2)], rtol=1e-2, atol=1e-3)
    tu.check_numeric_gradient(layer, {"data": np.random.randn(2, 4), "weight": np.random.randn(4, 2)},
                              grad_nodes=["weight"], rtol=1e-2, atol=1e-3, dtype=np.float64)
    net = mx.gluon.nn.Dense(3, in_units=4)
    net.initialize()
    tu.check_numeric_gradient(net, [np.random.randn(2, 4)], rtol=1e-2, atol=1e-3)


def _wrong_sin_gradient(x):
    @jax.custom_vjp
    def f(v):
        return jnp.sin(v)

    f.defvjp(lambda v: (jnp.sin(v), v), lambda v, g: (2 * jnp.cos(v) * g,))
    return NDArray(f(x.value))


def test_check_numeric_gradient_fails_for_a_wrong_gradient():
    with pytest.raises(AssertionError, match=r"NUMERICAL_x.*|Location of maximum error: \(\d+,\), NUMERICAL_x="):
        tu.check_numeric_gradient(lambda x: _wrong_sin_gradient(x), [np.array([0.1, 0.5, 1.0])], rtol=1e-2)
    with pytest.raises(ValueError, match=r"grad_nodes \['w'\] are not inputs of the function \(inputs: \['x'\]\)"):
        tu.check_numeric_gradient(lambda x: x * 2, [np.ones(2)], grad_nodes=["w"])
    with pytest.raises(NotImplementedError, match="pass a function of NDArrays"):
        tu.check_numeric_gradient(mx.sym.var("x"), [np.ones(2)])


def test_check_symbolic_forward_and_backward_on_functions():
    a, b = np.array([[1.0, 2.0], [3.0, 4.0]]), np.array([[5.0, 6.0], [7.0, 8.0]])
    outs = tu.check_symbolic_forward(lambda lhs, rhs: nd.dot(lhs, rhs), [a, b], [a @ b])
    assert isinstance(outs[0], NDArray)
    with pytest.raises(AssertionError, match="EXPECTED_output0"):
        tu.check_symbolic_forward(lambda lhs, rhs: nd.dot(lhs, rhs), [a, b], [a @ b + 1])
    grads = tu.check_symbolic_backward(lambda lhs, rhs: lhs * rhs, [a, b], [np.ones((2, 2))], [b, a])
    np.testing.assert_array_equal(grads["lhs"].asnumpy(), b)
    tu.check_symbolic_backward(lambda lhs, rhs: lhs * rhs, {"lhs": a, "rhs": b}, [np.full((2, 2), 2.0)],
                               {"rhs": 2 * a}, grad_req="add")
    with pytest.raises(AssertionError, match="BACKWARD_rhs"):
        tu.check_symbolic_backward(lambda lhs, rhs: lhs * rhs, [a, b], [np.ones((2, 2))], [b, b])
    with pytest.raises(TypeError, match="give expected as a list"):
        tu.check_symbolic_forward(lambda x: x, [a], {"out": a})


# -- files, without a network ----------------------------------------------------------------------------
@pytest.fixture
def no_network(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("a network connection was attempted")
    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)


def _write_idx(path, labels, images):
    with gzip.open(path[0], "wb") as f:
        f.write(struct.pack(">II", 2049, len(labels)) + np.asarray(labels, np.int8).tobytes())
    with gzip.open(path[1], "wb") as f:
        f.write(struct.pack(">IIII", 2051, len(images), 28, 28) + np.asarray(images, np.uint8).tobytes())


def test_download_uses_the_file_in_place_and_names_where_to_put_it(tmp_path, monkeypatch, no_network):
    monkeypatch.chdir(tmp_path)
    url = "https://example.com/files/weights.params"
    with pytest.raises(FileNotFoundError, match="no network calls") as info:
        tu.download(url, dirname="models")
    assert url in str(info.value) and os.path.join(str(tmp_path), "models", "weights.params") in str(info.value)
    os.makedirs("models")
    open(os.path.join("models", "weights.params"), "wb").close()
    assert tu.download(url, dirname="models") == os.path.join("models", "weights.params")
    with pytest.raises(FileNotFoundError, match="overwrite=True"):
        tu.download(url, dirname="models", overwrite=True)


def test_get_mnist_reads_placed_files_and_lists_missing_ones(tmp_path, monkeypatch, no_network):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(FileNotFoundError) as info:
        tu.get_mnist()
    for name in ("train-labels-idx1-ubyte.gz", "train-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz",
                 "t10k-images-idx3-ubyte.gz"):
        assert os.path.join(str(tmp_path), name) in str(info.value)
    images = np.arange(2 * 28 * 28).reshape(2, 28, 28) % 256
    _write_idx(("train-labels-idx1-ubyte.gz", "train-images-idx3-ubyte.gz"), [3, 7], images)
    _write_idx(("t10k-labels-idx1-ubyte.gz", "t10k-images-idx3-ubyte.gz"), [1], images[:1])
    data = tu.get_mnist()
    assert data["train_data"].shape == (2, 1, 28, 28) and data["train_data"].dtype == np.float32
    np.testing.assert_allclose(data["train_data"][1, 0], images[1] / 255, rtol=1e-6)
    assert data["train_label"].tolist() == [3, 7] and data["test_label"].tolist() == [1]


def test_ubyte_and_cifar_archives(tmp_path, monkeypatch, no_network):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(FileNotFoundError, match="mnist.zip"):
        tu.get_mnist_ubyte()
    with pytest.raises(FileNotFoundError, match=r"cifar10.zip"):
        tu.get_cifar10()
    with pytest.raises(FileNotFoundError, match="mnist.pkl.gz"):
        tu.get_mnist_pkl()
    os.makedirs("data")
    with zipfile.ZipFile(os.path.join("data", "mnist.zip"), "w") as archive:
        for name in ("train-images-idx3-ubyte", "train-labels-idx1-ubyte", "t10k-images-idx3-ubyte",
                     "t10k-labels-idx1-ubyte"):
            archive.writestr(name, b"x")
    tu.get_mnist_ubyte()
    assert os.path.exists(os.path.join("data", "t10k-labels-idx1-ubyte"))


def test_names_mxnet_keeps_elsewhere_say_so():
    with pytest.raises(AttributeError, match="tests/python/unittest/common.py"):
        tu.with_seed  # noqa: B018
    with pytest.raises(AttributeError, match="binds Symbols"):
        tu.check_consistency  # noqa: B018
    with pytest.raises(AttributeError, match="has no attribute 'nothing_here'"):
        tu.nothing_here  # noqa: B018
