"""``mxnet.test_utils``: MXNet's testing helpers, for tests written against MXNet 1.9.1.

- comparisons with MXNet's default tolerances by dtype (``default_rtols``/``default_atols``; of two inputs the
  looser one counts): ``assert_almost_equal`` (its message gives the worst element's index and both
  values, under the ``names`` given), ``almost_equal``, ``same``, ``assert_allclose``,
  ``assert_almost_equal_with_err``, ``assert_almost_equal_ignore_nan``, ``assert_exception``, ``retry``;
- random inputs: ``rand_ndarray`` (dense only), ``rand_shape_2d/3d/nd``, ``random_arrays``,
  ``random_uniform_arrays``, ``rand_coord_2d``, ``random_sample``;
- gradients: ``numeric_grad`` and ``check_numeric_gradient`` (central differences against autograd), and
  ``check_symbolic_forward``/``check_symbolic_backward``, all taking a **function of NDArrays** (or a Block)
  where MXNet takes a Symbol: hybrid does not compose graphs from Symbols;
- ``default_context``/``set_default_context``/``default_dtype``, ``environment``, ``is_cd_run``, ``list_gpus``;
- ``download`` and ``get_mnist``, ``get_mnist_ubyte``, ``get_mnist_pkl``, ``get_cifar10`` make **no network
  call**: they use the files where MXNet would have saved them and otherwise raise ``FileNotFoundError``
  naming the URL and the path to place it at.

Beyond MXNet's tolerance table, ``bfloat16`` gets rtol 5e-2 and atol 1e-1, and int16/uint16 are compared
exactly.
"""
from __future__ import annotations

import contextlib
import functools
import gzip
import inspect
import os
import platform
import random as _pyrandom
import struct
import zipfile
from typing import Any, Callable, Iterator, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from . import autograd as _autograd
from .context import Context, current_context, num_gpus
from .handle import NDArray, value_of

__all__ = ["default_context", "set_default_context", "default_dtype", "default_rtols", "default_atols",
           "default_numeric_eps", "effective_dtype", "get_tolerance", "get_tols", "get_atol", "get_rtol", "get_etol",
           "random_arrays", "random_uniform_arrays", "random_sample", "rand_ndarray", "rand_shape_2d",
           "rand_shape_3d", "rand_shape_nd", "rand_coord_2d", "same", "almost_equal", "assert_almost_equal",
           "assert_allclose", "assert_almost_equal_with_err", "assert_almost_equal_ignore_nan", "assert_exception",
           "retry", "numeric_grad", "check_numeric_gradient", "check_symbolic_forward", "check_symbolic_backward",
           "same_array", "collapse_sum_like", "compare_ndarray_tuple", "list_gpus", "download", "get_mnist",
           "get_mnist_iterator",
           "get_mnist_pkl", "get_mnist_ubyte", "get_cifar10", "environment", "is_cd_run", "is_aarch64_run"]

_default_context: list[Context] = []


# -- contexts and dtypes ------------------------------------------------------------------------------------
def default_context() -> Context:
    """The context tests run on: the one given to :func:`set_default_context`, else ``mx.current_context()``."""
    return _default_context[0] if _default_context else current_context()


def set_default_context(ctx: Context) -> None:
    """Make ``ctx`` the default context of the tests, and its device JAX's default device."""
    if not isinstance(ctx, Context):
        raise TypeError(f"set_default_context: ctx must be an mx.Context (mx.cpu(), mx.gpu(0)), got "
                        f"{type(ctx).__name__}")
    jax.config.update("jax_default_device", ctx.jax_device)
    _default_context[:] = [ctx]


def default_dtype() -> type:
    """The dtype of generated test data: ``numpy.float32``."""
    return np.float32


def default_rtols() -> dict:
    """The relative tolerance of a comparison, by dtype (MXNet's table)."""
    table = {np.float16: 1e-2, np.float32: 1e-4, np.float64: 1e-5, jnp.bfloat16: 5e-2}
    return {**{np.dtype(t): v for t, v in table.items()}, **_EXACT}


def default_atols() -> dict:
    """The absolute tolerance of a comparison, by dtype (MXNet's table)."""
    table = {np.float16: 1e-1, np.float32: 1e-3, np.float64: 1e-20, jnp.bfloat16: 1e-1}
    return {**{np.dtype(t): v for t, v in table.items()}, **_EXACT}


_EXACT = {np.dtype(t): 0 for t in (np.bool_, np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32, np.int64,
                                   np.uint64)}


def default_numeric_eps() -> dict:
    """The finite-difference step of ``check_numeric_gradient``, by dtype (powers of two)."""
    return {np.dtype(np.float16): 1.0 / 2 ** 6, np.dtype(np.float32): 1.0 / 2 ** 9,
            np.dtype(np.float64): 1.0 / 2 ** 14}


def _tf32(dat: Any) -> bool:
    """Whether float32 matmuls and convolutions on ``dat``'s device run in TF32 (NVIDIA GPUs from Ampere on,
    unless ``NVIDIA_TF32_OVERRIDE=0`` or JAX's default matmul precision is 'highest'/'float32')."""
    value = value_of(dat)
    if not isinstance(value, jax.Array) or os.environ.get("NVIDIA_TF32_OVERRIDE") == "0":
        return False
    if str(jax.config.jax_default_matmul_precision).lower() in ("highest", "float32"):
        return False
    try:
        device = next(iter(value.devices()))
        return device.platform == "gpu" and float(getattr(device, "compute_capability", 0)) >= 8.0
    except (StopIteration, TypeError, ValueError, AttributeError):
        return False


def effective_dtype(dat: Any) -> np.dtype:
    """The dtype whose tolerances a comparison of ``dat`` uses: its own, except float16 for float32 data on a
    GPU that computes in TF32 (as MXNet)."""
    dtype = np.dtype(_dtype_of(dat))
    if dtype == np.float32 and _tf32(dat):
        return np.dtype(np.float16)
    return dtype


def _dtype_of(dat: Any) -> Any:
    dtype = getattr(value_of(dat), "dtype", None)
    return np.asarray(dat).dtype if dtype is None else dtype


def get_tolerance(dat: Any, tol: Any, default_tol: dict) -> float:
    """``tol`` when it is a number; else its entry (a dict by dtype) or ``default_tol``'s for ``dat``'s
    effective dtype."""
    if isinstance(tol, (int, float, np.number)) and not isinstance(tol, bool):
        return tol
    dtype = effective_dtype(dat)
    tol = {} if tol is None else tol
    if dtype in tol:
        return tol[dtype]
    if dtype not in default_tol:
        raise TypeError(f"test_utils: no default tolerance for dtype {dtype}; give rtol= and atol=")
    return default_tol[dtype]


def get_tols(x: Any, y: Any, rtol: Any, atol: Any) -> tuple[float, float]:
    """The (rtol, atol) of comparing ``x`` and ``y``: the looser default of their dtypes unless given."""
    x = np.array(x) if isinstance(x, (int, float)) else x
    y = np.array(y) if isinstance(y, (int, float)) else y
    return (max(get_tolerance(x, rtol, default_rtols()), get_tolerance(y, rtol, default_rtols())),
            max(get_tolerance(x, atol, default_atols()), get_tolerance(y, atol, default_atols())))


def get_atol(atol: float | None = None, dtype: Any = np.float64) -> float:
    """``atol``, or the default absolute tolerance of ``dtype`` (float64)."""
    return default_atols()[np.dtype(dtype)] if atol is None else atol


def get_rtol(rtol: float | None = None, dtype: Any = np.float64) -> float:
    """``rtol``, or the default relative tolerance of ``dtype`` (float64)."""
    return default_rtols()[np.dtype(dtype)] if rtol is None else rtol


def get_etol(etol: float | None = None) -> float:
    """``etol``, or 0 (no element may differ)."""
    return 0 if etol is None else etol


# -- random data ------------------------------------------------------------------------------------------
def random_arrays(*shapes: Sequence[int]) -> Any:
    """Standard normal NumPy arrays (float32) of the shapes given; one array for one shape."""
    arrays = [np.array(np.random.randn(), dtype=default_dtype()) if len(s) == 0
              else np.random.randn(*s).astype(default_dtype()) for s in shapes]
    return arrays[0] if len(arrays) == 1 else arrays


def random_uniform_arrays(*shapes: Sequence[int], low: float = 0.0, high: float = 1.0, dtype: Any = None) -> Any:
    """Uniform NumPy arrays in [low, high) of the shapes given (float32 unless ``dtype``)."""
    dtype = default_dtype() if dtype is None else dtype
    arrays = [np.random.uniform(low, high, size=s).astype(dtype) for s in shapes]
    return arrays[0] if len(arrays) == 1 else arrays


def random_sample(population: Sequence, k: int) -> list:
    """``k`` distinct elements of ``population`` in random order."""
    population = list(population)
    if not 0 <= k <= len(population):
        raise ValueError(f"random_sample: k={k} is not within 0..{len(population)}")
    return _pyrandom.sample(population, k)


def rand_ndarray(shape: Sequence[int], stype: str = "default", density: float | None = None, dtype: Any = None,
                 modifier_func: Callable | None = None, shuffle_csr_indices: bool = False,
                 distribution: str | None = None, ctx: Context | None = None) -> NDArray:
    """A standard normal NDArray of ``shape`` (float32 unless ``dtype``) on ``ctx`` (default context).

    Only dense storage exists here: ``stype='csr'``/``'row_sparse'`` raise NotImplementedError."""
    if stype != "default":
        raise NotImplementedError(f"rand_ndarray(stype={stype!r}): hybrid's arrays are dense; use "
                                  "stype='default' (sparse storage is not supported)")
    ctx = default_context() if ctx is None else ctx
    values = np.asarray(random_arrays(tuple(shape)), dtype=np.dtype(dtype or np.float32))
    if modifier_func is not None:
        values = np.vectorize(modifier_func)(values).astype(values.dtype)
    return NDArray(jax.device_put(jnp.asarray(values), ctx.jax_device))


def rand_shape_2d(dim0: int = 10, dim1: int = 10, allow_zero_size: bool = False) -> tuple[int, int]:
    """A random 2-D shape, each size in [1, dim] ([0, dim] with ``allow_zero_size``)."""
    low = 0 if allow_zero_size else 1
    return np.random.randint(low, dim0 + 1), np.random.randint(low, dim1 + 1)


def rand_shape_3d(dim0: int = 10, dim1: int = 10, dim2: int = 10,
                  allow_zero_size: bool = False) -> tuple[int, int, int]:
    """A random 3-D shape, each size in [1, dim] ([0, dim] with ``allow_zero_size``)."""
    low = 0 if allow_zero_size else 1
    return np.random.randint(low, dim0 + 1), np.random.randint(low, dim1 + 1), np.random.randint(low, dim2 + 1)


def rand_shape_nd(num_dim: int, dim: int = 10, allow_zero_size: bool = False) -> tuple:
    """A random shape of ``num_dim`` axes, each size in [1, dim] ([0, dim] with ``allow_zero_size``)."""
    low = 0 if allow_zero_size else 1
    return tuple(np.random.randint(low, dim + 1, size=num_dim))


def rand_coord_2d(x_low: int, x_high: int, y_low: int, y_high: int) -> tuple:
    """A random integer point in [x_low, x_high) x [y_low, y_high)."""
    return np.random.randint(x_low, x_high, dtype=np.int64), np.random.randint(y_low, y_high, dtype=np.int64)


# -- comparisons ------------------------------------------------------------------------------------------
def _host(x: Any) -> np.ndarray:
    return np.asarray(value_of(x))


def same(a: Any, b: Any) -> bool:
    """Whether ``a`` and ``b`` have the same shape and values."""
    return bool(np.array_equal(_host(a), _host(b)))


def almost_equal(a: Any, b: Any, rtol: float | None = None, atol: float | None = None, equal_nan: bool = False,
                 use_broadcast: bool = True) -> bool:
    """``numpy.allclose`` with float64's default tolerances (rtol 1e-5, atol 1e-20) unless given."""
    a, b = _host(a), _host(b)
    if not use_broadcast:
        _check_shapes(a, b, ("a", "b"))
    return bool(np.allclose(a, b, rtol=get_rtol(rtol), atol=get_atol(atol), equal_nan=equal_nan))


def _check_shapes(a: np.ndarray, b: np.ndarray, names: Sequence[str]) -> None:
    if a.shape != b.shape:
        raise AssertionError(f"{names[0]}.shape = {a.shape} and {names[1]}.shape = {b.shape} are not equal")


def _violations(a: np.ndarray, b: np.ndarray, rtol: float, atol: float, equal_nan: bool) -> np.ndarray:
    """How far each element is beyond the tolerance: |a - b| / (atol + rtol |b|) (equal values give 0),
    computed in the arrays' own precision (as MXNet reports it)."""
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        equal = np.equal(a, b)
        if equal_nan and a.dtype.kind in "fc" and b.dtype.kind in "fc":
            equal |= np.isnan(a) & np.isnan(b)
        diff = np.where(equal, 0, np.abs(a - b))
        return diff / (atol + rtol * np.abs(b) + 1e-20)


def assert_almost_equal(a: Any, b: Any, rtol: Any = None, atol: Any = None, names: Sequence[str] = ("a", "b"),
                        equal_nan: bool = False, use_broadcast: bool = True, mismatches: tuple = (10, 10)) -> None:
    """Raise AssertionError unless ``a`` and ``b`` (NDArrays, NumPy or JAX arrays, numbers) agree within
    ``atol + rtol * |b|`` element by element (defaults by dtype: :func:`default_rtols`). The message names the
    worst element's index, both values under ``names``, and the share of elements beyond the tolerance."""
    rtol, atol = get_tols(a, b, rtol, atol)
    a, b = _host(a), _host(b)
    if not use_broadcast:
        _check_shapes(a, b, names)
    try:
        a, b = np.broadcast_arrays(a, b)
    except ValueError:
        raise ValueError(f"assert_almost_equal: {names[0]} has shape {a.shape} and {names[1]} has shape {b.shape}, "
                         "which do not broadcast") from None
    if a.dtype == np.bool_ and b.dtype == np.bool_:
        np.testing.assert_equal(a, b, err_msg=f"{names[0]} and {names[1]} differ")
        return
    if np.allclose(a, b, rtol=rtol, atol=atol, equal_nan=equal_nan):
        return
    violation = _violations(a, b, rtol, atol, equal_nan)
    worst = np.unravel_index(np.argmax(np.where(np.isnan(violation), np.inf, violation)), violation.shape) \
        if violation.size else ()
    worst = tuple(int(i) for i in worst)
    beyond = int(np.count_nonzero(~np.isclose(a, b, rtol=rtol, atol=atol, equal_nan=equal_nan)))
    message = (f"Error {float(violation[worst]):f} exceeds tolerance rtol={rtol:e}, atol={atol:e} (mismatch "
               f"{100.0 * beyond / max(a.size, 1):f}%: {beyond} of {a.size} elements).\n"
               f"Location of maximum error: {worst}, {names[0]}={float(a[worst]):.8f}, "
               f"{names[1]}={float(b[worst]):.8f}")
    with np.printoptions(threshold=4, suppress=True):
        raise AssertionError(np.testing.build_err_msg([a, b], err_msg=message, names=tuple(names)))


def assert_allclose(a: Any, b: Any, rtol: float = 1e-07, atol: float = 0, equal_nan: bool = True) -> None:
    """``assert_almost_equal`` with NumPy's ``assert_allclose`` defaults (rtol 1e-7, atol 0, NaN equal)."""
    assert_almost_equal(a, b, rtol=rtol, atol=atol, equal_nan=equal_nan)


def assert_almost_equal_with_err(a: Any, b: Any, rtol: Any = None, atol: Any = None, etol: float | None = None,
                                 names: Sequence[str] = ("a", "b"), equal_nan: bool = False,
                                 mismatches: tuple = (10, 10)) -> None:
    """``assert_almost_equal``, except that a share ``etol`` of the elements may be beyond the tolerance."""
    etol = get_etol(etol)
    if etol <= 0:
        assert_almost_equal(a, b, rtol=rtol, atol=atol, names=names, equal_nan=equal_nan)
        return
    rtol, atol = get_tols(a, b, rtol, atol)
    a, b = np.broadcast_arrays(_host(a), _host(b))
    close = np.isclose(a, b, rtol=rtol, atol=atol, equal_nan=equal_nan)
    share = 1 - np.count_nonzero(close) / max(close.size, 1)
    if share > etol:
        try:
            assert_almost_equal(a, b, rtol=rtol, atol=atol, names=names, equal_nan=equal_nan)
        except AssertionError as exc:
            raise AssertionError(f"{share:.2%} of the elements differ, more than etol={etol}\n{exc}") from None


def assert_almost_equal_ignore_nan(a: Any, b: Any, rtol: Any = None, atol: Any = None,
                                   names: Sequence[str] = ("a", "b")) -> None:
    """``assert_almost_equal`` on the elements where neither array is NaN."""
    a, b = np.broadcast_arrays(np.array(_host(a)), np.array(_host(b)))
    a, b = a.copy(), b.copy()
    nan = np.isnan(a) | np.isnan(b)
    a[nan] = 0
    b[nan] = 0
    assert_almost_equal(a, b, rtol, atol, names)


def assert_exception(f: Callable, exception_type: type, *args: Any, **kwargs: Any) -> None:
    """Raise AssertionError unless ``f(*args, **kwargs)`` raises ``exception_type``."""
    try:
        f(*args, **kwargs)
    except exception_type:
        return
    raise AssertionError(f"{getattr(f, '__name__', f)!s} did not raise {exception_type.__name__}")


def retry(n: int) -> Callable:
    """Decorator: run a test up to ``n`` times until it passes (for stochastic tests)."""
    if n <= 0:
        raise ValueError(f"retry: n must be positive, got {n}")

    def decorate(f: Callable) -> Callable:
        @functools.wraps(f)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            for i in range(n):
                try:
                    return f(*args, **kwargs)
                except AssertionError:
                    if i == n - 1:
                        raise
        return wrapper
    return decorate


def same_array(array1: NDArray, array2: NDArray) -> bool:
    """Whether a write to ``array1`` shows in ``array2`` (the same handle, or views of the same values)."""
    if not (isinstance(array1, NDArray) and isinstance(array2, NDArray)):
        raise TypeError("same_array: both arguments must be NDArray handles")
    if array1 is array2:
        return True
    if array1.shape != array2.shape:
        return False
    saved = array1.value
    array1[:] = saved + 1
    shared = same(array1, array2)
    array1[:] = saved
    return shared


def collapse_sum_like(a: np.ndarray, shape: Sequence[int]) -> np.ndarray:
    """``a`` summed over the axes that broadcasting ``shape`` to ``a.shape`` added or stretched."""
    a, shape = np.asarray(a), tuple(shape)
    if np.prod(shape) == 0 or a.size == 0:
        return np.zeros(shape, dtype=a.dtype)
    lead = a.ndim - len(shape)
    axes = tuple(range(lead)) + tuple(lead + i for i, s in enumerate(shape) if s != a.shape[lead + i])
    return np.sum(a, axis=axes).reshape(shape)


def compare_ndarray_tuple(t1: Any, t2: Any, rtol: Any = None, atol: Any = None) -> None:
    """``assert_almost_equal`` on two arrays, or element by element on two (nested) tuples of them."""
    if t1 is None or t2 is None:
        return
    if isinstance(t1, tuple):
        for s1, s2 in zip(t1, t2):
            compare_ndarray_tuple(s1, s2, rtol, atol)
    else:
        assert_almost_equal(t1, t2, rtol=rtol, atol=atol)


# -- gradients of functions of NDArrays --------------------------------------------------------------------
def _refuse_symbol(fn: Any, name: str) -> None:
    from .symbol import Symbol
    if isinstance(fn, Symbol):
        raise NotImplementedError(f"test_utils.{name}: hybrid does not bind Symbols; pass a function of NDArrays "
                                  "(or a Block) computing the same, e.g. lambda lhs, rhs: mx.nd.dot(lhs, rhs)")
    if not callable(fn):
        raise TypeError(f"test_utils.{name}: expected a function of NDArrays (or a Block), got {type(fn).__name__}")


def _argument_names(fn: Callable, count: int) -> list[str]:
    """The names of ``fn``'s first ``count`` positional parameters (``arg0``, ... where it has none)."""
    try:
        params = [p.name for p in inspect.signature(fn).parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    except (TypeError, ValueError):
        params = []
    return params[:count] + [f"arg{i}" for i in range(len(params), count)]


class _Call:
    """``fn`` applied to a location: a list of positional inputs, or a dict of keyword inputs."""

    def __init__(self, fn: Callable, location: Any, dtype: Any, ctx: Context | None, name: str):
        _refuse_symbol(fn, name)
        self.fn, self.keyword = fn, isinstance(location, dict)
        if not isinstance(location, (dict, list, tuple)):
            location = [location]
        items = list(location.items()) if self.keyword else list(zip(_argument_names(fn, len(location)), location))
        device = (ctx or default_context()).jax_device
        self.names = [k for k, _ in items]
        self.values = {}
        for k, v in items:
            host = _host(v)
            host = host if dtype == "asnumpy" else host.astype(dtype)
            self.values[k] = np.array(host, order="C")
        self.device = device

    def handles(self, values: dict | None = None) -> dict[str, NDArray]:
        values = self.values if values is None else values
        return {k: NDArray(jax.device_put(jnp.asarray(v), self.device)) for k, v in values.items()}

    def __call__(self, handles: dict[str, NDArray]) -> list:
        out = self.fn(**handles) if self.keyword else self.fn(*[handles[k] for k in self.names])
        return list(out) if isinstance(out, (list, tuple)) else [out]


def _numeric(call: _Call, loss: Callable[[list], float], eps: float, train: bool) -> dict[str, np.ndarray]:
    """Central differences ``(loss(x + eps/2) - loss(x - eps/2)) / eps`` for every floating input element."""
    grads = {}
    for name, value in call.values.items():
        grad = np.zeros(value.shape, dtype=value.dtype)
        if value.dtype.kind == "f":
            flat = value.reshape(-1)  # a view: perturbs call.values[name] in place
            for i in range(flat.size):
                old = flat[i]
                flat[i] = old + eps / 2.0
                with _mode(train):
                    plus = loss(call(call.handles()))
                flat[i] = old - eps / 2.0
                with _mode(train):
                    minus = loss(call(call.handles()))
                flat[i] = old
                grad.reshape(-1)[i] = (plus - minus) / eps
        grads[name] = grad
    return grads


def _mode(train: bool) -> Any:
    return _autograd.train_mode() if train else _autograd.predict_mode()


def numeric_grad(fn: Callable, location: Any, aux_states: Any = None, eps: float = 1e-4,
                 use_forward_train: bool = True, dtype: Any = np.float32) -> Any:
    """The finite-difference gradient of the sum of ``fn``'s first output at ``location`` (a list of
    positional inputs or a dict of keyword inputs, as NumPy arrays or NDArrays), as NumPy arrays of ``dtype``
    laid out as ``location``. MXNet's takes an executor; here ``fn`` is a function of NDArrays."""
    call = _Call(fn, location, dtype, None, "numeric_grad")
    grads = _numeric(call, lambda outs: float(np.sum(_host(outs[0]).astype(np.float64))), eps, use_forward_train)
    return grads if call.keyword else [grads[k] for k in call.names]


def _recorded_grads(call: _Call, nodes: Sequence[str], head_grads: Any, train: bool,
                    reqs: dict[str, str]) -> tuple[list, dict[str, NDArray]]:
    """The outputs of ``call`` recorded with gradients attached to ``nodes``, and those gradients after
    ``backward(head_grads)``."""
    handles = call.handles()
    for name in nodes:
        handles[name].attach_grad(reqs.get(name, "write"))
    with _autograd.record(train_mode=train):
        outs = call(handles)
    _autograd.backward(outs if head_grads is None else outs[:len(head_grads)], head_grads)
    return outs, {name: handles[name].grad for name in nodes}


def _grad_nodes(call: _Call, grad_nodes: Any, name: str) -> tuple[list[str], dict[str, str]]:
    if grad_nodes is None:
        nodes, reqs = list(call.names), {}
    elif isinstance(grad_nodes, dict):
        nodes, reqs = list(grad_nodes), dict(grad_nodes)
    elif isinstance(grad_nodes, (list, tuple)):
        nodes, reqs = list(grad_nodes), {}
    else:
        raise TypeError(f"test_utils.{name}: grad_nodes must be None, a list of input names or a dict of name -> "
                        f"grad_req, got {type(grad_nodes).__name__}")
    unknown = [n for n in nodes if n not in call.values]
    if unknown:
        raise ValueError(f"test_utils.{name}: grad_nodes {unknown} are not inputs of the function (inputs: "
                         f"{call.names})")
    bad = {n: r for n, r in reqs.items() if r not in ("write", "add", "null")}
    if bad:
        raise ValueError(f"test_utils.{name}: grad_req must be 'write', 'add' or 'null', got {bad}")
    return [n for n in nodes if reqs.get(n) != "null"], reqs


def check_numeric_gradient(fn: Callable, location: Any, aux_states: Any = None, numeric_eps: Any = None,
                           rtol: Any = None, atol: Any = None, grad_nodes: Any = None, use_forward_train: bool = True,
                           ctx: Context | None = None, grad_stype_dict: Any = None, dtype: Any = np.float32) -> None:
    """Check autograd's gradients of ``fn`` (a function of NDArrays, or a Block) at ``location`` against
    central differences, as MXNet does: both of ``sum(fn(x)[0] * P)`` for a random projection ``P``, compared
    with :func:`assert_almost_equal` under the names ``NUMERICAL_<input>`` and ``BACKWARD_<input>``.

    ``location`` is a list of positional inputs or a dict of keyword inputs (cast to ``dtype``); ``grad_nodes``
    the names of the inputs to check (all by default; positional inputs are named by ``fn``'s parameters)."""
    if np.dtype(dtype) not in (np.float16, np.float32, np.float64):
        raise ValueError(f"check_numeric_gradient: dtype must be float16, float32 or float64, got {dtype}")
    call = _Call(fn, location, dtype, ctx, "check_numeric_gradient")
    nodes, reqs = _grad_nodes(call, grad_nodes, "check_numeric_gradient")
    with _mode(use_forward_train):
        first = call(call.handles())[0]
    projection = (np.random.rand(*first.shape) + 0.1).astype(_host(first).dtype)
    eps = get_tolerance(first, numeric_eps, default_numeric_eps())
    if np.dtype(dtype) in (np.float16, np.float32) and eps < 1e-5:
        raise ValueError(f"check_numeric_gradient: numeric_eps={eps} is too small for {np.dtype(dtype).name}")
    outs, grads = _recorded_grads(call, nodes, [NDArray(jnp.asarray(projection))], True, reqs)
    numeric = _numeric(call, lambda outs: float(np.sum(_host(outs[0]).astype(np.float64) * projection)), eps,
                       use_forward_train)
    for name in nodes:
        backward = grads[name]
        if backward is None:
            raise AssertionError(f"check_numeric_gradient: input {name!r} has no gradient")
        assert_almost_equal(numeric[name], backward, rtol, atol, (f"NUMERICAL_{name}", f"BACKWARD_{name}"))


def check_symbolic_forward(fn: Callable, location: Any, expected: Any, rtol: Any = None, atol: Any = None,
                           aux_states: Any = None, ctx: Context | None = None, equal_nan: bool = False,
                           dtype: Any = np.float32) -> list:
    """Compare the outputs of ``fn`` (a function of NDArrays, or a Block, where MXNet takes a Symbol) at
    ``location`` with ``expected`` (a list, one per output); return the outputs."""
    call = _Call(fn, location, dtype, ctx, "check_symbolic_forward")
    with _autograd.predict_mode():
        outs = call(call.handles())
    expected = _listed_expected(expected, len(outs), "check_symbolic_forward")
    for i, (want, got) in enumerate(zip(expected, outs)):
        assert_almost_equal(want, got, rtol, atol, (f"EXPECTED_output{i}", f"FORWARD_output{i}"),
                            equal_nan=equal_nan)
    return outs


def _listed_expected(expected: Any, count: int, name: str) -> list:
    if isinstance(expected, dict):
        raise TypeError(f"test_utils.{name}: the outputs of a function have no names; give expected as a list, "
                        "one array per output")
    expected = list(expected) if isinstance(expected, (list, tuple)) else [expected]
    if len(expected) != count:
        raise ValueError(f"test_utils.{name}: {len(expected)} expected arrays for {count} outputs")
    return expected


def check_symbolic_backward(fn: Callable, location: Any, out_grads: Any, expected: Any, rtol: Any = None,
                            atol: Any = None, aux_states: Any = None, grad_req: Any = "write",
                            ctx: Context | None = None, grad_stypes: Any = None, equal_nan: bool = False,
                            dtype: Any = np.float32) -> dict:
    """Compare the gradients of ``fn``'s inputs after ``backward(out_grads)`` (one head gradient per output;
    None for ones) with ``expected`` (a list in input order, or a dict by input name); return them by name."""
    call = _Call(fn, location, dtype, ctx, "check_symbolic_backward")
    if isinstance(expected, dict):
        unknown = [k for k in expected if k not in call.values]
        if unknown:
            raise ValueError(f"check_symbolic_backward: expected names {unknown} are not inputs ({call.names})")
    else:
        expected = dict(zip(call.names, expected if isinstance(expected, (list, tuple)) else [expected]))
    if isinstance(grad_req, str):
        reqs = {k: grad_req for k in call.names}
    elif isinstance(grad_req, (list, tuple)):
        reqs = dict(zip(call.names, grad_req))
    else:
        reqs = dict(grad_req)
    nodes, reqs = _grad_nodes(call, {k: reqs.get(k, "write") for k in expected}, "check_symbolic_backward")
    head_grads = None
    if out_grads is not None:
        listed = list(out_grads) if isinstance(out_grads, (list, tuple)) else [out_grads]
        head_grads = [g if isinstance(g, NDArray) else NDArray(jnp.asarray(_host(g), dtype=None if dtype == "asnumpy"
                                                                             else dtype)) for g in listed]
    _, grads = _recorded_grads(call, nodes, head_grads, True, reqs)
    for name in nodes:
        assert_almost_equal(expected[name], grads[name], rtol, atol, (f"EXPECTED_{name}", f"BACKWARD_{name}"),
                            equal_nan=equal_nan)
    return grads


# -- data files, without a network ------------------------------------------------------------------------
_MNIST = "http://data.mxnet.io/data/mnist/"
_MNIST_FILES = ("train-labels-idx1-ubyte.gz", "train-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz",
                "t10k-images-idx3-ubyte.gz")


def _target(url: str, fname: str | None, dirname: str | None) -> str:
    fname = url.split("/")[-1] if fname is None else fname
    return fname if dirname is None else os.path.join(dirname, fname)


def _missing(files: Sequence[tuple[str, str]], what: str) -> FileNotFoundError:
    lines = "\n".join(f"  {url}\n    -> {os.path.abspath(path)}" for url, path in files)
    return FileNotFoundError(f"{what}: hybrid makes no network calls. Download these files yourself and place "
                             f"them as shown (they are used as they are from then on):\n{lines}")


def download(url: str, fname: str | None = None, dirname: str | None = None, overwrite: bool = False,
             retries: int = 5) -> str:
    """The path MXNet would download ``url`` to (``fname``, default the URL's last part, in ``dirname``) when
    the file is there; FileNotFoundError naming the URL and that path when it is not (no network call)."""
    path = _target(url, fname, dirname)
    if not overwrite and os.path.exists(path):
        return path
    raise _missing([(url, path)], f"test_utils.download({url!r})" + (" with overwrite=True" if overwrite else ""))


def _read_mnist(labels: str, images: str) -> tuple[np.ndarray, np.ndarray]:
    with gzip.open(labels) as f:
        struct.unpack(">II", f.read(8))
        label = np.frombuffer(f.read(), dtype=np.int8)
    with gzip.open(images, "rb") as f:
        _, _, rows, cols = struct.unpack(">IIII", f.read(16))
        image = np.frombuffer(f.read(), dtype=np.uint8).reshape(len(label), 1, rows, cols)
    return label, image.astype(np.float32) / 255


def get_mnist() -> dict[str, np.ndarray]:
    """MNIST from the four ``*-ubyte.gz`` files in the current directory: ``train_data`` (N, 1, 28, 28)
    float32 in [0, 1], ``train_label`` int8, ``test_data``, ``test_label``."""
    missing = [(_MNIST + f, f) for f in _MNIST_FILES if not os.path.exists(f)]
    if missing:
        raise _missing(missing, "test_utils.get_mnist")
    train_label, train_data = _read_mnist(_MNIST_FILES[0], _MNIST_FILES[1])
    test_label, test_data = _read_mnist(_MNIST_FILES[2], _MNIST_FILES[3])
    return {"train_data": train_data, "train_label": train_label, "test_data": test_data, "test_label": test_label}


def get_mnist_pkl() -> None:
    """Check that ``data/mnist.pkl.gz`` is there (FileNotFoundError saying where to place it)."""
    download("http://deeplearning.net/data/mnist/mnist.pkl.gz", dirname="data")


def _unzip_or_require(files: Sequence[str], url: str, zip_path: str, what: str) -> None:
    if all(os.path.exists(f) for f in files):
        return
    if not os.path.exists(zip_path):
        raise _missing([(url, zip_path)], what)
    with zipfile.ZipFile(zip_path) as archive:
        archive.extractall("data")


def get_mnist_ubyte() -> None:
    """Make sure ``data/`` holds MNIST's four ubyte files, extracting ``data/mnist.zip`` when they are not
    there (FileNotFoundError saying where to place the zip when neither is)."""
    files = [os.path.join("data", f[:-3]) for f in _MNIST_FILES]
    _unzip_or_require(files, "http://data.mxnet.io/mxnet/data/mnist.zip", os.path.join("data", "mnist.zip"),
                      "test_utils.get_mnist_ubyte")


def get_mnist_iterator(batch_size: int, input_shape: Sequence[int], num_parts: int = 1,
                       part_index: int = 0) -> tuple:
    """MXNet's MNIST iterators ``(train, val)`` over ``data/``'s ubyte files (see :func:`get_mnist_ubyte`), each
    an ``MNISTIter`` with its default shuffle (MXNet's order); images flat unless ``input_shape`` has three
    dimensions."""
    from .io import MNISTIter
    get_mnist_ubyte()
    flat = len(input_shape) != 3
    train = MNISTIter(image="data/train-images-idx3-ubyte", label="data/train-labels-idx1-ubyte",
                      batch_size=batch_size, shuffle=True, flat=flat, num_parts=num_parts, part_index=part_index)
    val = MNISTIter(image="data/t10k-images-idx3-ubyte", label="data/t10k-labels-idx1-ubyte",
                    batch_size=batch_size, flat=flat, num_parts=num_parts, part_index=part_index)
    return train, val


def get_cifar10() -> None:
    """Make sure ``data/cifar/`` holds ``train.rec``, ``test.rec``, ``train.lst``, ``test.lst``, extracting
    ``data/cifar10.zip`` when they are not there (FileNotFoundError saying where to place it otherwise)."""
    files = [os.path.join("data", "cifar", f) for f in ("train.rec", "test.rec", "train.lst", "test.lst")]
    _unzip_or_require(files, "http://data.mxnet.io/mxnet/data/cifar10.zip", os.path.join("data", "cifar10.zip"),
                      "test_utils.get_cifar10")


# -- environment ------------------------------------------------------------------------------------------
@contextlib.contextmanager
def environment(*args: Any) -> Iterator[None]:
    """Set environment variables for the ``with`` body and restore them after: ``environment(name, value)``
    or ``environment({name: value, ...})``; a value of None unsets the variable."""
    if len(args) == 1 and isinstance(args[0], dict):
        variables = dict(args[0])
    elif len(args) == 2:
        variables = {args[0]: args[1]}
    else:
        raise TypeError("environment: give a name and a value, or one dict of name -> value")
    saved = {name: os.environ.get(name) for name in variables}

    def apply(values: dict) -> None:
        for name, value in values.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = str(value)
    apply(variables)
    try:
        yield
    finally:
        apply(saved)


def is_cd_run() -> bool:
    """Whether the tests run as part of MXNet's continuous delivery (``CD_JOB=1``)."""
    return os.environ.get("CD_JOB", 0) == "1"


def is_aarch64_run() -> bool:
    """Whether the machine is an aarch64 one."""
    return platform.machine() == "aarch64"


def list_gpus() -> range:
    """The indices of the GPUs JAX sees."""
    return range(num_gpus())


_ABSENT = {
    "with_seed": "MXNet 1.9.1 has it in its own tests (tests/python/unittest/common.py), not in test_utils; seed "
                 "with mx.random.seed(n) and np.random.seed(n)",
    "check_consistency": "it binds Symbols on several contexts; compare a function's outputs with "
                         "assert_almost_equal",
    "check_speed": "it binds Symbols; time a function with timeit, hybridized blocks with hybrid.inspect",
    "simple_forward": "it binds a Symbol; call the function or Block",
    "download_model": "no network calls: place the -symbol.json and .params files yourself and load them with "
                      "gluon.SymbolBlock.imports",
    "rand_sparse_ndarray": "hybrid's arrays are dense",
    "create_sparse_array": "hybrid's arrays are dense",
}


def __getattr__(name: str) -> Any:
    if name in _ABSENT:
        raise AttributeError(f"mx.test_utils.{name} is not provided by hybrid: {_ABSENT[name]}")
    raise AttributeError(f"module 'mxnet.test_utils' (hybrid) has no attribute {name!r}")

