"""The JAX primitives a symbol file may name, and per-primitive parameter fix-ups.

The table holds the ``*_p`` primitives of ``jax.lax`` (minus control flow,
collectives, effects and those whose parameters are programs) and the PRNG
primitives that ``jax.random`` emits, found by tracing its public functions.
A file naming anything else is rejected.
"""
from __future__ import annotations

import functools
from typing import Any

import jax
import jax.extend
import jax.numpy as jnp
import numpy as np
from jax import lax

from ..errors import ExportError, FormatError

__all__ = ["primitive_table", "lookup", "encode_fixup", "decode_fixup", "INLINED_CALLS"]

#: Call-like primitives replaced by their body at export (the primal computation is kept;
#: a custom derivative rule is replaced by the derivative of the body).
INLINED_CALLS = {"custom_jvp_call": "call_jaxpr", "custom_vjp_call": "call_jaxpr",
                 "custom_vjp_call_jaxpr": "fun_jaxpr", "checkpoint": "jaxpr", "remat": "jaxpr"}

_EXCLUDED = {"cond", "while", "scan", "psum", "pmax", "pmin", "all_gather", "all_to_all", "ppermute",
             "ragged_all_to_all", "axis_index", "after_all", "create_token", "device_put", "sharding_constraint",
             "custom_linear_solve", "dce_sink", "stage", "reduce", "reduce_window", "select_and_scatter",
             "optimization_barrier"}

_SCATTERS = {"scatter-add": lax.scatter_add, "scatter-mul": lax.scatter_mul, "scatter-min": lax.scatter_min,
             "scatter-max": lax.scatter_max, "scatter-sub": lax.scatter_sub}


def _random_primitives() -> list:
    def fn(key, data):
        return (jax.random.fold_in(key, 1), jax.random.bits(key, (2,)), jax.random.key_data(key),
                jax.random.wrap_key_data(data), jax.random.split(key), jax.random.key(0))

    jaxpr = jax.make_jaxpr(fn)(jax.random.key(0), jnp.zeros(2, jnp.uint32))
    return [eqn.primitive for eqn in jaxpr.eqns] + [jax.extend.random.threefry2x32_p]


@functools.lru_cache(maxsize=None)
def primitive_table() -> dict[str, Any]:
    """Primitive objects by name (``'add'``, ``'dot_general'``, ``'random_fold_in'``, ...)."""
    table = {}
    for attr in dir(lax):
        prim = getattr(lax, attr)
        if attr.endswith("_p") and hasattr(prim, "bind") and prim.name not in _EXCLUDED:
            table[prim.name] = prim
    for prim in _random_primitives():
        table[prim.name] = prim
    return table


def lookup(name: Any, where: str) -> Any:
    """The primitive named ``name``; FormatError naming it if it is not in the table."""
    prim = primitive_table().get(name) if isinstance(name, str) else None
    if prim is None:
        raise FormatError(f"{where}: unknown or unsupported primitive {name!r:.60}")
    return prim


def encode_fixup(name: str, params: dict) -> dict:
    """Parameters to write for primitive ``name`` (scatter update programs are dropped: they are
    rebuilt from the primitive on reading)."""
    if name in _SCATTERS and "update_jaxpr" in params:
        if params.get("update_consts"):
            raise ExportError("a scatter whose update function has constants cannot be exported")
        params = {k: v for k, v in params.items() if k not in ("update_jaxpr", "update_consts")}
    return params


@functools.lru_cache(maxsize=None)
def _scatter_update(name: str, dtype: np.dtype) -> tuple:
    dnums = lax.ScatterDimensionNumbers(update_window_dims=(), inserted_window_dims=(0,),
                                        scatter_dims_to_operand_dims=(0,))
    fn = _SCATTERS[name]
    jaxpr = jax.make_jaxpr(lambda o, u: fn(o, np.zeros((1, 1), np.int32), u, dnums))(
        jax.ShapeDtypeStruct((2,), dtype), jax.ShapeDtypeStruct((1,), dtype))
    eqn = next(e for e in jaxpr.eqns if e.primitive.name == name)
    return eqn.params["update_jaxpr"], eqn.params["update_consts"]


def decode_fixup(name: str, params: dict, input_dtypes: list, where: str) -> dict:
    """Inverse of :func:`encode_fixup`, given the node's input dtypes."""
    if name in _SCATTERS:
        if "update_jaxpr" in params or "update_consts" in params or not input_dtypes:
            raise FormatError(f"{where}: invalid scatter parameters")
        try:
            update_jaxpr, update_consts = _scatter_update(name, np.dtype(input_dtypes[0]))
        except (TypeError, ValueError) as exc:
            raise FormatError(f"{where}: cannot scatter values of dtype {input_dtypes[0]}") from exc
        params = {**params, "update_jaxpr": update_jaxpr, "update_consts": update_consts}
    return params
