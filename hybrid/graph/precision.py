"""Mixed precision: the active precision policy, and the casts it puts around big ops.

Every big op declares a precision trait at registration (``ops.register(..., precision=...)``):

- ``'low'``: matrix products and convolutions, which run in the policy's target dtype (float16 or
  bfloat16): their floating inputs, parameters included, are cast to it, so their outputs have it;
- ``'float32'``: softmax, log-softmax and the fused softmax cross-entropy, whose floating inputs
  are cast to float32;
- ``'follow'``: everything else runs in its inputs' dtype (normalisations compute their statistics
  in float32 whatever the input dtype).

Parameters keep their dtype (float32 master weights): a cast is part of the computation, so
gradients reach the float32 parameters in float32. No policy is active unless ``hybrid.amp.init``
or ``hybrid.amp.convert_hybrid_block`` sets one.
"""
from __future__ import annotations

import contextlib
import threading
from dataclasses import dataclass
from typing import Any, Iterator, Sequence

import jax.numpy as jnp

__all__ = ["Policy", "current", "set_global", "use", "floating_to", "PRECISIONS"]

PRECISIONS = ("low", "float32", "follow")
TARGETS = ("float16", "bfloat16")


@dataclass(frozen=True)
class Policy:
    """Run ``'low'`` ops in ``target_dtype`` (``'float16'`` or ``'bfloat16'``) and ``'float32'`` ops
    in float32. ``low_ops`` / ``float32_ops`` move named ops between the lists."""

    target_dtype: str
    low_ops: frozenset = frozenset()
    float32_ops: frozenset = frozenset()

    def __post_init__(self) -> None:
        if self.target_dtype not in TARGETS:
            raise ValueError(f"mixed precision: target_dtype must be one of {TARGETS}, got {self.target_dtype!r}")

    def precision_of(self, name: str, declared: str) -> str:
        if name in self.float32_ops:
            return "float32"
        if name in self.low_ops:
            return "low"
        return declared

    def cast(self, name: str, declared: str, leaves: Sequence[Any]) -> list:
        """``leaves`` (an op's flat inputs) cast for op ``name`` of precision trait ``declared``."""
        precision = self.precision_of(name, declared)
        if precision == "follow":
            return list(leaves)
        dtype = jnp.dtype(self.target_dtype) if precision == "low" else jnp.dtype(jnp.float32)
        return [_cast(leaf, dtype) for leaf in leaves]


def _cast(value: Any, dtype: Any) -> Any:
    value_dtype = getattr(value, "dtype", None)
    if value_dtype is None or not jnp.issubdtype(value_dtype, jnp.floating) or value_dtype == dtype:
        return value
    return value.astype(dtype)


_GLOBAL: list[Policy | None] = [None]
_UNSET = object()  # no use() in force in this thread: the global policy applies


class _Scoped(threading.local):
    policy: Any = _UNSET


_scoped = _Scoped()


def current() -> Policy | None:
    """The policy in force: the innermost :func:`use` of this thread, else the global one (``amp.init``)."""
    policy = _scoped.policy
    return _GLOBAL[0] if policy is _UNSET else policy


def set_global(policy: Policy | None) -> None:
    """Make ``policy`` the process-wide default (None: full precision)."""
    _GLOBAL[0] = policy


@contextlib.contextmanager
def use(policy: Policy | None) -> Iterator[None]:
    """Run the body under ``policy`` (in this thread)."""
    previous, _scoped.policy = _scoped.policy, policy
    try:
        yield
    finally:
        _scoped.policy = previous


def floating_to(values: Sequence[Any], dtype: Any) -> list:
    """``values`` with their floating arrays cast to ``dtype`` (others unchanged)."""
    return [_cast(v, jnp.dtype(dtype)) for v in values]
