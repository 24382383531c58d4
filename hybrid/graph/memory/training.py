"""Forward-plus-backward graphs of pure functions, for planning training memory.

``training_graph(fn, *args)`` traces ``jax.vjp`` of ``fn``: the graph's inputs are the
flattened ``args`` followed by one cotangent per output leaf of ``fn``; its outputs are
``fn``'s output leaves followed by the gradients. Dead nodes are removed (as XLA would).
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

import jax
import jax.numpy as jnp

from ..ir import Graph
from ..passes.dce import dce
from .._trace import trace

__all__ = ["training_graph", "training_step"]


def _spec(leaf: Any) -> jax.ShapeDtypeStruct:
    if not (hasattr(leaf, "shape") and hasattr(leaf, "dtype")):
        leaf = jnp.asarray(leaf)
    return jax.ShapeDtypeStruct(tuple(leaf.shape), leaf.dtype)


def training_step(fn: Callable, *args: Any, wrt: Sequence[int] | None = None,
                  input_names: Sequence[str] | None = None) -> tuple[Callable, list[jax.ShapeDtypeStruct], list[str]]:
    """The flat function ``step(*leaves, *cotangents) -> [*outputs, *gradients]`` behind
    :func:`training_graph`, its input specs and input names (``input_names`` for the leaves of
    ``args``, default ``in0``...; then ``cotangent0``...).

    ``wrt`` lists the positions in ``args`` to differentiate (default: all); within them only
    leaves of inexact dtype get gradients. Raises TypeError if an output of ``fn`` is not of
    an inexact dtype (it could not take a cotangent).
    """
    wanted = set(range(len(args)) if wrt is None else wrt)
    leaves, tree = jax.tree_util.tree_flatten(args)
    specs = [_spec(leaf) for leaf in leaves]
    first = 0
    differentiated = []
    for position, arg in enumerate(args):
        count = len(jax.tree_util.tree_leaves(arg))
        if position in wanted:
            differentiated += [i for i in range(first, first + count) if jnp.issubdtype(specs[i].dtype, jnp.inexact)]
        first += count
    out_leaves, out_tree = jax.tree_util.tree_flatten(jax.eval_shape(fn, *jax.tree_util.tree_unflatten(tree, specs)))
    for i, out in enumerate(out_leaves):
        if not jnp.issubdtype(out.dtype, jnp.inexact):
            raise TypeError(f"training_graph: output {i} of fn has dtype {out.dtype}; every output needs an "
                            "inexact (floating or complex) dtype to take a cotangent")
    n_leaves = len(leaves)

    def step(*flat):
        primals = list(flat[:n_leaves])

        def partial(*diff):
            full = list(primals)
            for i, value in zip(differentiated, diff):
                full[i] = value
            return fn(*jax.tree_util.tree_unflatten(tree, full))

        out, pullback = jax.vjp(partial, *[primals[i] for i in differentiated])
        grads = pullback(jax.tree_util.tree_unflatten(out_tree, list(flat[n_leaves:])))
        return [*jax.tree_util.tree_leaves(out), *grads]

    cotangents = [jax.ShapeDtypeStruct(o.shape, o.dtype) for o in out_leaves]
    names = list(input_names) if input_names is not None else [f"in{i}" for i in range(n_leaves)]
    if len(names) != n_leaves:
        raise ValueError(f"training_graph: {len(names)} input names for {n_leaves} input leaves")
    names += [f"cotangent{j}" for j in range(len(cotangents))]
    return step, specs + cotangents, names


def training_graph(fn: Callable, *args: Any, wrt: Sequence[int] | None = None,
                   input_names: Sequence[str] | None = None) -> Graph:
    """The forward and backward graph of ``fn(*args)`` (arrays or ShapeDtypeStructs, possibly nested).

    Inputs: the leaves of ``args``, then a cotangent per output leaf. Outputs: the output leaves,
    then the gradients of the inexact leaves of the ``wrt`` arguments (default: all arguments).
    ``input_names`` names the leaves of ``args`` (default ``in0``, ``in1``...).
    """
    step, specs, names = training_step(fn, *args, wrt=wrt, input_names=input_names)
    graph, _ = dce(trace(step, *specs, input_names=names))
    return graph
