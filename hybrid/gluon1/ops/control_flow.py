"""``F.contrib.foreach``, ``F.contrib.while_loop`` and ``F.contrib.cond``: MXNet's control-flow operators,
which take Python functions, on ``lax.scan`` and ``lax.cond``.

They exist for ``F`` only: the symbol importer does not read MXNet's control-flow subgraphs.
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

import jax
import jax.numpy as jnp
from jax import lax

__all__ = ["foreach", "while_loop", "cond"]


def _as_list(value: Any) -> tuple[list, bool]:
    """(items, was_a_single_array)."""
    if isinstance(value, (list, tuple)):
        return list(value), False
    return [value], True


def _concrete(value: Any) -> bool:
    return not isinstance(value, jax.core.Tracer)


def foreach(body: Callable, data: Any, init_states: Any, name: str | None = None) -> tuple[Any, Any]:
    """``body(data_t, states) -> (outputs_t, new_states)`` over axis 0 of ``data`` (an array or a list of
    arrays); returns ``(outputs stacked on axis 0, final states)`` with the nesting ``body`` gave."""
    items, single_data = _as_list(data)
    states, single_state = _as_list(init_states)
    shape: dict[str, bool] = {}

    def step(carry: list, xs: list) -> tuple[list, list]:
        out, new = body(xs[0] if single_data else xs, carry[0] if single_state else carry)
        outs, shape["single_out"] = _as_list(out)
        new_states, _ = _as_list(new)
        if len(new_states) != len(carry):
            raise ValueError(f"F.contrib.foreach: the body returned {len(new_states)} states, "
                             f"init_states has {len(carry)}")
        return [jnp.asarray(s, c.dtype) for s, c in zip(new_states, carry)], outs

    final, stacked = lax.scan(step, [jnp.asarray(s) for s in states], [jnp.asarray(x) for x in items])
    outputs = stacked[0] if shape["single_out"] else stacked
    return outputs, final[0] if single_state else final


def while_loop(cond: Callable, func: Callable, loop_vars: Any, max_iterations: int | None = None,
               name: str | None = None) -> tuple[list, Any]:
    """Runs ``func(*loop_vars) -> (step_outputs, new_loop_vars)`` while ``cond(*loop_vars)`` holds, at most
    ``max_iterations`` times. Returns ``(outputs, final loop_vars)``: each output stacks the steps' values
    on axis 0 in ``max_iterations`` rows, as MXNet 1.9.1 returns them; the rows past the last step are
    zeros (MXNet leaves them undefined)."""
    if max_iterations is None or int(max_iterations) < 1:
        raise ValueError("F.contrib.while_loop needs max_iterations >= 1 (the outputs' static length)")
    steps = int(max_iterations)
    variables, single = _as_list(loop_vars)
    variables = [jnp.asarray(v) for v in variables]

    def call(vs: list) -> Any:
        return func(*vs)


    def step(carry: tuple, _: Any) -> tuple[tuple, list]:
        vs, active, count = carry
        go = jnp.logical_and(active, jnp.asarray(cond(*vs)).reshape(()).astype(bool))
        outs, new = _split_step(call(vs))
        new = [jnp.where(go, n, v).astype(v.dtype) for n, v in zip(new, vs)]
        outs = [jnp.where(go, o, jnp.zeros_like(o)) for o in outs]
        return (new, go, count + go.astype(jnp.int32)), outs

    (final, _, _), stacked = lax.scan(step, (variables, jnp.bool_(True), jnp.int32(0)), None, length=steps)
    return stacked, final[0] if single else final


def _split_step(result: Any) -> tuple[list, list]:
    if not isinstance(result, (list, tuple)) or len(result) != 2:
        raise ValueError("F.contrib.while_loop: func must return (step_outputs, new_loop_vars)")
    outs, _ = _as_list(result[0]) if result[0] is not None else ([], False)
    new, _ = _as_list(result[1])
    return [jnp.asarray(o) for o in outs], [jnp.asarray(v) for v in new]


def cond(pred: Any, then_func: Callable, else_func: Callable, name: str | None = None) -> Any:
    """``then_func()`` if ``pred`` (a one-element array) is non-zero, else ``else_func()``. A concrete
    ``pred`` runs only the branch taken, as MXNet's ``nd`` does; under tracing both branches are traced
    and must return arrays of the same shapes."""
    flag = jnp.asarray(pred).reshape(()) != 0
    if _concrete(flag):
        return then_func() if bool(flag) else else_func()
    return lax.cond(flag, lambda _: then_func(), lambda _: else_func(), None)


def attach(namespace: Any, functions: Sequence[Callable] = (foreach, while_loop, cond)) -> None:
    """Puts the control-flow functions on ``namespace`` (``F.contrib``)."""
    for fn in functions:
        namespace.__dict__[fn.__name__] = fn
