"""``mxnet.gluon.loss``: hybrid's losses (``hybrid.loss``), and the two helpers loss code written for
Gluon 1.x imports from this module (``_apply_weighting``, ``_reshape_like``)."""
from typing import Any

import jax.numpy as jnp

from ...loss import *  # noqa: F401,F403
from ...loss import __all__  # noqa: F401


def _apply_weighting(F: Any, loss: Any, weight: float | None = None, sample_weight: Any = None) -> Any:
    """``loss`` times ``sample_weight`` (broadcast) and times the number ``weight``; TypeError when
    ``weight`` is not a number."""
    if sample_weight is not None:
        loss = loss * sample_weight
    if weight is not None:
        if not isinstance(weight, (int, float)):
            raise TypeError(f"loss weight must be a number, got {type(weight).__name__}")
        loss = loss * weight
    return loss


def _reshape_like(F: Any, x: Any, y: Any) -> Any:
    """``x`` reshaped to ``y``'s shape."""
    return jnp.reshape(x, jnp.shape(y))
