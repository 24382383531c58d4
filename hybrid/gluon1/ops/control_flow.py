"""MXNet's control flow on ``lax.scan`` and ``lax.cond``: ``F.contrib.foreach``, ``F.contrib.while_loop`` and
``F.contrib.cond``, which take Python functions, and the operators ``_foreach``, ``_while_loop`` and ``_cond``
of symbol files, which take their bodies as subgraphs (``OpContext.subgraphs``) and say by position
lists (``in_data_locs``, ``cond_input_locs``, ...) which of the node's inputs each subgraph input is.
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

import jax
import jax.numpy as jnp
from jax import lax

from ..._core.lazy import LazyArray
from ._registry import Attrs, OpContext, register

__all__ = ["foreach", "while_loop", "cond"]


def _as_list(value: Any) -> tuple[list, bool]:
    """(items, was_a_single_array)."""
    if isinstance(value, (list, tuple)):
        return list(value), False
    return [value], True


def _concrete(value: Any) -> bool:
    return not isinstance(value, jax.core.Tracer)


def _imperative(values: Sequence) -> bool:
    """Whether the loop runs step by step in Python, as MXNet's ``nd`` runs it: no value belongs to a trace
    (``hybridize``, ``jax.jit``). Values recorded by ``autograd.record()`` count as concrete: the body then
    records its operations (and reads its parameters) step by step, so gradients flow through them."""
    return all(_concrete(v) or type(v) is LazyArray for v in values)


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

    carry = [jnp.asarray(s) for s in states]
    sequences = [jnp.asarray(x) for x in items]
    if _imperative(carry + sequences) and sequences[0].shape[0] > 0:
        per_step = []
        for t in range(sequences[0].shape[0]):
            carry, outs = step(carry, [x[t] for x in sequences])
            per_step.append(outs)
        final, stacked = carry, [jnp.stack(column) for column in zip(*per_step)]
    else:
        final, stacked = lax.scan(step, carry, sequences)
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

    if _imperative(variables):
        final, per_step = variables, []
        while len(per_step) < steps and bool(jnp.asarray(cond(*final)).reshape(())):
            outs, final = _split_step(call(final))
            per_step.append(outs)
        if not per_step:  # no step taken: the outputs' shapes come from tracing one
            (final, _, _), stacked = lax.scan(step, (variables, jnp.bool_(True), jnp.int32(0)), None,
                                              length=steps)
        else:
            stacked = [jnp.concatenate([jnp.stack(column), jnp.zeros((steps - len(column),) + column[0].shape,
                                                                     column[0].dtype)])
                       for column in zip(*per_step)]
        return stacked, final[0] if single else final
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
    if _imperative([flag]):
        return then_func() if bool(flag) else else_func()
    return lax.cond(flag, lambda _: then_func(), lambda _: else_func(), None)


def attach(namespace: Any, functions: Sequence[Callable] = (foreach, while_loop, cond)) -> None:
    """Puts the control-flow functions on ``namespace`` (``F.contrib``)."""
    for fn in functions:
        namespace.__dict__[fn.__name__] = fn


def _subgraphs(a: Attrs, ctx: OpContext, count: int) -> tuple:
    if len(ctx.subgraphs) != count:
        raise a.fail(f"expected {count} subgraph(s), got {len(ctx.subgraphs)} (this operator only runs from a "
                     "symbol file; in hybrid_forward use F.contrib.foreach/while_loop/cond)")
    return ctx.subgraphs


def _locs(a: Attrs, key: str, limit: int) -> tuple[int, ...]:
    locs = a.tuple(key, ())
    if any(not 0 <= loc < limit for loc in locs):
        raise a.fail(f"attribute {key}={list(locs)} must index the {limit} input(s)")
    return locs


def _num_outputs(a: Attrs) -> int:
    return a.int("num_outputs")


@register("_foreach", variadic=True, num_outputs=_num_outputs, needs_ctx=True)
def foreach_op(ins: list, a: Attrs, ctx: OpContext) -> list:
    """The node's inputs are the sequences (sliced on axis 0 per step), the initial states, then the other
    inputs; ``in_data_locs``/``in_state_locs``/``remain_locs`` place them among the body's inputs. The body
    returns ``num_out_data`` step outputs (stacked on axis 0), then the new states. Outputs: the stacked
    step outputs, then the final states."""
    (body,) = _subgraphs(a, ctx, 1)
    n = len(ins)
    data_locs, state_locs = _locs(a, "in_data_locs", n), _locs(a, "in_state_locs", n)
    remain_locs, n_out = _locs(a, "remain_locs", n), a.int("num_out_data")
    if len(data_locs) + len(state_locs) + len(remain_locs) != n:
        raise a.fail(f"{n} inputs, but in_data_locs, in_state_locs and remain_locs place "
                     f"{len(data_locs) + len(state_locs) + len(remain_locs)}")
    data, states = ins[:len(data_locs)], ins[len(data_locs):len(data_locs) + len(state_locs)]
    remain = ins[len(data_locs) + len(state_locs):]

    def step(carry: tuple, xs: list) -> tuple[tuple, list]:
        states, remain = carry  # the other inputs ride in the carry: operands, not closed-over values
        args: list = [None] * n
        for locs, values in ((data_locs, xs), (state_locs, states), (remain_locs, remain)):
            for loc, value in zip(locs, values):
                args[loc] = value
        outs = body(args)
        if len(outs) != n_out + len(states):
            raise a.fail(f"the body gave {len(outs)} outputs, num_out_data={n_out} and {len(states)} state(s)")
        return ([jnp.asarray(o, c.dtype) for o, c in zip(outs[n_out:], states)], remain), list(outs[:n_out])

    (final, _), stacked = lax.scan(step, ([jnp.asarray(s) for s in states], list(remain)),
                                   [jnp.asarray(x) for x in data])
    return list(stacked) + list(final)


@register("_while_loop", variadic=True, num_outputs=_num_outputs, needs_ctx=True)
def while_loop_op(ins: list, a: Attrs, ctx: OpContext) -> list:
    """Subgraphs ``cond`` (inputs ``cond_input_locs`` of the node's) and ``func`` (inputs
    ``func_input_locs``; ``func_var_locs`` are its loop variables). ``func`` returns ``num_out_data`` step
    outputs, then the new loop variables. Outputs: each step output stacked in ``max_iterations`` rows (the
    rows past the last step are zeros; MXNet leaves them unset), then the final loop variables."""
    cond_graph, func_graph = _subgraphs(a, ctx, 2)
    n = len(ins)
    cond_locs, func_locs = _locs(a, "cond_input_locs", n), _locs(a, "func_input_locs", n)
    var_locs, n_out = _locs(a, "func_var_locs", len(func_locs)), a.int("num_out_data")
    steps = a.int("max_iterations")
    if steps < 1:
        raise a.fail(f"max_iterations={steps} must be >= 1")
    homes = [func_locs[j] for j in var_locs]  # the node input each loop variable starts from

    def inputs(values: list, variables: list, locs: tuple[int, ...]) -> list:
        values = list(values)
        for home, value in zip(homes, variables):
            values[home] = value
        return [values[loc] for loc in locs]

    def step(carry: tuple, _: Any) -> tuple[tuple, list]:
        variables, active, values = carry  # the node's inputs ride in the carry: operands, not closed over
        go = jnp.logical_and(active, jnp.asarray(cond_graph(inputs(values, variables, cond_locs))[0])
                             .reshape(()) != 0)
        outs = func_graph(inputs(values, variables, func_locs))
        if len(outs) != n_out + len(variables):
            raise a.fail(f"func gave {len(outs)} outputs, num_out_data={n_out} and {len(variables)} loop variable(s)")
        new = [jnp.where(go, o, v).astype(v.dtype) for o, v in zip(outs[n_out:], variables)]
        return (new, go, values), [jnp.where(go, o, jnp.zeros_like(o)) for o in outs[:n_out]]

    start = [jnp.asarray(ins[home]) for home in homes]
    (final, _, _), stacked = lax.scan(step, (start, jnp.bool_(True), [jnp.asarray(v) for v in ins]), None,
                                      length=steps)
    return list(stacked) + list(final)


@register("_cond", variadic=True, num_outputs=_num_outputs, needs_ctx=True)
def cond_op(ins: list, a: Attrs, ctx: OpContext) -> list:
    """Subgraphs ``pred`` (inputs ``cond_input_locs``), ``then`` (``then_input_locs``) and ``else``
    (``else_input_locs``): the outputs of ``then`` if ``pred``'s one element is non-zero, else of ``else``,
    as one ``lax.cond`` (both branches give outputs of the same shapes, as MXNet's symbolic cond needs)."""
    pred_graph, then_graph, else_graph = _subgraphs(a, ctx, 3)
    n = len(ins)
    locs = {key: _locs(a, key, n) for key in ("cond_input_locs", "then_input_locs", "else_input_locs")}

    def run(graph: Callable, key: str, values: Sequence) -> list:
        return list(graph([values[loc] for loc in locs[key]]))
    flag = jnp.asarray(run(pred_graph, "cond_input_locs", ins)[0]).reshape(()) != 0
    return lax.cond(flag, lambda values: run(then_graph, "then_input_locs", values),
                    lambda values: run(else_graph, "else_input_locs", values), list(ins))
