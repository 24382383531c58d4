"""``mxnet.numpy.random`` (``mx.np.random``): NumPy's samplers, drawing from ``hybrid.random``'s stream.

Sizes follow NumPy (``size=None`` gives one 0-d value); the float samplers default to float32 as MXNet's.
``shuffle`` permutes a handle's first axis in place.
"""
from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp

from ... import random as _random
from ..context import to_device
from ..handle import NDArray, ndarray, value_of
from ._dtypes import float_default

__all__ = ["seed", "uniform", "normal", "randn", "rand", "randint", "choice", "shuffle", "permutation",
           "exponential", "gamma", "beta", "multinomial", "laplace", "logistic", "gumbel", "lognormal", "bernoulli"]


def seed(seed: int, ctx: Any = "all") -> None:
    """Seed hybrid's random stream (initialisers, dropout and these samplers)."""
    _random.seed(int(seed))


def _size(size: Any) -> tuple:
    if size is None:
        return ()
    return (int(size),) if isinstance(size, int) else tuple(int(d) for d in size)


def _out(value: Any, ctx: Any = None, device: Any = None, out: Any = None) -> Any:
    where = ctx if ctx is not None else device
    if where is not None:
        value = jax.device_put(value, to_device(where))
    if out is not None:
        out._assign(out._fitted(value))
        return out
    return ndarray(value)


def _shape_of(size: Any, *params: Any) -> tuple:
    """NumPy's rule: ``size``, else the broadcast shape of the parameters."""
    if size is not None:
        return _size(size)
    return jnp.broadcast_shapes(*(jnp.shape(p) for p in params))


def uniform(low: Any = 0.0, high: Any = 1.0, size: Any = None, dtype: Any = None, ctx: Any = None,
            device: Any = None, out: Any = None) -> ndarray:
    """Samples of U[low, high)."""
    low, high = value_of(low), value_of(high)
    shape = _shape_of(size, low, high)
    draws = jax.random.uniform(_random.next_key(), shape, float_default(dtype))
    return _out(low + (high - low) * draws, ctx, device, out)


def normal(loc: Any = 0.0, scale: Any = 1.0, size: Any = None, dtype: Any = None, ctx: Any = None,
           device: Any = None, out: Any = None) -> ndarray:
    """Samples of N(loc, scale**2)."""
    loc, scale = value_of(loc), value_of(scale)
    shape = _shape_of(size, loc, scale)
    return _out(loc + scale * jax.random.normal(_random.next_key(), shape, float_default(dtype)), ctx, device, out)


def randn(*size: int, **kwargs: Any) -> ndarray:
    """Standard normal samples of the shape given positionally."""
    return normal(0.0, 1.0, size or None, **kwargs)


def rand(*size: int, **kwargs: Any) -> ndarray:
    """U[0, 1) samples of the shape given positionally."""
    return uniform(0.0, 1.0, size or None, **kwargs)


def randint(low: int, high: int | None = None, size: Any = None, dtype: Any = None, ctx: Any = None,
            device: Any = None, out: Any = None) -> ndarray:
    """Integers uniform in [low, high) (JAX's default integer type unless ``dtype`` is given)."""
    if high is None:
        low, high = 0, low
    dtype = float_default(int if dtype is None else dtype)
    return _out(jax.random.randint(_random.next_key(), _size(size), low, high, dtype), ctx, device, out)


def choice(a: Any, size: Any = None, replace: bool = True, p: Any = None, ctx: Any = None,
           out: Any = None) -> ndarray:
    """Samples from ``a`` (an array, or ``range(a)`` for an int), with or without replacement."""
    a, p = value_of(a), value_of(p)
    population = jnp.arange(a) if isinstance(a, int) else jnp.asarray(a)
    return _out(jax.random.choice(_random.next_key(), population, _size(size), replace, p), ctx, None, out)


def permutation(x: Any) -> ndarray:
    """A permutation of ``range(x)`` for an int, else of ``x``'s first axis."""
    x = value_of(x)
    return ndarray(jax.random.permutation(_random.next_key(), x if not isinstance(x, int) else int(x)))


def shuffle(x: NDArray) -> None:
    """Permute the first axis of the handle ``x`` in place."""
    if not isinstance(x, NDArray):
        raise TypeError(f"np.random.shuffle: x must be an mx.np.ndarray (shuffled in place), got {type(x).__name__}")
    x._assign(jax.random.permutation(_random.next_key(), x.value, axis=0))


def exponential(scale: Any = 1.0, size: Any = None, ctx: Any = None, out: Any = None) -> ndarray:
    """Samples of an exponential distribution with mean ``scale``."""
    scale = value_of(scale)
    shape = _shape_of(size, scale)
    return _out(scale * jax.random.exponential(_random.next_key(), shape, jnp.float32), ctx, None, out)


def gamma(shape: Any = 1.0, scale: Any = 1.0, size: Any = None, dtype: Any = None, ctx: Any = None,
          out: Any = None) -> ndarray:
    """Samples of Gamma(shape, scale)."""
    k, theta = value_of(shape), value_of(scale)
    dims = _shape_of(size, k, theta)
    return _out(theta * jax.random.gamma(_random.next_key(), k, dims, float_default(dtype)), ctx, None, out)


def beta(a: Any, b: Any, size: Any = None, dtype: Any = None, ctx: Any = None) -> ndarray:
    """Samples of Beta(a, b)."""
    a, b = value_of(a), value_of(b)
    return _out(jax.random.beta(_random.next_key(), a, b, _shape_of(size, a, b), float_default(dtype)), ctx)


def multinomial(n: int, pvals: Any, size: Any = None) -> ndarray:
    """Counts of ``n`` draws from the categories with probabilities ``pvals`` (last axis)."""
    pvals = jnp.asarray(value_of(pvals))
    shape = _size(size)
    draws = jax.random.categorical(_random.next_key(), jnp.log(pvals), shape=shape + (int(n),))
    return ndarray(jax.nn.one_hot(draws, pvals.shape[-1], dtype=jnp.int32).sum(axis=-2))


def _located(sample: Any) -> Any:
    def sampler(loc: Any = 0.0, scale: Any = 1.0, size: Any = None, ctx: Any = None, out: Any = None) -> ndarray:
        loc, scale = value_of(loc), value_of(scale)
        draws = sample(_random.next_key(), _shape_of(size, loc, scale), jnp.float32)
        return _out(loc + scale * draws, ctx, None, out)
    return sampler


laplace = _located(jax.random.laplace)
logistic = _located(jax.random.logistic)
gumbel = _located(jax.random.gumbel)


def lognormal(mean: Any = 0.0, sigma: Any = 1.0, size: Any = None, ctx: Any = None, out: Any = None) -> ndarray:
    """exp of N(mean, sigma**2) samples."""
    return _out(jnp.exp(normal(mean, sigma, size).value), ctx, None, out)


def bernoulli(prob: Any = None, logit: Any = None, size: Any = None, dtype: Any = None, ctx: Any = None,
              out: Any = None) -> ndarray:
    """0/1 samples with probability ``prob`` (or ``sigmoid(logit)``)."""
    p = jax.nn.sigmoid(value_of(logit)) if prob is None else value_of(prob)
    draws = jax.random.bernoulli(_random.next_key(), p, _shape_of(size, p))
    return _out(draws.astype(float_default(dtype)), ctx, None, out)
