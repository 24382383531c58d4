"""Attribute helpers shared by the operator modules."""
from __future__ import annotations

from typing import Any

import jax.numpy as jnp

from ._registry import Attrs


def spatial(attrs: Attrs, key: str, n: int, default: int) -> tuple[int, ...]:
    """A per-spatial-axis tuple of ``n`` integers (``default`` each when absent); kernel-like
    attributes (default 1) must be >= 1, paddings >= 0."""
    value = attrs.tuple(key, ()) or (default,) * n
    if len(value) != n:
        raise attrs.fail(f"attribute {key}={value} must have {n} entries (one per spatial axis of the {n}-d "
                         f"kernel), got {len(value)}")
    lowest = 1 if default else 0
    if any(v < lowest for v in value):
        raise attrs.fail(f"attribute {key}={value} must hold integers >= {lowest}")
    return value


def positive_int(attrs: Attrs, key: str, default: int | None = None) -> int:
    value = attrs.int(key, default)
    if value < 1:
        raise attrs.fail(f"attribute {key}={value} must be a positive integer")
    return value


def layout(attrs: Attrs, n: int) -> str:
    """The data layout of an ``n``-d spatial operator: channels-first by default, or channels-last."""
    default = {1: "NCW", 2: "NCHW", 3: "NCDHW"}[n]
    return attrs.str("layout", default, (default, {1: "NWC", 2: "NHWC", 3: "NDHWC"}[n]))


def axis(attrs: Attrs, ndim: int, key: str = "axis", default: int | None = None) -> int:
    """A single axis in ``[-ndim, ndim)`` made non-negative."""
    value = attrs.int(key, default)
    if not -ndim <= value < max(ndim, 1):
        raise attrs.fail(f"attribute {key}={value} is out of range for an input with {ndim} dimensions")
    return value % max(ndim, 1)


def axes(attrs: Attrs, ndim: int, key: str = "axis", exclude_key: str | None = "exclude") -> tuple[int, ...]:
    """Reduction axes: all when absent; the complement when ``exclude`` is true."""
    value = attrs.axes(key)
    if value is None:
        chosen = tuple(range(ndim))
    else:
        for v in value:
            if not -ndim <= v < max(ndim, 1):
                raise attrs.fail(f"attribute {key}={value} is out of range for an input with {ndim} dimensions")
        chosen = tuple(sorted({v % max(ndim, 1) for v in value}))
    if exclude_key and attrs.bool(exclude_key, False):
        chosen = tuple(i for i in range(ndim) if i not in chosen)
    return chosen


def ndim_check(attrs: Attrs, x: Any, allowed: tuple[int, ...], what: str = "data") -> None:
    if x.ndim not in allowed:
        raise attrs.fail(f"{what} must have {' or '.join(map(str, allowed))} dimensions, got shape {tuple(x.shape)}")


def as_float(x: Any) -> Any:
    """``x`` if it has a floating dtype, else ``x`` as float32."""
    return x if jnp.issubdtype(x.dtype, jnp.floating) else x.astype(jnp.float32)
