"""``hybrid.amp``: automatic mixed precision, MXNet's ``mxnet.amp`` API.

    amp.init("bfloat16")                 # matrix products and convolutions in bfloat16
    net = ...; trainer = Trainer(...)    # parameters stay float32 (master weights)

Under a policy, ops that gain from low precision (dense, convolution, attention, recurrent
layers) run in the target dtype, softmax and cross-entropy in float32, and the others in their
inputs' dtype; losses compute in float32. Block outputs come out in the target dtype, as in
MXNet. See :mod:`hybrid.graph.precision` for the lists.
"""
from __future__ import annotations

from typing import Any, Iterable

from .block import HybridBlock
from .graph import precision

__all__ = ["init", "convert_hybrid_block", "current_policy", "disable"]


def _policy(target_dtype: str, target_dtype_ops: Iterable[str] | None, fp32_ops: Iterable[str] | None,
            caller: str) -> precision.Policy:
    if target_dtype not in precision.TARGETS:
        raise ValueError(f"{caller}: target_dtype must be 'float16' or 'bfloat16', got {target_dtype!r}")
    low, high = frozenset(target_dtype_ops or ()), frozenset(fp32_ops or ())
    from .graph import ops
    unknown = sorted((low | high) - set(ops.registered()))
    if unknown:
        raise ValueError(f"{caller}: unknown ops {unknown}; the ops with a precision trait are {ops.registered()}")
    return precision.Policy(target_dtype, low, high)


def init(target_dtype: str = "float16", target_precision_ops: Iterable[str] | None = None,
         conditional_fp32_ops: Any = None, fp32_ops: Iterable[str] | None = None,
         layout_optimization: bool = False) -> None:
    """Turn mixed precision on for every block call from now on (``target_dtype`` ``'float16'`` or
    ``'bfloat16'``). ``target_precision_ops`` / ``fp32_ops`` name big ops (``'dense'``,
    ``'convolution'``, ``'softmax'`` ...) to move into or out of the low-precision list.
    ``conditional_fp32_ops`` and ``layout_optimization`` are accepted for MXNet code (no effect).
    Compiled programs are cached per policy. Raises ValueError for another dtype or unknown ops."""
    precision.set_global(_policy(target_dtype, target_precision_ops, fp32_ops, "amp.init"))


def disable() -> None:
    """Turn the process-wide policy of :func:`init` off (full precision again)."""
    precision.set_global(None)


def current_policy() -> precision.Policy | None:
    """The policy in force, or None."""
    return precision.current()


class _MixedPrecision(HybridBlock):
    """``block`` run under a mixed-precision policy of its own."""

    def __init__(self, block: Any, policy: precision.Policy):
        super().__init__()
        self.block = block
        self._policy = policy

    def forward(self, *args: Any) -> Any:
        with precision.use(self._policy):
            return self.block(*args)


def convert_hybrid_block(block: Any, target_dtype: str = "float16", target_dtype_ops: Iterable[str] | None = None,
                         fp32_ops: Iterable[str] | None = None, conditional_fp32_ops: Any = None,
                         excluded_sym_names: Any = None, device: Any = None, ctx: Any = None,
                         cast_params_offline: bool = False) -> HybridBlock:
    """A block computing as ``block`` does, under its own mixed-precision policy (whatever
    :func:`init` set); it shares ``block``'s parameters, which stay float32. The MXNet keywords
    ``conditional_fp32_ops``, ``excluded_sym_names``, ``device``/``ctx`` and ``cast_params_offline``
    are accepted (no effect). Raises ValueError for another dtype or unknown ops."""
    return _MixedPrecision(block, _policy(target_dtype, target_dtype_ops, fp32_ops, "amp.convert_hybrid_block"))
