"""Run an MXNet ``-symbol.json`` graph with the MXNet operator table of :mod:`hybrid.mxnet.ops`.

The MXNet nodes are validated once (structure, references to any output of a multi-output node,
operator names, attribute syntax) and then interpreted by the same operator functions that serve ``F``
in ``hybrid_forward``. They call hybrid's big ops, so a hybridized import traces to the same
``dense``/``convolution``/... nodes as a native network, works for any batch size, and can be exported
again in hybrid's format. Operators missing from the table are rejected at import, each named once with
its count. A control-flow node (``_foreach``, ``_while_loop``, ``_cond``) carries its bodies as
``subgraphs``: graphs of their own whose variables (``arg_nodes``, in order) are the body's inputs; each
runs as an :class:`MXNetProgram` the operator calls (``OpContext.subgraphs``).
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any, Sequence

from .. import autograd
from .ops import OPERATORS, Attrs, Op, OpContext
from ..errors import FormatError
from ..formats.params_file import load_parameter_file
from ..formats.symbol_json import ParamSpec

__all__ = ["MXNetProgram", "import_mxnet"]

# -- the program -------------------------------------------------------------------------------------
def _unsupported(doc: Any) -> Counter:
    """The operators of a graph (and its subgraphs) missing from the table, counted."""
    found: Counter = Counter()
    for entry in doc.get("nodes", []) if isinstance(doc, dict) else []:
        if isinstance(entry, dict):
            op = entry.get("op")
            if isinstance(op, str) and op != "null" and op not in OPERATORS:
                found[op] += 1
            for sub in entry.get("subgraphs", []) if isinstance(entry.get("subgraphs"), list) else []:
                found.update(_unsupported(sub))
    return found


@dataclass
class _Node:
    op: str
    name: str
    inputs: list[tuple[int, int]]
    attrs: Attrs
    opdef: Op | None = None  # None for variables
    outputs: int = 1
    subgraphs: tuple["MXNetProgram", ...] = ()

    def used_inputs(self) -> list[tuple[int, int, int]]:
        """(position, source node, output) of the inputs the forward pass reads (labels excluded)."""
        limit = self.opdef.labels if self.opdef is not None and self.opdef.labels is not None else len(self.inputs)
        return [(p, src, k) for p, (src, k) in enumerate(self.inputs) if p < limit]


def _parse_nodes(doc: dict, where: str) -> tuple[list[_Node], list[tuple[int, int]]]:
    nodes_json, heads_json = doc.get("nodes"), doc.get("heads")
    if not isinstance(nodes_json, list) or not isinstance(heads_json, list) or not heads_json:
        raise FormatError(f"{where}: 'nodes' and 'heads' must be non-empty lists")
    nodes: list[_Node] = []

    def entry_ref(item: Any, at: str) -> tuple[int, int]:
        if not isinstance(item, list) or len(item) not in (2, 3) or not all(type(i) is int for i in item):
            raise FormatError(f"{at}: an input must be [node, output(, version)], got {item!r:.60}")
        if not 0 <= item[0] < len(nodes):
            raise FormatError(f"{at}: input {item!r:.60} must refer to an earlier node")
        source = nodes[item[0]]
        if not 0 <= item[1] < source.outputs:
            raise FormatError(f"{at}: input {item!r:.60} refers to output {item[1]} of node {source.name!r} "
                              f"({source.op}), which has {source.outputs} output(s)")
        return item[0], item[1]

    unknown: Counter = Counter()
    for i, entry in enumerate(nodes_json):
        at = f"{where} node #{i}"
        if not isinstance(entry, dict) or not isinstance(entry.get("op"), str) or \
                not isinstance(entry.get("name"), str) or not isinstance(entry.get("inputs", []), list):
            raise FormatError(f"{at}: expected an object with string 'op' and 'name' and list 'inputs'")
        raw = {}
        for key in ("attrs", "attr", "param"):
            value = entry.get(key, {})
            if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
                raise FormatError(f"{at}: '{key}' must map names to strings")
            raw.update(value)
        op = entry["op"]
        attrs = Attrs(raw, f"{at} {op} {entry['name']!r}", FormatError)
        opdef = OPERATORS.get(op) if op != "null" else None
        if op != "null" and opdef is None:
            unknown[op] += 1
        inputs = [entry_ref(item, at) for item in entry.get("inputs", [])]
        if op == "null" and inputs:
            raise FormatError(f"{at}: a variable ('null' node) cannot have inputs")
        outputs = opdef.outputs(attrs) if opdef is not None else 1
        if opdef is not None and not opdef.variadic and len(inputs) > len(opdef.inputs):
            raise FormatError(f"{attrs.where}: {len(inputs)} inputs given, the operator takes at most "
                              f"{len(opdef.inputs)} {list(opdef.inputs)}")
        subgraphs = entry.get("subgraphs", [])
        if not isinstance(subgraphs, list):
            raise FormatError(f"{at}: 'subgraphs' must be a list of graphs")
        programs = []
        for k, sub in enumerate(subgraphs):
            try:
                sub_nodes, sub_heads = _parse_nodes(sub, f"{at} subgraph #{k}")
            except FormatError as exc:
                if "unsupported MXNet operators" not in str(exc):
                    raise
                unknown.update(_unsupported(sub))
                continue
            args = sub.get("arg_nodes")
            if not isinstance(args, list) or not all(type(i) is int and 0 <= i < len(sub_nodes) and
                                                     sub_nodes[i].op == "null" for i in args):
                raise FormatError(f"{at} subgraph #{k}: 'arg_nodes' must list its variables")
            programs.append(MXNetProgram(sub_nodes, sub_heads, [sub_nodes[i].name for i in args]))
        nodes.append(_Node(op, entry["name"], inputs, attrs, opdef, outputs, tuple(programs)))
    if unknown:
        listed = ", ".join(f"{op} (x{count})" for op, count in unknown.items())
        raise FormatError(f"{where}: unsupported MXNet operators: {listed}. hybrid.mxnet.ops.OPERATORS lists the "
                          "supported ones (docs/file-formats.md, 'MXNet symbol JSON')")
    variables = [node.name for node in nodes if node.op == "null"]
    if len(set(variables)) != len(variables):
        raise FormatError(f"{where}: two variables ('null' nodes) have the same name")
    heads = [entry_ref(item, f"{where} heads") for item in heads_json]
    return nodes, heads


class MXNetProgram:
    """Interprets validated MXNet nodes with JAX (see the module docstring)."""

    def __init__(self, nodes: list[_Node], heads: list[tuple[int, int]], data_names: list[str]):
        self.nodes, self.heads, self.data_names = nodes, heads, data_names
        self._data_index = {name: i for i, name in enumerate(data_names)}

    def __call__(self, block: Any, args: tuple) -> Any:
        if len(args) != len(self.data_names):
            raise TypeError(f"expected {len(self.data_names)} input(s) {self.data_names}, got {len(args)}")
        outputs = self.run(list(args), block._reg_params, autograd.is_training())
        return outputs[0] if len(outputs) == 1 else tuple(outputs)

    def run(self, args: list, params: Any, training: bool) -> list:
        """The head values for the data inputs ``args`` (in ``data_names`` order) and ``params`` (the
        Parameters of the other variables, by name)."""
        values: list[list[Any]] = []
        for node in self.nodes:
            if node.opdef is None:
                index = self._data_index.get(node.name)
                values.append([args[index] if index is not None else
                               params[node.name].data() if node.name in params else None])
                continue
            opdef = node.opdef
            inputs: list[Any] = [None] * max(len(node.inputs), len(opdef.inputs))
            for position, src, k in node.used_inputs():
                value = values[src][k]
                if value is None:
                    raise ValueError(f"{node.attrs.where}: input {position} ({self.nodes[src].name!r}) is neither "
                                     "a data input nor a parameter")
                inputs[position] = value
            if opdef.variadic:
                inputs = inputs[:len(node.inputs)]

            def set_state(position: int, value: Any, node: _Node = node) -> None:
                name = self.nodes[node.inputs[position][0]].name
                if name in params:
                    params[name].set_data(value)

            subgraphs = tuple((lambda ins, sub=sub: sub.run(list(ins), {}, training)) for sub in node.subgraphs)
            outs = opdef.fn(inputs, node.attrs, OpContext(training, set_state if opdef.aux else None, subgraphs))
            if len(outs) < node.outputs:
                raise FormatError(f"{node.attrs.where}: gave {len(outs)} outputs, {node.outputs} expected")
            values.append(outs)
        return [values[i][k] for i, k in self.heads]


def import_mxnet(cls: type, doc: dict, where: str, input_names: Sequence[str] | None, param_file: Any,
                 device: Any, allow_missing: bool, ignore_extra: bool) -> Any:
    """A SymbolBlock running the MXNet symbol ``doc`` with parameters from ``param_file`` (required:
    MXNet symbol files do not store parameter shapes)."""
    nodes, heads = _parse_nodes(doc, where)
    names = list(input_names) if input_names is not None else ["data"]
    variables = {node.name: i for i, node in enumerate(nodes) if node.op == "null"}
    missing = [n for n in names if n not in variables]
    if missing:
        raise ValueError(f"{where}: input_names {missing} are not variables of the symbol; variables: "
                         f"{sorted(variables)[:20]}")
    if param_file is None:
        raise ValueError(f"{where}: importing an MXNet symbol needs its .params file (MXNet symbol files do not "
                         "store parameter shapes)")
    arrays = {k.split(":", 1)[-1] if k.startswith(("arg:", "aux:")) else k: v
              for k, v in load_parameter_file(param_file).items()}
    aux, used = set(), set()
    for node in nodes:
        if node.opdef is None:
            continue
        for position, src, _ in node.used_inputs():
            source = nodes[src].name
            if position in node.opdef.aux:
                aux.add(source)
            used.add(source)
    specs = []
    for name in variables:
        if name in names or name not in used:
            continue
        if name not in arrays:
            if allow_missing:
                continue
            raise ValueError(f"{where}: parameter {name!r} is not in the parameter file {str(param_file)!r} (a "
                             f"variable that is an input of the network belongs in input_names={names})")
        array = arrays[name]
        specs.append(ParamSpec(name, array.shape, array.dtype, "null" if name in aux else "write",
                               name not in aux))
    extra = sorted(set(arrays) - {s.name for s in specs})
    if extra and not ignore_extra:
        raise ValueError(f"{where}: the parameter file has arrays {extra[:10]} that the symbol does not use; "
                         "pass ignore_extra=True to skip them")
    block = cls._create(MXNetProgram(nodes, heads, names), specs)
    for spec in specs:
        block._reg_params[spec.name].set_data(arrays[spec.name])
        if device is not None:
            block._reg_params[spec.name].reset_device(device)
    return block
