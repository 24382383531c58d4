"""The operator table: :class:`Op`, its attributes (:class:`Attrs`), the context an operator may use
(:class:`OpContext`), and registration.

An operator is ``fn(inputs: list, attrs: Attrs, ctx: OpContext) -> list of outputs``. ``inputs`` holds
one entry per declared input name (``None`` where an optional input is absent) and, for variadic
operators, every input given. The same function serves ``F.<name>(...)`` and the MXNet symbol importer.
"""
from __future__ import annotations

import math
import operator
import re
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

import numpy as np

__all__ = ["Attrs", "OpContext", "Op", "OPERATORS", "register", "get_op", "call_op", "UnsupportedOperatorError"]

_INT = re.compile(r"^\s*-?\d{1,18}\s*$")
_TUPLE = re.compile(r"^[\(\[]\s*(-?\d{1,18}\s*(,\s*-?\d{1,18}\s*)*)?,?\s*[\)\]]$")
_ITEM = re.compile(r"-?\d{1,18}|None")
_BOOLS = {"true": True, "1": True, "false": False, "0": False}
_DTYPES = {"float16", "float32", "float64", "bfloat16", "uint8", "int8", "int32", "int64", "bool", "int16",
           "uint16", "uint32", "uint64"}


class UnsupportedOperatorError(AttributeError, NotImplementedError):
    """An MXNet operator that hybrid's table does not have."""


# -- attributes ------------------------------------------------------------------------------------
class Attrs:
    """Attributes of one operator call: MXNet's strings (from ``-symbol.json``) or Python values (from
    ``F.op(..., kernel=(3, 3))``), read through typed, validating getters.

    Every getter treats a missing key, ``None`` and the string ``"None"`` as absent. Invalid values raise
    ``error`` (``ValueError`` for ``F`` calls, ``FormatError`` for files) naming ``where`` and the key.
    """

    __slots__ = ("raw", "where", "error")

    def __init__(self, raw: Mapping[str, Any], where: str, error: type[Exception] = ValueError):
        self.raw, self.where, self.error = raw, where, error

    def fail(self, message: str) -> Exception:
        """An error of this call's kind, prefixed with where the call is; ``raise a.fail(...)``."""
        return self.error(f"{self.where}: {message}")

    def has(self, key: str) -> bool:
        value = self.raw.get(key)
        return value is not None and value != "None"

    def _get(self, key: str) -> Any:
        value = self.raw.get(key)
        return None if value is None or (type(value) is str and value == "None") else value

    def _missing(self, key: str) -> Exception:
        return self.fail(f"missing attribute {key!r}")

    def _bad(self, key: str, value: Any, what: str) -> Exception:
        return self.fail(f"attribute {key}={value!r:.40} is not {what}")

    def int(self, key: str, default: int | None = None) -> int:
        """An integer; ``default`` when absent (absent without a default raises)."""
        value = self._get(key)
        if value is None:
            if default is None:
                raise self._missing(key)
            return default
        if type(value) is int:
            return value
        if isinstance(value, str):
            if not _INT.match(value):
                raise self._bad(key, value, "an integer")
            return int(value)
        try:
            return operator.index(value)
        except TypeError:
            if isinstance(value, float) and value.is_integer():
                return int(value)
            raise self._bad(key, value, "an integer") from None

    def opt_int(self, key: str) -> int | None:
        """An integer, or None when absent."""
        return None if self._get(key) is None else self.int(key)

    def float(self, key: str, default: float | None = None) -> float:
        """A finite number; ``default`` when absent."""
        value = self._get(key)
        if value is None:
            if default is None:
                raise self._missing(key)
            return default
        if isinstance(value, str) and value.strip().lower() in ("inf", "+inf", "-inf"):
            return float(value)
        try:
            result = float(value)
        except (TypeError, ValueError):
            raise self._bad(key, value, "a number") from None
        if math.isnan(result):
            raise self.fail(f"attribute {key}={value!r:.40} must not be NaN")
        return result

    def opt_float(self, key: str) -> float | None:
        return None if self._get(key) is None else self.float(key)

    def bool(self, key: str, default: bool = False) -> bool:
        value = self._get(key)
        if value is None:
            return default
        if value is True or value is False:
            return value
        if isinstance(value, str):
            flag = _BOOLS.get(value.strip().lower())
            if flag is None:
                raise self._bad(key, value, "a boolean")
            return flag
        if isinstance(value, (int, np.integer, np.bool_)) and value in (0, 1):
            return bool(value)
        raise self._bad(key, value, "a boolean")

    def str(self, key: str, default: str | None, choices: Sequence[str] | None = None) -> str | None:
        value = self._get(key)
        if value is None:
            return default
        if not isinstance(value, str):
            raise self._bad(key, value, "a string")
        if choices is not None and value not in choices:
            raise self.fail(f"attribute {key}={value!r:.40}; supported: {list(choices)}")
        return value

    def tuple(self, key: str, default: tuple | None = None) -> tuple[int, ...]:
        """A tuple of integers (a single integer is a 1-tuple); ``default`` when absent."""
        value = self._get(key)
        if value is None:
            if default is None:
                raise self._missing(key)
            return default
        if isinstance(value, str):
            text = value.strip()
            if _INT.match(text):
                return (int(text),)
            if len(text) > 400 or not _TUPLE.match(text):
                raise self._bad(key, value, "a tuple of integers")
            return tuple(int(v) for v in re.findall(r"-?\d+", text))
        if isinstance(value, (list, tuple)):
            try:
                return tuple(operator.index(v) for v in value)
            except TypeError:
                raise self._bad(key, value, "a tuple of integers") from None
        try:
            return (operator.index(value),)
        except TypeError:
            raise self._bad(key, value, "a tuple of integers") from None

    def opt_tuple(self, key: str) -> tuple[int | None, ...]:
        """A tuple of integers or None (slice bounds such as ``(None, 2)``); ``()`` when absent."""
        value = self._get(key)
        if value is None:
            return ()
        if isinstance(value, str):
            text = value.strip()
            if len(text) > 400 or not re.fullmatch(r"[\(\[]\s*((-?\d{1,18}|None)\s*(,\s*(-?\d{1,18}|None)\s*)*)?,?"
                                                  r"\s*[\)\]]|-?\d{1,18}", text):
                raise self._bad(key, value, "a tuple of integers or None")
            return tuple(None if v == "None" else int(v) for v in _ITEM.findall(text))
        items = value if isinstance(value, (list, tuple)) else (value,)
        try:
            return tuple(None if v is None else operator.index(v) for v in items)
        except TypeError:
            raise self._bad(key, value, "a tuple of integers or None") from None

    def axes(self, key: str = "axis") -> tuple[int, ...] | None:
        """An axis or tuple of axes; None when absent or ``()`` (MXNet's 'all axes')."""
        value = self._get(key)
        if value is None:
            return None
        axes = self.tuple(key)
        return axes or None

    def floats(self, key: str, default: tuple | None = None) -> tuple[float, ...]:
        """A tuple of numbers (a single number is a 1-tuple); ``default`` when absent."""
        value = self._get(key)
        if value is None:
            if default is None:
                raise self._missing(key)
            return default
        if isinstance(value, str):
            text = value.strip().strip("()[]")
            try:
                return tuple(float(v) for v in text.split(",") if v.strip())
            except ValueError:
                raise self._bad(key, value, "a tuple of numbers") from None
        items = value if isinstance(value, (list, tuple)) else (value,)
        try:
            return tuple(float(v) for v in items)
        except (TypeError, ValueError):
            raise self._bad(key, value, "a tuple of numbers") from None

    def dtype(self, key: str = "dtype", default: str | None = "float32") -> np.dtype | None:
        """A dtype from a name (``'float32'``) or a dtype-like Python value, as JAX holds it: 64-bit types
        become 32-bit ones unless JAX's 64-bit mode is on."""
        from jax import dtypes
        value = self._get(key)
        if value is None:
            return None if default is None else dtypes.canonicalize_dtype(np.dtype(default))
        if isinstance(value, str):
            if value not in _DTYPES:
                raise self.fail(f"attribute {key}={value!r:.40} is not a supported dtype; supported: {sorted(_DTYPES)}")
            return np.dtype(dtypes.bfloat16) if value == "bfloat16" else dtypes.canonicalize_dtype(np.dtype(value))
        try:
            return dtypes.canonicalize_dtype(np.dtype(value))
        except TypeError:
            raise self._bad(key, value, "a dtype") from None


# -- operators -------------------------------------------------------------------------------------
@dataclass
class OpContext:
    """What an operator may use besides its inputs.

    ``training``: training-mode behaviour (Dropout active, BatchNorm batch statistics).
    ``set_state(position, value)``: writes a new value for the input at ``position`` (BatchNorm's running
    statistics); None when nothing receives it (``F`` calls), and then such updates are dropped.
    ``subgraphs``: a symbol file's subgraphs of a control-flow node, each ``run(inputs: list) -> list of
    outputs`` (empty for other nodes and for ``F`` calls).
    """

    training: bool
    set_state: Callable[[int, Any], None] | None = None
    subgraphs: tuple[Callable[[list], list], ...] = ()


@dataclass(eq=False)
class Op:
    """One MXNet operator: its implementation and how calls bind to it.

    ``inputs``: MXNet's input names in order; ``variadic``: every positional argument is an input
    (``concat``, ``add_n``); ``optional``: how many of the last inputs may be absent; ``attr_order``:
    attribute names that may also be given positionally after the inputs, as MXNet's generated functions
    allow (set from :mod:`.signatures`); ``num_outputs(attrs)``: how many outputs a node has
    (for checking references in symbol files); ``needs_ctx``: the operator reads ``ctx``;
    ``labels``: inputs from this position on are training labels the forward pass ignores;
    ``aux``: input positions that are auxiliary states (not trained).
    """

    name: str
    fn: Callable[[list, Attrs, OpContext], list]
    inputs: tuple[str, ...] = ("data",)
    variadic: bool = False
    attr_order: tuple[str, ...] = ()
    num_outputs: Callable[[Attrs], int] | int = 1
    needs_ctx: bool = False
    labels: int | None = None
    aux: tuple[int, ...] = ()
    aliases: tuple[str, ...] = ()
    optional: int = 0

    def outputs(self, attrs: Attrs) -> int:
        return self.num_outputs if isinstance(self.num_outputs, int) else self.num_outputs(attrs)


#: Every operator by MXNet name and alias.
OPERATORS: dict[str, Op] = {}


def register(name: str, *aliases: str, inputs: Sequence[str] = ("data",), variadic: bool = False,
             attr_order: Sequence[str] = (), num_outputs: Callable[[Attrs], int] | int = 1,
             needs_ctx: bool = False, labels: int | None = None, aux: Sequence[int] = ()) -> Callable:
    """Decorator registering ``fn(inputs, attrs, ctx) -> list`` as operator ``name`` and its aliases.
    Input names ending in ``?`` are optional (they must come last)."""
    def deco(fn: Callable) -> Callable:
        optional = sum(n.endswith("?") for n in inputs)
        if any(n.endswith("?") for n in inputs[:len(inputs) - optional]):
            raise ValueError(f"MXNet operator {name!r}: optional inputs must come last")
        op = Op(name, fn, tuple(n.rstrip("?") for n in inputs), variadic, tuple(attr_order), num_outputs,
                needs_ctx, labels, tuple(aux), tuple(aliases), optional)
        for key in (name, *aliases):
            if key in OPERATORS:
                raise ValueError(f"MXNet operator {key!r} is registered twice")
            OPERATORS[key] = op
        return fn
    return deco


def get_op(name: str) -> Op:
    """The operator called ``name`` (MXNet's name or an alias); raises
    :class:`UnsupportedOperatorError` naming it when the table does not have it."""
    try:
        return OPERATORS[name]
    except KeyError:
        raise UnsupportedOperatorError(
            f"MXNet operator {name!r} is not among the supported MXNet operators "
            "(hybrid.mxnet.ops.OPERATORS lists them)") from None


def call_op(name: str, inputs: Sequence[Any], attrs: Mapping[str, Any] | Attrs, ctx: OpContext | None = None
            ) -> list:
    """Run operator ``name`` on ``inputs`` (in MXNet's input order) with ``attrs`` (strings or Python
    values); returns the list of outputs. ``ctx`` defaults to the current training mode."""
    op = get_op(name)
    if not isinstance(attrs, Attrs):
        attrs = Attrs(attrs, f"MXNet operator {name}")
    ins = list(inputs)
    if len(ins) < len(op.inputs):
        ins += [None] * (len(op.inputs) - len(ins))
    if ctx is None:
        from ... import autograd
        ctx = OpContext(autograd.is_training())
    return op.fn(ins, attrs, ctx)
