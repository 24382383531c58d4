"""``mxnet.random`` (and ``mx.nd.random``): the seed and samplers drawing from ``hybrid.random``'s stream."""
from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp

from .. import random as _random

__all__ = ["seed", "uniform", "normal", "randn", "randint", "exponential", "gamma", "poisson", "shuffle",
           "multinomial"]


def seed(seed_state: int, ctx: Any = "all") -> None:
    """Seed initialisation and dropout (``hybrid.random.seed``); ``ctx`` is accepted (one stream for all)."""
    _random.seed(seed_state)


def _shape(shape: Any) -> tuple:
    if shape is None:
        return ()
    return (int(shape),) if isinstance(shape, int) else tuple(int(d) for d in shape)


def uniform(low: float = 0.0, high: float = 1.0, shape: Any = (), dtype: Any = "float32", ctx: Any = None,
            out: Any = None, **kwargs: Any) -> jax.Array:
    """Samples of U[low, high) with ``shape`` (MXNet's default shape () gives one value of shape (1,))."""
    return _random.uniform(low, high, _shape(shape) or (1,), dtype)


def normal(loc: float = 0.0, scale: float = 1.0, shape: Any = (), dtype: Any = "float32", ctx: Any = None,
           out: Any = None, **kwargs: Any) -> jax.Array:
    """Samples of N(loc, scale**2) with ``shape``."""
    return _random.normal(loc, scale, _shape(shape) or (1,), dtype)


def randn(*shape: int, loc: float = 0.0, scale: float = 1.0, dtype: Any = "float32", **kwargs: Any) -> jax.Array:
    """Normal samples with the shape given positionally (``randn(2, 3)``)."""
    return normal(loc, scale, shape or (1,), dtype)


def randint(low: int, high: int, shape: Any = (), dtype: Any = "int32", ctx: Any = None, out: Any = None,
            **kwargs: Any) -> jax.Array:
    """Integers uniform in [low, high)."""
    return jax.random.randint(_random.next_key(), _shape(shape) or (1,), low, high, dtype)


def exponential(scale: float = 1.0, shape: Any = (), dtype: Any = "float32", **kwargs: Any) -> jax.Array:
    """Samples of an exponential distribution with mean ``scale``."""
    return scale * jax.random.exponential(_random.next_key(), _shape(shape) or (1,), dtype)


def gamma(alpha: float = 1.0, beta: float = 1.0, shape: Any = (), dtype: Any = "float32", **kwargs: Any) -> jax.Array:
    """Samples of Gamma(alpha) scaled by ``beta``."""
    return beta * jax.random.gamma(_random.next_key(), alpha, _shape(shape) or (1,), dtype)


def poisson(lam: float = 1.0, shape: Any = (), dtype: Any = "float32", **kwargs: Any) -> jax.Array:
    """Poisson samples with rate ``lam`` (as floats, as MXNet returns them)."""
    return jax.random.poisson(_random.next_key(), lam, _shape(shape) or (1,)).astype(dtype)


def shuffle(data: Any, **kwargs: Any) -> jax.Array:
    """``data`` with its first axis permuted (a new array; MXNet's in-place ``out=`` is not supported)."""
    return jax.random.permutation(_random.next_key(), jnp.asarray(data), axis=0)


def multinomial(data: Any, shape: Any = (), get_prob: bool = False, dtype: Any = "int32", **kwargs: Any) -> Any:
    """Indices drawn from the categorical distributions in the last axis of ``data`` (probabilities)."""
    probs = jnp.asarray(data)
    extra = _shape(shape)
    logits = jnp.log(probs)
    key = _random.next_key()
    draws = jax.random.categorical(key, logits, axis=-1, shape=extra + probs.shape[:-1]) if extra else \
        jax.random.categorical(key, logits, axis=-1)
    if extra:
        draws = jnp.moveaxis(draws, tuple(range(len(extra))), tuple(range(-len(extra), 0)))
    draws = draws.astype(dtype)
    if get_prob:
        logp = jnp.take_along_axis(logits[..., None, :] if extra else logits,
                                   draws[..., None].astype(jnp.int32), axis=-1)[..., 0]
        return [draws, logp]
    return draws


def _returning_handles() -> None:
    """The samplers return ``mx.nd.NDArray`` handles, as MXNet's do (their inputs may be handles too)."""
    from .handle import handle_function
    for name in __all__:
        if name != "seed":
            globals()[name] = handle_function(globals()[name], name=name)


_returning_handles()
