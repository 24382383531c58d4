"""``F.image``: the two array transforms of ``mx.nd.image`` used in Gluon data pipelines."""
from __future__ import annotations

import jax.numpy as jnp

from ._registry import Attrs, OpContext, register


@register("_image_to_tensor")
def to_tensor(ins: list, a: Attrs, ctx: OpContext) -> list:
    """(H, W, C) or (N, H, W, C) pixels in [0, 255] to (C, H, W) / (N, C, H, W) float32 in [0, 1]."""
    x = ins[0]
    if x.ndim not in (3, 4):
        raise a.fail(f"data must be (H, W, C) or (N, H, W, C), got shape {tuple(x.shape)}")
    return [jnp.moveaxis(x.astype(jnp.float32) / 255.0, -1, -3)]


@register("_image_normalize", attr_order=("mean", "std"))
def normalize(ins: list, a: Attrs, ctx: OpContext) -> list:
    """``(x - mean) / std`` per channel of (C, H, W) or (N, C, H, W) data; one value serves all channels."""
    x = ins[0]
    if x.ndim not in (3, 4):
        raise a.fail(f"data must be (C, H, W) or (N, C, H, W), got shape {tuple(x.shape)}")
    channels = x.shape[-3]
    mean, std = a.floats("mean", (0.0,)), a.floats("std", (1.0,))
    shape = (-1, 1, 1)

    def per_channel(values: tuple, key: str):
        if len(values) not in (1, channels):
            raise a.fail(f"{key}={values} must hold 1 or {channels} values")
        return jnp.asarray(values, x.dtype).reshape(shape)
    return [(x - per_channel(mean, "mean")) / per_channel(std, "std")]
