"""The symbolic graph IR: Values with shapes and dtypes, Nodes, and Graphs.

A Graph is a list of Nodes in topological order.  A Node is either a *big op*
(``kind='op'``: a layer operation from :mod:`hybrid.graph.ops`, e.g.
``dense``), or a JAX *primitive* (``kind='prim'``: ``add``, ``dot_general``,
``custom_jvp_call`` ...).  Values are single-assignment; graph inputs and
constants have no producer.
"""
from __future__ import annotations

import itertools
from typing import Any, Iterable

import numpy as np
from ..errors import GraphError  # noqa: F401 (defined with the other errors)

__all__ = ["Value", "Node", "Graph", "GraphError"]

_ids = itertools.count()


def _dtype_name(dtype: Any) -> str:
    name = getattr(dtype, "name", None) or str(dtype)
    short = {"float32": "f32", "float16": "f16", "bfloat16": "bf16", "float64": "f64", "int32": "i32",
             "int64": "i64", "int8": "i8", "uint8": "u8", "uint32": "u32", "bool": "bool"}
    return short.get(name, name)


class Value:
    """An SSA value: ``shape`` (tuple of ints), ``dtype``, optional ``producer`` node."""

    __slots__ = ("id", "shape", "dtype", "producer", "index", "name")

    def __init__(self, shape: tuple[int, ...], dtype: Any, name: str | None = None):
        self.id = next(_ids)
        self.shape = tuple(shape)
        self.dtype = dtype
        self.producer: Node | None = None
        self.index = 0
        self.name = name

    @property
    def nbytes(self) -> int:
        """Size in bytes (0 for dtypes without an item size, e.g. PRNG keys)."""
        try:
            itemsize = np.dtype(self.dtype).itemsize
        except TypeError:
            itemsize = 0
        return int(np.prod(self.shape, dtype=np.int64)) * itemsize

    def type_str(self) -> str:
        return f"{_dtype_name(self.dtype)}[{','.join(map(str, self.shape))}]"

    def __repr__(self) -> str:
        return f"Value({self.name or self.id}: {self.type_str()})"


class Node:
    """One operation. ``attrs`` are static; ``scope`` is the block path that emitted it.

    ``impl`` is what lowering calls: for ``kind='prim'`` the JAX primitive, for
    ``kind='op'`` the registered big op (see :mod:`hybrid.graph.ops`).
    """

    __slots__ = ("op", "kind", "inputs", "outputs", "attrs", "impl", "scope", "effects", "ctx")

    def __init__(self, op: str, kind: str, inputs: list[Value], out_types: Iterable[tuple[tuple, Any]],
                 attrs: dict | None = None, impl: Any = None, scope: str = "", effects: Any = (),
                 ctx: Any = None):
        self.op = op
        self.kind = kind
        self.inputs = list(inputs)
        self.attrs = dict(attrs or {})
        self.impl = impl
        self.scope = scope
        self.effects = effects
        self.ctx = ctx
        self.outputs: list[Value] = []
        for i, (shape, dtype) in enumerate(out_types):
            value = Value(shape, dtype)
            value.producer, value.index = self, i
            self.outputs.append(value)

    def with_inputs(self, inputs: list[Value], attrs: dict | None = None) -> "Node":
        """A copy reading ``inputs`` (and optionally other ``attrs``), with fresh output Values."""
        return Node(self.op, self.kind, inputs, [(v.shape, v.dtype) for v in self.outputs],
                    self.attrs if attrs is None else attrs, self.impl, self.scope, self.effects, self.ctx)

    def display_name(self) -> str:
        """``op`` plus the wrapped function's name for call-like primitives (e.g. ``custom_jvp_call<relu>``)."""
        inner = self.attrs.get("name") if self.kind in ("prim", "fused", "remat_segment") else None
        if inner is None and self.kind == "prim" and "call_jaxpr" in self.attrs:
            debug = getattr(getattr(self.attrs["call_jaxpr"], "jaxpr", None), "debug_info", None)
            inner = getattr(debug, "func_name", None)
        return f"{self.op}<{inner}>" if isinstance(inner, str) and inner else self.op

    def __repr__(self) -> str:
        return f"Node({self.display_name()}, {len(self.inputs)} in, {len(self.outputs)} out)"


class Graph:
    """Inputs, constants, nodes in topological order, outputs.

    ``input_names`` labels inputs for printing (parameter names, ``data`` or ``data0``, ``data1``...).
    ``consts`` maps constant Values to their arrays.
    """

    def __init__(self, inputs: list[Value], outputs: list[Value], nodes: list[Node],
                 consts: dict[Value, Any] | None = None):
        self.inputs = list(inputs)
        self.outputs = list(outputs)
        self.nodes = list(nodes)
        self.consts = dict(consts or {})

    def copy_with(self, nodes: list[Node] | None = None, outputs: list[Value] | None = None,
                  inputs: list[Value] | None = None, consts: dict | None = None) -> "Graph":
        """A new Graph sharing Values and Nodes, with some parts replaced."""
        return Graph(self.inputs if inputs is None else inputs,
                     self.outputs if outputs is None else outputs,
                     self.nodes if nodes is None else nodes,
                     self.consts if consts is None else consts)

    # -- queries ------------------------------------------------------------
    def users(self) -> dict[Value, list[Node]]:
        """For each value, the nodes reading it (in order, with repeats)."""
        result: dict[Value, list[Node]] = {}
        for node in self.nodes:
            for value in node.inputs:
                result.setdefault(value, []).append(node)
        return result

    def op_counts(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for node in self.nodes:
            counts[node.display_name()] = counts.get(node.display_name(), 0) + 1
        return counts

    def __len__(self) -> int:
        return len(self.nodes)

    # -- invariants -----------------------------------------------------------
    def verify(self) -> None:
        """Check SSA form and topological order; raise GraphError naming the first violation."""
        defined: set[Value] = set()
        for value in itertools.chain(self.inputs, self.consts):
            if value in defined:
                raise GraphError(f"value {value} is defined twice (input/constant)")
            if value.producer is not None:
                raise GraphError(f"graph input/constant {value} has a producer node")
            defined.add(value)
        for position, node in enumerate(self.nodes):
            for value in node.inputs:
                if value not in defined:
                    raise GraphError(f"node #{position} {node.display_name()} reads {value} before it is "
                                     "defined (not topologically ordered or dangling)")
            for index, value in enumerate(node.outputs):
                if value.producer is not node or value.index != index:
                    raise GraphError(f"node #{position} {node.display_name()}: output {index} does not point "
                                     "back to its producer")
                if value in defined:
                    raise GraphError(f"node #{position} {node.display_name()} redefines {value}")
                defined.add(value)
        for value in self.outputs:
            if value not in defined:
                raise GraphError(f"graph output {value} is never defined")

    # -- printing -------------------------------------------------------------
    def _namer(self) -> dict[Value, str]:
        names: dict[Value, str] = {}
        for value in self.inputs:
            names[value] = "%" + (value.name or f"in{len(names)}")
        for i, value in enumerate(self.consts):
            names[value] = f"%c{i}"
        counter = itertools.count()
        for node in self.nodes:
            for value in node.outputs:
                names[value] = f"%{next(counter)}"
        return names

    def to_text(self, show_scope: bool = True) -> str:
        """Readable text, one line per node: ``%3: f32[32,10] = dense(%x, %w) {flatten=True}  # net.0``."""
        names = self._namer()
        lines = ["graph(" + ", ".join(f"{names[v]}: {v.type_str()}" for v in self.inputs) + ") {"]
        for value, array in self.consts.items():
            lines.append(f"  {names[value]}: {value.type_str()} = constant {_short_const(array)}")
        for node in self.nodes:
            outs = ", ".join(f"{names[v]}: {v.type_str()}" for v in node.outputs)
            args = ", ".join(names.get(v, "?") for v in node.inputs)
            attrs = _format_attrs(node.attrs)
            scope = f"  # {node.scope}" if show_scope and node.scope else ""
            lines.append(f"  {outs} = {node.display_name()}({args}){attrs}{scope}")
        lines.append("  return " + ", ".join(names.get(v, "?") for v in self.outputs))
        lines.append("}")
        return "\n".join(lines)

    __str__ = to_text

    def to_dot(self, name: str = "hybrid") -> str:
        """Graphviz dot source: inputs as ellipses, ops as boxes, edges labelled with types."""
        names = self._namer()
        node_ids: dict[Any, str] = {}
        lines = [f'digraph "{name}" {{', "  rankdir=TB;", '  node [fontname="Helvetica", fontsize=10];']
        for i, value in enumerate(self.inputs):
            node_ids[value] = f"in{i}"
            lines.append(f'  in{i} [label="{names[value]}\\n{value.type_str()}", shape=ellipse];')
        for i, value in enumerate(self.consts):
            node_ids[value] = f"c{i}"
            lines.append(f'  c{i} [label="const\\n{value.type_str()}", shape=note];')
        for i, node in enumerate(self.nodes):
            color = "lightblue" if node.kind == "op" else ("palegreen" if node.op == "fused" else "white")
            lines.append(f'  n{i} [label="{node.display_name()}", shape=box, style=filled, fillcolor={color}];')
            for value in node.outputs:
                node_ids[value] = f"n{i}"
            for value in node.inputs:
                source = node_ids.get(value)
                if source is not None:
                    lines.append(f'  {source} -> n{i} [label="{value.type_str()}"];')
        for i, value in enumerate(self.outputs):
            lines.append(f'  out{i} [label="output {i}", shape=ellipse];')
            if value in node_ids:
                lines.append(f'  {node_ids[value]} -> out{i} [label="{value.type_str()}"];')
        lines.append("}")
        return "\n".join(lines)


def _short_const(array: Any) -> str:
    array = np.asarray(array) if not hasattr(array, "shape") else array
    if getattr(array, "size", 2) == 1:
        try:
            return repr(np.asarray(array).item())
        except Exception:  # e.g. PRNG key arrays
            return "<scalar>"
    return f"<{getattr(array, 'dtype', '?')}{list(getattr(array, 'shape', ()))}>"


def _format_attr_value(value: Any) -> str:
    if hasattr(value, "jaxpr") or type(value).__name__ in ("Jaxpr", "ClosedJaxpr"):
        return "<jaxpr>"
    if callable(value) and not isinstance(value, type):
        return f"<{getattr(value, '__name__', 'fn')}>"
    if isinstance(value, (tuple, list)) and any(hasattr(v, "jaxpr") for v in value):
        return "<jaxprs>"
    text = repr(value)
    if "\n" in text:
        return f"<{type(value).__name__}>"
    return text if len(text) <= 60 else text[:57] + "..."


def _format_attrs(attrs: dict) -> str:
    shown = {k: v for k, v in attrs.items() if not k.startswith("_") and k != "name" and v is not None}
    if not shown:
        return ""
    return " {" + ", ".join(f"{k}={_format_attr_value(v)}" for k, v in shown.items()) + "}"
