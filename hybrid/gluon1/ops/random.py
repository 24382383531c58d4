"""``F.random``: draws with keys from :mod:`hybrid.random` (so hybridized blocks take fresh keys per call,
as Dropout does). ``shape`` and ``dtype`` (float32 by default) are attributes, as in MXNet."""
from __future__ import annotations

import jax
import jax.numpy as jnp

from ... import random as _random
from ._registry import Attrs, OpContext, register


def _shape_dtype(a: Attrs, like=None):
    if like is not None:
        return tuple(like.shape), like.dtype
    return a.tuple("shape", (1,)), a.dtype("dtype", "float32")


@register("_random_uniform", "random_uniform", "uniform", inputs=())
def uniform(ins: list, a: Attrs, ctx: OpContext) -> list:
    shape, dtype = _shape_dtype(a)
    return [jax.random.uniform(_random.next_key(), shape, dtype, a.float("low", 0.0), a.float("high", 1.0))]


@register("_random_normal", "random_normal", "normal", inputs=())
def normal(ins: list, a: Attrs, ctx: OpContext) -> list:
    shape, dtype = _shape_dtype(a)
    return [a.float("loc", 0.0) + a.float("scale", 1.0) * jax.random.normal(_random.next_key(), shape, dtype)]


@register("_random_uniform_like", inputs=("data",))
def uniform_like(ins: list, a: Attrs, ctx: OpContext) -> list:
    shape, dtype = _shape_dtype(a, ins[0])
    return [jax.random.uniform(_random.next_key(), shape, dtype, a.float("low", 0.0), a.float("high", 1.0))]


@register("_random_normal_like", inputs=("data",))
def normal_like(ins: list, a: Attrs, ctx: OpContext) -> list:
    shape, dtype = _shape_dtype(a, ins[0])
    return [a.float("loc", 0.0) + a.float("scale", 1.0) * jax.random.normal(_random.next_key(), shape, dtype)]


@register("_random_randint", "random_randint", inputs=())
def randint(ins: list, a: Attrs, ctx: OpContext) -> list:
    """Integers in ``[low, high)`` (int32 by default)."""
    dtype = a.dtype("dtype", "int32")
    return [jax.random.randint(_random.next_key(), a.tuple("shape", (1,)), a.int("low"), a.int("high"), dtype)]


@register("_random_exponential", "random_exponential", inputs=())
def exponential(ins: list, a: Attrs, ctx: OpContext) -> list:
    shape, dtype = _shape_dtype(a)
    return [jax.random.exponential(_random.next_key(), shape, dtype) / a.float("lam", 1.0)]


@register("_random_gamma", "random_gamma", inputs=())
def gamma(ins: list, a: Attrs, ctx: OpContext) -> list:
    shape, dtype = _shape_dtype(a)
    return [jax.random.gamma(_random.next_key(), a.float("alpha", 1.0), shape, dtype) * a.float("beta", 1.0)]


@register("_random_poisson", "random_poisson", inputs=())
def poisson(ins: list, a: Attrs, ctx: OpContext) -> list:
    shape, dtype = _shape_dtype(a)
    return [jax.random.poisson(_random.next_key(), a.float("lam", 1.0), shape).astype(dtype)]


@register("_shuffle", "shuffle")
def shuffle(ins: list, a: Attrs, ctx: OpContext) -> list:
    """The input with its first axis permuted at random."""
    return [jax.random.permutation(_random.next_key(), ins[0], axis=0)]


@register("_sample_multinomial", "sample_multinomial")
def sample_multinomial(ins: list, a: Attrs, ctx: OpContext) -> list:
    """Category indices drawn from probability rows (last axis); ``shape`` extra draws per row."""
    probs = ins[0]
    extra = a.tuple("shape", ())
    logits = jnp.log(probs)
    draws = jax.random.categorical(_random.next_key(), logits, axis=-1,
                                   shape=extra + tuple(probs.shape[:-1]) if extra else None)
    if extra:
        draws = jnp.moveaxis(draws, tuple(range(len(extra))), tuple(range(-len(extra), 0)))
    return [draws.astype(a.dtype("dtype", "int32"))]
