"""One recorded node per alias operation: ``mx.np``/``mx.nd`` functions and handle operators called while
recording are staged on the tape as a single call of the whole function, instead of one node per JAX
primitive inside it (an ``npx.pick`` is six of them), so that a training step written on handles records
as few nodes as the Gluon loop's blocks do.

A function is staged when its result's shapes, dtypes and structure follow from its inputs' shapes and
dtypes, its other arguments and the training flag: its first call with a new such key is traced abstractly
(``jax.eval_shape``) to learn them. A function that draws random numbers, needs concrete values or takes
unhashable arguments is not staged; it runs primitive by primitive on the recording as before.
"""
from __future__ import annotations

from typing import Any, Callable

import jax
import jax.numpy as jnp
from jax import core as _jax_core

from .. import autograd as _autograd
from .._core import scopes as _scopes, stream as _stream
from .._core.lazy import LazyArray

__all__ = ["staged_call", "UNSTAGED"]

UNSTAGED = object()  # the plan of a key whose function cannot be staged
_PLANS: dict = {}  # key -> _Plan or UNSTAGED
_SCALARS: dict = {}  # (type, number) -> 0-d array
MAX_PLANS = 4096


class _Plan:
    """How one staged key runs: the arrays' places among the flat arguments, and the result's avals and
    structure."""

    __slots__ = ("fn", "tree", "static", "positions", "training", "out_avals", "out_tree")

    def __init__(self, fn: Callable, tree: Any, static: list, positions: list, training: bool):
        self.fn, self.tree, self.static, self.positions, self.training = fn, tree, static, positions, training
        self.out_avals: list = []
        self.out_tree: Any = None

    def __call__(self, *arrays: Any) -> list:
        leaves = list(self.static)
        for position, array in zip(self.positions, arrays):
            leaves[position] = array
        args, kwargs = jax.tree_util.tree_unflatten(self.tree, leaves)
        with _autograd.train_mode() if self.training else _autograd.predict_mode():
            result = self.fn(*args, **kwargs)
        flat, self.out_tree = jax.tree_util.tree_flatten(result)
        return flat


def _plan_for(key: tuple, fn: Callable, tree: Any, static: list, positions: list, arrays: list,
              training: bool) -> Any:
    plan = _Plan(fn, tree, static, positions, training)
    state = _stream.get_state()
    try:
        with _scopes.no_frame():
            shapes = [jax.ShapeDtypeStruct(a.shape, a.dtype, weak_type=a.aval.weak_type) for a in arrays]
            out = jax.eval_shape(lambda *values: plan(*values), *shapes)
        drew = _stream.get_state() != state
    except Exception:  # noqa: BLE001  needs concrete values (or fails): run as before, which reports it
        out, drew = None, False
    _stream.set_state(state)
    if out is None or drew or not all(isinstance(o, jax.ShapeDtypeStruct) for o in out):
        result: Any = UNSTAGED
    else:
        plan.out_avals = [jax.core.ShapedArray(o.shape, o.dtype, weak_type=o.weak_type) for o in out]
        result = plan
    if len(_PLANS) >= MAX_PLANS:
        _PLANS.clear()
    _PLANS[key] = result
    return result


def _scalar(number: int | float) -> jax.Array:
    """``number`` as a weakly typed 0-d array, made once per value (a learning rate recurs every step)."""
    key = (type(number), number)
    array = _SCALARS.get(key)
    if array is None:
        if len(_SCALARS) >= MAX_PLANS:
            _SCALARS.clear()
        with _scopes.no_frame():
            array = _SCALARS[key] = jnp.asarray(number)
    return array


def staged_call(tape: Any, fn: Callable, args: Any, kwargs: dict | None, scalars: bool = False) -> Any:
    """``fn(*args, **kwargs)`` as one node on the open recording ``tape``; ``UNSTAGED`` when it cannot be
    (the caller then runs it on the recording primitive by primitive). With ``scalars``, Python numbers
    among the arguments are inputs (weakly typed, as JAX treats them) rather than part of the key, so that
    ``lr * grad`` with a changing ``lr`` stays one program."""
    leaves, tree = jax.tree_util.tree_flatten((tuple(args), kwargs or {}))
    positions, arrays, static, signature = [], [], [], []
    for i, leaf in enumerate(leaves):
        if scalars and type(leaf) in (int, float):
            leaf = _scalar(leaf)
        if isinstance(leaf, jax.Array):
            if isinstance(leaf, _jax_core.Tracer) and not (type(leaf) is LazyArray and leaf._tape is tape):
                return UNSTAGED  # a value of a trace (hybridize, jax.jit): JAX's own tracing handles it
            positions.append(i)
            arrays.append(leaf)
            static.append(None)
            signature.append(leaf.aval)
        else:
            static.append(leaf)
            signature.append(type(leaf))
    training = _autograd.is_training()
    key = (fn, tree, tuple(static), tuple(signature), training)
    try:
        plan = _PLANS.get(key)
    except TypeError:  # an unhashable argument
        return UNSTAGED
    if plan is None:
        plan = _plan_for(key, fn, tree, static, positions, arrays, training)
    if plan is UNSTAGED:
        return UNSTAGED
    results = tape.call(plan, ("alias", key), arrays, plan.out_avals, keyed_inputs=False)
    return jax.tree_util.tree_unflatten(plan.out_tree, results)

