"""Graph IR <-> JSON, one node per line, dispatching on node kind through a small codec registry.

A graph in JSON::

    {"inputs": [{"name": "0.weight", "shape": [16, 8], "dtype": "float32"}, ...],
     "consts": [{"name": "%c0", "shape": [], "dtype": "uint32", "value": 1}],
     "nodes": [{"kind": "op", "op": "dense", "inputs": ["data", "0.weight", "0.bias"],
                "outputs": [{"name": "%0", "shape": [4, 16], "dtype": "float32"}],
                "attrs": {"flatten": true}, "in_tree": [0, 1, 2], "scope": "0"}, ...],
     "outputs": ["%5"], "out_tree": 0, "state_outputs": [{"param": "bn.running_mean", "value": "%2"}]}

Reading checks every name reference (defined before use, defined once), every
operator against the registries, and then *runs the graph abstractly*
(``jax.eval_shape``): each node's computed output shapes and dtypes must equal
the declared ones, so a file cannot lie about shapes.
"""
from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Any, Callable

import jax

from ..graph import ops
from ..graph.ir import Graph, Node, Value
from ..graph._lower import evaluate_node
from . import codec, prims
from ..errors import ExportError, FormatError

__all__ = ["NodeCodec", "register_node_codec", "encode_graph", "decode_graph", "check_graph", "GraphDoc"]


@dataclass(frozen=True)
class NodeCodec:
    """How nodes of one kind are written (``encode(node) -> dict of extra fields``) and read
    (``decode(entry, inputs, out_types, where) -> Node``)."""

    encode: Callable[[Node], dict]
    decode: Callable[[dict, list, list, str], Node]


_CODECS: dict[str, NodeCodec] = {}


def register_node_codec(kind: str, node_codec: NodeCodec) -> None:
    """Register how nodes of ``kind`` are (de)serialised (e.g. a future ``'fused'`` kind)."""
    _CODECS[kind] = node_codec


def _check_keys(entry: Any, required: set, optional: set, where: str) -> None:
    if not isinstance(entry, dict):
        raise FormatError(f"{where}: expected a JSON object")
    keys = set(entry)
    if not required <= keys or not keys <= required | optional:
        raise FormatError(f"{where}: expected keys {sorted(required)} (optional {sorted(optional)}), "
                          f"got {sorted(keys)[:12]}")


# -- kind 'op': big ops --------------------------------------------------------------------
def _encode_op(node: Node) -> dict:
    attrs = {k: codec.encode_value(v) for k, v in node.attrs.items() if k != "_in_tree"}
    return {"attrs": attrs, "in_tree": codec.encode_tree(node.attrs["_in_tree"])}


def _op_keywords(opdef: ops.OpDef) -> tuple[set, set]:
    parameters = inspect.signature(opdef.impl).parameters.values()
    keywords = [p for p in parameters if p.kind is inspect.Parameter.KEYWORD_ONLY]
    return {p.name for p in keywords}, {p.name for p in keywords if p.default is inspect.Parameter.empty}


def _decode_op(entry: dict, inputs: list, out_types: list, where: str) -> Node:
    _check_keys(entry, {"op", "attrs", "in_tree"}, set(), where)
    name = entry["op"]
    if name not in ops.registered():
        raise FormatError(f"{where}: unknown operator {name!r:.60}; known big ops: {ops.registered()}")
    opdef = ops.get(name)
    if not isinstance(entry["attrs"], dict):
        raise FormatError(f"{where}: 'attrs' must be an object")
    attrs = {k: codec.decode_value(v, f"{where} attribute {k!r}") for k, v in entry["attrs"].items()}
    allowed, required = _op_keywords(opdef)
    if not required <= set(attrs) <= allowed:
        raise FormatError(f"{where}: operator {name!r} takes attributes {sorted(allowed)} "
                          f"(required {sorted(required)}), got {sorted(attrs)}")
    for key, value in attrs.items():
        codec.check_finite(value, f"{where} attribute {key!r}")
    in_tree = codec.decode_tree(entry["in_tree"], f"{where} in_tree")
    if in_tree.num_leaves != len(inputs):
        raise FormatError(f"{where}: in_tree has {in_tree.num_leaves} leaves for {len(inputs)} inputs")
    try:
        bound = ops._bind(name, attrs, in_tree)
    except TypeError as exc:  # unhashable attribute values
        raise FormatError(f"{where}: invalid attributes ({exc})") from None
    return Node(name, "op", inputs, out_types, {**attrs, "_in_tree": in_tree}, bound)


# -- kind 'prim': JAX primitives ------------------------------------------------------------
def _encode_prim(node: Node) -> dict:
    if node.effects:
        raise ExportError("it has side effects (e.g. jax.debug.print or a callback)")
    params = prims.encode_fixup(node.op, node.attrs)
    encoded = {}
    for key, value in params.items():
        try:
            encoded[key] = codec.encode_value(value)
        except ExportError as exc:
            raise ExportError(f"its parameter {key!r} cannot be written: {exc}") from None
    return {"params": encoded}


_NONFINITE_PARAMS = {"fill_value"}


def _decode_prim(entry: dict, inputs: list, out_types: list, where: str) -> Node:
    _check_keys(entry, {"op", "params"}, set(), where)
    prim = prims.lookup(entry["op"], where)
    if not isinstance(entry["params"], dict):
        raise FormatError(f"{where}: 'params' must be an object")
    params = {k: codec.decode_value(v, f"{where} parameter {k!r}") for k, v in entry["params"].items()}
    for key, value in params.items():
        if key not in _NONFINITE_PARAMS:
            codec.check_finite(value, f"{where} parameter {key!r}")
    params = prims.decode_fixup(prim.name, params, [v.dtype for v in inputs], where)
    return Node(prim.name, "prim", inputs, out_types, params, prim)


register_node_codec("op", NodeCodec(_encode_op, _decode_op))
register_node_codec("prim", NodeCodec(_encode_prim, _decode_prim))


# -- graphs ----------------------------------------------------------------------------------------
@dataclass
class GraphDoc:
    """A decoded graph and how its outputs map back: ``n_outputs`` results (structure
    ``out_tree``), then one state output per name in ``state_names``."""

    graph: Graph
    n_outputs: int
    out_tree: Any
    state_names: list[str]


def _type(value: Value) -> dict:
    return {"shape": list(value.shape), "dtype": codec.dtype_name(value.dtype)}


def encode_graph(graph: Graph, n_outputs: int, out_tree: Any, state_names: list[str],
                 describe: Callable[[int, Node], str] | None = None) -> dict:
    """JSON form of ``graph``; ExportError names the first node that cannot be written."""
    names: dict[Value, str] = {}
    inputs = []
    for value in graph.inputs:
        if not value.name or value.name.startswith("%"):
            raise ExportError(f"graph input {value} needs a name that does not start with '%'")
        names[value] = value.name
        inputs.append({"name": value.name, **_type(value)})
    consts = []
    for i, (value, array) in enumerate(graph.consts.items()):
        names[value] = f"%c{i}"
        try:
            consts.append({"name": names[value], **codec.encode_array(array)})
        except ExportError as exc:
            raise ExportError(f"constant {names[value]} cannot be written: {exc}") from None
    nodes = []
    counter = 0
    for index, node in enumerate(graph.nodes):
        node_codec = _CODECS.get(node.kind)
        try:
            if node_codec is None:
                raise ExportError(f"nodes of kind {node.kind!r} have no file format")
            extra = node_codec.encode(node)
        except ExportError as exc:
            where = describe(index, node) if describe else f"node #{index} {node.display_name()!r}"
            raise ExportError(f"cannot export {where}: {exc}") from None
        outputs = []
        for value in node.outputs:
            names[value] = f"%{counter}"
            counter += 1
            outputs.append({"name": names[value], **_type(value)})
        entry = {"op": node.op, "kind": node.kind, "inputs": [names[v] for v in node.inputs], "outputs": outputs,
                 **extra}
        if node.scope:
            entry["scope"] = node.scope
        nodes.append(entry)
    results = [names[v] for v in graph.outputs]
    return {"inputs": inputs, "consts": consts, "nodes": nodes, "outputs": results[:n_outputs],
            "out_tree": codec.encode_tree(out_tree),
            "state_outputs": [{"param": name, "value": value} for name, value in zip(state_names, results[n_outputs:])]}


def _decode_typed(entry: Any, where: str) -> tuple[str, tuple, Any]:
    _check_keys(entry, {"name", "shape", "dtype"}, set(), where)
    if not isinstance(entry["name"], str) or not entry["name"]:
        raise FormatError(f"{where}: 'name' must be a non-empty string")
    return entry["name"], codec.parse_shape(entry["shape"], where), codec.parse_dtype(entry["dtype"], where)


def decode_graph(doc: Any, where: str) -> GraphDoc:
    """Rebuild a Graph from its JSON form and check it (see the module docstring)."""
    _check_keys(doc, {"inputs", "consts", "nodes", "outputs", "out_tree", "state_outputs"}, set(), where)
    for key in ("inputs", "consts", "nodes", "outputs", "state_outputs"):
        if not isinstance(doc[key], list):
            raise FormatError(f"{where}: '{key}' must be a list")
    env: dict[str, Value] = {}

    def define(name: Any, value: Value, at: str) -> None:
        if not isinstance(name, str) or not name:
            raise FormatError(f"{at}: names must be non-empty strings, got {name!r:.60}")
        if name in env:
            raise FormatError(f"{at}: name {name!r:.60} is defined twice")
        env[name] = value

    def read(name: Any, at: str) -> Value:
        if not isinstance(name, str) or name not in env:
            raise FormatError(f"{at}: reads {name!r:.60}, which is not defined before")
        return env[name]

    inputs = []
    for i, entry in enumerate(doc["inputs"]):
        name, shape, dtype = _decode_typed(entry, f"{where} input #{i}")
        if name.startswith("%"):
            raise FormatError(f"{where} input #{i}: input names must not start with '%'")
        value = Value(shape, dtype, name)
        define(name, value, f"{where} input #{i}")
        inputs.append(value)
    consts = {}
    for i, entry in enumerate(doc["consts"]):
        at = f"{where} constant #{i}"
        _check_keys(entry, {"name", "shape", "dtype"}, {"value", "base64"}, at)
        array = codec.decode_array(entry, at)
        value = Value(array.shape, array.dtype)
        define(entry["name"], value, at)
        consts[value] = array
    nodes = []
    for i, entry in enumerate(doc["nodes"]):
        at = f"{where} node #{i}"
        if not isinstance(entry, dict):
            raise FormatError(f"{at}: expected a JSON object")
        kind = entry.get("kind")
        node_codec = _CODECS.get(kind) if isinstance(kind, str) else None
        if node_codec is None:
            raise FormatError(f"{at}: unknown node kind {kind!r:.40}; known: {sorted(_CODECS)}")
        for key in ("op", "inputs", "outputs"):
            if key not in entry:
                raise FormatError(f"{at}: missing {key!r}")
        if not isinstance(entry["op"], str) or not isinstance(entry["inputs"], list) or \
                not isinstance(entry["outputs"], list):
            raise FormatError(f"{at}: 'op' must be a string, 'inputs' and 'outputs' lists")
        at = f"{at} {entry['op']!r:.60}"
        scope = entry.get("scope", "")
        if not isinstance(scope, str):
            raise FormatError(f"{at}: 'scope' must be a string")
        node_inputs = [read(name, at) for name in entry["inputs"]]
        typed = [_decode_typed(out, f"{at} output #{j}") for j, out in enumerate(entry["outputs"])]
        fields = {k: v for k, v in entry.items() if k not in ("kind", "inputs", "outputs", "scope")}
        node = node_codec.decode(fields, node_inputs, [(s, d) for _, s, d in typed], at)
        node.scope = scope
        for (name, _, _), value in zip(typed, node.outputs):
            define(name, value, at)
        nodes.append(node)
    outputs = [read(name, f"{where} outputs") for name in doc["outputs"]]
    state_names, state_values = [], []
    for i, entry in enumerate(doc["state_outputs"]):
        at = f"{where} state output #{i}"
        _check_keys(entry, {"param", "value"}, set(), at)
        if not isinstance(entry["param"], str):
            raise FormatError(f"{at}: 'param' must be a string")
        state_names.append(entry["param"])
        state_values.append(read(entry["value"], at))
    out_tree = codec.decode_tree(doc["out_tree"], f"{where} out_tree")
    if out_tree.num_leaves != len(outputs):
        raise FormatError(f"{where}: out_tree has {out_tree.num_leaves} leaves for {len(outputs)} outputs")
    graph = Graph(inputs, outputs + state_values, nodes, consts)
    check_graph(graph, where)
    return GraphDoc(graph, len(outputs), out_tree, state_names)


def check_graph(graph: Graph, where: str = "graph") -> None:
    """Run ``graph`` on abstract values; FormatError if a node fails or computes other types than declared."""
    graph.verify()
    specs = [jax.ShapeDtypeStruct(v.shape, v.dtype) for v in graph.inputs]

    def run(*args: Any) -> list:
        env: dict[Value, Any] = dict(graph.consts)
        env.update(zip(graph.inputs, args))
        for index, node in enumerate(graph.nodes):
            at = f"{where} node #{index} {node.display_name()!r}"
            try:
                results = evaluate_node(node, [env[v] for v in node.inputs])
            except FormatError:
                raise
            except Exception as exc:  # any failure of a forged node is a format error, never a crash
                raise FormatError(f"{at} cannot be computed: {type(exc).__name__}: {str(exc)[:300]}") from None
            if len(results) != len(node.outputs):
                raise FormatError(f"{at} declares {len(node.outputs)} outputs but computes {len(results)}")
            for value, result in zip(node.outputs, results):
                if tuple(result.shape) != value.shape or result.dtype != value.dtype:
                    raise FormatError(f"{at} declares {value.type_str()} but computes "
                                      f"{codec.dtype_name(result.dtype)}{list(result.shape)}")
            env.update(zip(node.outputs, results))
        return [env[v] for v in graph.outputs]

    jax.eval_shape(run, *specs)
