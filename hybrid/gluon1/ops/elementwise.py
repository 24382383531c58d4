"""Elementwise operators: unary math, binary arithmetic and comparisons (``elemwise_*``, ``broadcast_*``,
``_plus``...), and the ``_*_scalar`` variants taking the attribute ``scalar``.

MXNet's comparisons and logical operators return 0/1 in the input's dtype; so do these.
"""
from __future__ import annotations

import functools
from typing import Callable

import jax
import jax.numpy as jnp
from jax import lax
from jax.scipy import special

from ...graph import layer_ops
from ._registry import Attrs, OpContext, register


def _round_half_away(x):
    return jnp.where(x >= 0, jnp.floor(x + 0.5), jnp.ceil(x - 0.5))


def _rint(x):
    """MXNet's rint: the floor when the fraction is at most 0.5, else the ceiling (1.5 -> 1, -2.5 -> -3)."""
    low = jnp.floor(x)
    return jnp.where(x - low <= 0.5, low, jnp.ceil(x))


def _divide(x, y):
    """MXNet's division: integer inputs divide with truncation, as C does (7 / 2 = 3, -7 / 2 = -3)."""
    dtype = jnp.result_type(x, y)
    if jnp.issubdtype(dtype, jnp.integer):
        return lax.div(*jnp.broadcast_arrays(jnp.asarray(x, dtype), jnp.asarray(y, dtype)))
    return jnp.divide(x, y)


def _as_dtype_of(fn: Callable) -> Callable:
    """A comparison or logical function returning 0/1 in its first input's dtype."""
    return lambda x, y: fn(x, y).astype(x.dtype)


_UNARY: dict[tuple[str, ...], Callable] = {
    ("abs",): jnp.abs, ("sign",): jnp.sign, ("round",): _round_half_away, ("rint",): _rint,
    ("ceil",): jnp.ceil, ("floor",): jnp.floor, ("trunc", "fix"): jnp.trunc,
    ("sqrt",): jnp.sqrt, ("rsqrt",): lax.rsqrt, ("cbrt",): jnp.cbrt, ("rcbrt",): lambda x: 1 / jnp.cbrt(x),
    ("square",): jnp.square, ("exp",): jnp.exp, ("expm1",): jnp.expm1, ("log",): jnp.log, ("log10",): jnp.log10,
    ("log2",): jnp.log2, ("log1p",): jnp.log1p, ("sin",): jnp.sin, ("cos",): jnp.cos, ("tan",): jnp.tan,
    ("arcsin",): jnp.arcsin, ("arccos",): jnp.arccos, ("arctan",): jnp.arctan, ("sinh",): jnp.sinh,
    ("cosh",): jnp.cosh, ("tanh",): functools.partial(layer_ops.activation, act_type="tanh"),
    ("arcsinh",): jnp.arcsinh, ("arccosh",): jnp.arccosh,
    ("arctanh",): jnp.arctanh, ("degrees",): jnp.degrees, ("radians",): jnp.radians, ("erf",): special.erf,
    ("erfinv",): special.erfinv, ("gamma",): lambda x: jnp.exp(special.gammaln(x)) * special.gammasgn(x),
    ("gammaln",): special.gammaln, ("reciprocal",): jnp.reciprocal, ("negative",): jnp.negative,
    # the activation big op: one graph node as native layers make, and one compiled kernel eagerly
    ("relu",): functools.partial(layer_ops.activation, act_type="relu"),
    ("sigmoid",): functools.partial(layer_ops.activation, act_type="sigmoid"),
    ("softsign",): functools.partial(layer_ops.activation, act_type="softsign"),
    ("log_sigmoid",): jax.nn.log_sigmoid, ("mish",): lambda x: x * jnp.tanh(jax.nn.softplus(x)),
    ("logical_not",): lambda x: jnp.logical_not(x).astype(x.dtype),
    ("identity", "_copy", "make_loss", "MakeLoss", "_np_copy"): lambda x: x,
    ("BlockGrad", "stop_gradient"): lax.stop_gradient,
}


def _unary(fn: Callable) -> Callable:
    return lambda ins, a, ctx: [fn(ins[0])]


for _names, _fn in _UNARY.items():
    register(*_names)(_unary(_fn))


@register("zeros_like", attr_order=("dtype",))
def zeros_like(ins: list, a: Attrs, ctx: OpContext) -> list:
    return [jnp.zeros_like(ins[0], dtype=a.dtype("dtype", None))]


@register("ones_like", attr_order=("dtype",))
def ones_like(ins: list, a: Attrs, ctx: OpContext) -> list:
    return [jnp.ones_like(ins[0], dtype=a.dtype("dtype", None))]


@register("hard_sigmoid")
def hard_sigmoid(ins: list, a: Attrs, ctx: OpContext) -> list:
    """``clip(alpha * x + beta, 0, 1)``."""
    return [jnp.clip(a.float("alpha", 0.2) * ins[0] + a.float("beta", 0.5), 0, 1)]


@register("clip")
def clip(ins: list, a: Attrs, ctx: OpContext) -> list:
    x = ins[0]
    return [jnp.clip(x, jnp.asarray(a.float("a_min"), x.dtype), jnp.asarray(a.float("a_max"), x.dtype))]


_BINARY: dict[tuple[str, ...], Callable] = {
    ("elemwise_add", "_plus", "_Plus", "_add", "broadcast_add", "broadcast_plus", "_grad_add"): jnp.add,
    ("elemwise_sub", "_minus", "_Minus", "_sub", "broadcast_sub", "broadcast_minus"): jnp.subtract,
    ("elemwise_mul", "_mul", "_Mul", "broadcast_mul"): jnp.multiply,
    ("elemwise_div", "_div", "_Div", "broadcast_div"): _divide,
    ("_mod", "_Mod", "broadcast_mod"): jnp.mod,
    ("_maximum", "_Maximum", "broadcast_maximum", "maximum"): jnp.maximum,
    ("_minimum", "_Minimum", "broadcast_minimum", "minimum"): jnp.minimum,
    ("_power", "_Power", "broadcast_power"): jnp.power,
    ("_hypot", "broadcast_hypot"): jnp.hypot,
    ("arctan2", "_arctan2"): jnp.arctan2,
    ("_equal", "broadcast_equal", "equal"): _as_dtype_of(jnp.equal),
    ("_not_equal", "broadcast_not_equal", "not_equal"): _as_dtype_of(jnp.not_equal),
    ("_greater", "broadcast_greater", "greater"): _as_dtype_of(jnp.greater),
    ("_greater_equal", "broadcast_greater_equal", "greater_equal"): _as_dtype_of(jnp.greater_equal),
    ("_lesser", "broadcast_lesser", "lesser"): _as_dtype_of(jnp.less),
    ("_lesser_equal", "broadcast_lesser_equal", "lesser_equal"): _as_dtype_of(jnp.less_equal),
    ("_logical_and", "broadcast_logical_and", "logical_and"):
        _as_dtype_of(lambda x, y: jnp.logical_and(x != 0, y != 0)),
    ("_logical_or", "broadcast_logical_or", "logical_or"):
        _as_dtype_of(lambda x, y: jnp.logical_or(x != 0, y != 0)),
    ("_logical_xor", "broadcast_logical_xor", "logical_xor"):
        _as_dtype_of(lambda x, y: jnp.logical_xor(x != 0, y != 0)),
}


def _binary(fn: Callable) -> Callable:
    def run(ins: list, a: Attrs, ctx: OpContext) -> list:
        return [fn(ins[0], ins[1])]
    return run


for _names, _fn in _BINARY.items():
    register(*_names, inputs=("lhs", "rhs"))(_binary(_fn))


_SCALAR: dict[tuple[str, ...], Callable] = {
    ("_plus_scalar", "_PlusScalar"): jnp.add, ("_minus_scalar", "_MinusScalar"): jnp.subtract,
    ("_rminus_scalar", "_RMinusScalar"): lambda x, s: s - x, ("_mul_scalar", "_MulScalar"): jnp.multiply,
    ("_div_scalar", "_DivScalar"): _divide, ("_rdiv_scalar", "_RDivScalar"): lambda x, s: _divide(s, x),
    ("_mod_scalar", "_ModScalar"): jnp.mod, ("_rmod_scalar", "_RModScalar"): lambda x, s: jnp.mod(s, x),
    ("_power_scalar", "_PowerScalar"): jnp.power, ("_rpower_scalar", "_RPowerScalar"): lambda x, s: jnp.power(s, x),
    ("_maximum_scalar", "_MaximumScalar"): jnp.maximum, ("_minimum_scalar", "_MinimumScalar"): jnp.minimum,
    ("_hypot_scalar", "_HypotScalar"): jnp.hypot,
    ("_equal_scalar", "_EqualScalar"): _as_dtype_of(jnp.equal),
    ("_not_equal_scalar", "_NotEqualScalar"): _as_dtype_of(jnp.not_equal),
    ("_greater_scalar", "_GreaterScalar"): _as_dtype_of(jnp.greater),
    ("_greater_equal_scalar", "_GreaterEqualScalar"): _as_dtype_of(jnp.greater_equal),
    ("_lesser_scalar", "_LesserScalar"): _as_dtype_of(jnp.less),
    ("_lesser_equal_scalar", "_LesserEqualScalar"): _as_dtype_of(jnp.less_equal),
    ("_logical_and_scalar",): _as_dtype_of(lambda x, s: jnp.logical_and(x != 0, s != 0)),
    ("_logical_or_scalar",): _as_dtype_of(lambda x, s: jnp.logical_or(x != 0, s != 0)),
    ("_logical_xor_scalar",): _as_dtype_of(lambda x, s: jnp.logical_xor(x != 0, s != 0)),
}


def _scalar(fn: Callable) -> Callable:
    def run(ins: list, a: Attrs, ctx: OpContext) -> list:
        x = ins[0]
        return [fn(x, jnp.asarray(a.float("scalar", 0.0), x.dtype))]
    return run


for _names, _fn in _SCALAR.items():
    register(*_names, attr_order=("scalar",))(_scalar(_fn))


@register("power", inputs=("base", "exp"))
def power(ins: list, a: Attrs, ctx: OpContext) -> list:
    """``base ** exp``, broadcasting (MXNet's ``nd.power`` names its inputs so)."""
    return [jnp.power(ins[0], ins[1])]


@register("_identity_with_attr_like_rhs", inputs=("lhs", "rhs"))
def identity_like_rhs(ins: list, a: Attrs, ctx: OpContext) -> list:
    return [ins[0]]


@register("add_n", "ElementWiseSum", "_add_n", variadic=True)
def add_n(ins: list, a: Attrs, ctx: OpContext) -> list:
    total = ins[0]
    for x in ins[1:]:
        total = total + x
    return [total]
