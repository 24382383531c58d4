"""MXNet's ``Custom`` operator: ``F.Custom(*inputs, op_type='name', **attrs)`` runs the custom operator
registered as ``name``.

The table knows no custom operator itself: a provider (``mx.operator.register`` of the alias) puts a
:class:`CustomKernel` in :data:`CUSTOM_KERNELS` under its ``op_type``. The inputs are the operator's
arguments then its auxiliary states, in the order its property lists them, given by position or by
name (``F.Custom(data=x, label=y, op_type='softmax')``, as ``mx.sym.Custom`` takes them); every other
attribute but ``op_type`` reaches the kernel as MXNet passes it: a string.
"""
from __future__ import annotations

from typing import Any, Protocol

import numpy as np

from ._registry import Attrs, OpContext, register

__all__ = ["CustomKernel", "CUSTOM_KERNELS", "kernel_of"]


class CustomKernel(Protocol):
    """What runs one registered custom operator."""

    def input_names(self, attrs: dict[str, str]) -> list[str]:
        """The names of the operator's inputs: its arguments, then its auxiliary states."""

    def num_outputs(self, attrs: dict[str, str]) -> int:
        """How many outputs the operator gives with these (string) attributes."""

    def __call__(self, inputs: list, attrs: dict[str, str], training: bool) -> list:
        """The outputs (arrays, possibly traced) for ``inputs`` (arguments then auxiliary states)."""


#: Registered custom operators by ``op_type``.
CUSTOM_KERNELS: dict[str, CustomKernel] = {}


def _is_array(value: Any) -> bool:
    return hasattr(value, "shape") and hasattr(value, "dtype") and not isinstance(value, (str, np.generic))


def _split(attrs: Attrs) -> tuple[str, dict[str, str]]:
    op_type = attrs.raw.get("op_type")
    if not isinstance(op_type, str) or not op_type:
        raise attrs.fail("needs op_type='<name>', the name a CustomOpProp was registered under "
                         "(mx.operator.register)")
    rest = {k: v if isinstance(v, str) else str(v) for k, v in attrs.raw.items()
            if k != "op_type" and v is not None and not _is_array(v)}
    return op_type, rest


def kernel_of(attrs: Attrs) -> tuple[CustomKernel, dict[str, str]]:
    """The kernel named by ``attrs['op_type']`` and the other attributes (not arrays) as strings.

    Raises:
        the error of ``attrs`` (``ValueError``, ``FormatError`` for files): no ``op_type``, or none is
            registered under it.
    """
    op_type, rest = _split(attrs)
    kernel = CUSTOM_KERNELS.get(op_type)
    if kernel is None:
        known = ", ".join(sorted(CUSTOM_KERNELS)) or "none"
        raise attrs.fail(f"no custom operator is registered as op_type={op_type!r} (registered: {known}); "
                         "register its CustomOpProp with @mx.operator.register(" + repr(op_type) + ")")
    return kernel, rest


def _num_outputs(attrs: Attrs) -> int:
    kernel, rest = kernel_of(attrs)
    return kernel.num_outputs(rest)


def _inputs(kernel: CustomKernel, inputs: list, attrs: Attrs, rest: dict[str, str], op_type: str) -> list:
    """The positional inputs followed by those given by name, in the operator's order."""
    named = {k: v for k, v in attrs.raw.items() if _is_array(v)}
    if not named:
        return list(inputs)
    names = kernel.input_names(rest)
    unknown = sorted(set(named) - set(names))
    if unknown:
        raise attrs.fail(f"custom operator {op_type!r} has no input {unknown[0]!r} (its inputs: {names})")
    ordered = list(inputs)
    for name in names[len(ordered):]:
        if name not in named:
            raise attrs.fail(f"custom operator {op_type!r}: input {name!r} is missing (its inputs: {names})")
        ordered.append(named.pop(name))
    if named:
        raise attrs.fail(f"custom operator {op_type!r}: input {sorted(named)[0]!r} is given by position and by "
                         "name")
    return ordered


@register("Custom", inputs=(), variadic=True, num_outputs=_num_outputs, needs_ctx=True)
def custom(inputs: list, attrs: Attrs, ctx: OpContext) -> list:
    kernel, rest = kernel_of(attrs)
    return kernel(_inputs(kernel, inputs, attrs, rest, attrs.raw["op_type"]), rest, ctx.training)
