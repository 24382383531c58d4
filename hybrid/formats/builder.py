"""GraphBuilder: write a graph in code (hybrid has no Symbol API), for ``SymbolBlock(outputs, inputs, params)``.

    b = GraphBuilder()
    x = b.input("data", (4, 8))
    w, bias = b.input("fc.weight", (16, 8)), b.input("fc.bias", (16,))
    h = b.op("dense", x, w, bias, flatten=True)          # a big op (hybrid.graph.ops)
    y = b.prim("tanh", h)                                # a JAX primitive with its parameters
    net = hybrid.SymbolBlock(y, x)                       # 'fc.weight', 'fc.bias' become Parameters

Every call computes its output shapes and dtypes at once (``jax.eval_shape``),
so mistakes raise where they are made.
"""
from __future__ import annotations

from typing import Any, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from ..graph import ops
from ..graph.ir import Graph, Node, Value
from ..graph._lower import evaluate_node
from . import prims

__all__ = ["GraphBuilder", "build_graph"]


class _ConstValue(Value):
    """A graph constant made by :meth:`GraphBuilder.const`; carries its array."""

    __slots__ = ("array",)

    def __init__(self, array: np.ndarray):
        super().__init__(array.shape, array.dtype)
        self.array = array


class GraphBuilder:
    """Creates Values and Nodes of hybrid's graph IR (see the module docstring)."""

    def __init__(self):
        self._names: set[str] = set()

    def input(self, name: str, shape: Sequence[int], dtype: Any = "float32") -> Value:
        """A named graph input: a data input or a parameter (decided by ``SymbolBlock``)."""
        if not isinstance(name, str) or not name or name.startswith("%") or name in self._names:
            raise ValueError(f"GraphBuilder.input: name {name!r} must be a new, non-empty string not starting "
                             "with '%'")
        self._names.add(name)
        return Value(tuple(int(d) for d in shape), np.dtype(jnp.dtype(dtype)), name)

    def const(self, value: Any, dtype: Any = None) -> Value:
        """A constant array (Python scalars get JAX's default dtypes, e.g. float32)."""
        array = np.asarray(jnp.asarray(value, dtype=dtype))
        return _ConstValue(array)

    def _value(self, item: Any) -> Any:
        if item is None or isinstance(item, Value):
            return item
        return self.const(item)

    def op(self, name: str, *inputs: Any, **attrs: Any) -> Value | tuple[Value, ...]:
        """Apply big op ``name`` (e.g. ``'dense'``, ``'convolution'``, ``'batch_norm'``) with static ``attrs``.

        ``inputs`` are Values, arrays or None (an absent optional input such as a bias).
        Returns one Value, or a tuple for ops with several outputs.
        """
        inputs = tuple(self._value(i) for i in inputs)
        leaves, in_tree = jax.tree_util.tree_flatten(inputs)
        bound = ops._bind(name, attrs, in_tree)
        node_attrs = {**dict(bound.attrs), "_in_tree": in_tree}
        return self._emit(Node(name, "op", leaves, [], node_attrs, bound))

    def prim(self, name: str, *inputs: Any, **params: Any) -> Value | tuple[Value, ...]:
        """Apply JAX primitive ``name`` (e.g. ``'tanh'``, ``'add'``, ``'reshape'``) with its parameters,
        as they appear in a jaxpr (``b.prim('reshape', x, new_sizes=(4, 2), dimensions=None, sharding=None)``)."""
        prim = prims.lookup(name, "GraphBuilder.prim")
        leaves = [self._value(i) for i in inputs]
        return self._emit(Node(prim.name, "prim", leaves, [], params, prim))

    def _emit(self, node: Node) -> Value | tuple[Value, ...]:
        specs = [jax.ShapeDtypeStruct(v.shape, v.dtype) for v in node.inputs]
        results = jax.eval_shape(lambda *args: evaluate_node(node, list(args)), *specs)
        for i, result in enumerate(results):
            value = Value(result.shape, result.dtype)
            value.producer, value.index = node, i
            node.outputs.append(value)
        return node.outputs[0] if len(node.outputs) == 1 else tuple(node.outputs)


def build_graph(outputs: Sequence[Value], data: Sequence[Value]) -> Graph:
    """The Graph computing ``outputs``: inputs are the parameters (named inputs not in ``data``,
    in order of creation) followed by ``data``; nodes in creation order."""
    nodes: dict[int, Node] = {}
    leaves: dict[int, Value] = {}
    stack = list(outputs)
    while stack:
        value = stack.pop()
        if not isinstance(value, Value):
            raise TypeError(f"SymbolBlock: expected graph Values (from GraphBuilder), got {type(value).__name__}")
        if value.producer is None:
            leaves[value.id] = value
        elif id(value.producer) not in nodes:
            nodes[id(value.producer)] = value.producer
            stack.extend(value.producer.inputs)
    ordered = sorted(nodes.values(), key=lambda n: n.outputs[0].id)
    for value in data:
        if not isinstance(value, Value) or value.producer is not None or not value.name:
            raise TypeError(f"SymbolBlock: inputs must be named inputs from GraphBuilder.input, got {value!r}")
    data_ids = {v.id for v in data}
    params = sorted((v for v in leaves.values() if v.name and v.id not in data_ids), key=lambda v: v.id)
    consts: dict[Value, Any] = {v: v.array for v in sorted(leaves.values(), key=lambda v: v.id)
                                if isinstance(v, _ConstValue)}
    unnamed = [v for v in leaves.values() if not v.name and not isinstance(v, _ConstValue)]
    if unnamed:
        raise TypeError(f"SymbolBlock: values {unnamed} have no producer, name or constant value")
    names = [v.name for v in params + list(data)]
    if len(set(names)) != len(names):
        raise ValueError(f"SymbolBlock: graph input names must be unique, got {names}")
    graph = Graph(params + list(data), list(outputs), ordered, consts)
    graph.verify()
    return graph
