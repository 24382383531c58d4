"""``block.export(path)``: a hybridized block's graphs, traced per input signature and mode, written as
a symbol file and its parameter file (the format is :mod:`hybrid.formats.symbol_json`)."""
from __future__ import annotations

from typing import Any

import jax
import numpy as np

from .. import autograd
from .cached_op import data_input_names, trace_block
from ..graph.ir import Node
from ..formats import codec
from ..errors import ExportError
from ..formats.graph_json import encode_graph
from ..formats.inline import inline_calls
from ..formats.symbol_json import write_symbol_files

__all__ = ["export_block"]

_DEPLOY_HINT = ("Export it for deployment with hybrid.export.export_deployment (serialised StableHLO through "
                "jax.export), which supports any JAX code.")


def _example_args(treedef: Any, parts: tuple) -> tuple:
    leaves = []
    for part in parts:
        if len(part) == 3 and part[0] == "static":
            raise ExportError(f"export supports array arguments only; the block was called with the Python "
                              f"value {part[2]!r}. Pass it as an array, or make it a constructor argument")
        shape, dtype = part
        if jax.dtypes.issubdtype(dtype, jax.dtypes.extended):
            raise ExportError(f"export does not support inputs of dtype {dtype}")
        leaves.append(np.zeros(shape, dtype))
    args = jax.tree_util.tree_unflatten(treedef, leaves)
    if treedef != jax.tree_util.tree_structure((tuple(leaves), {})):
        raise ExportError("export supports blocks called with positional array arguments only "
                          "(no keyword arguments or nested inputs)")
    return args


def _signatures(block: Any) -> list[tuple[Any, tuple]]:
    op = getattr(block, "_cached_op", None)
    if not getattr(block, "_active", False) or op is None or not op.entries:
        raise RuntimeError(f"{type(block).__name__}.export: call hybridize() and then run forward at least once "
                           "before export; every input shape used since then is exported")
    seen: dict[tuple, None] = {}
    for treedef, _training, parts, *_precision in op.entries:
        seen.setdefault((treedef, parts), None)
    return list(seen)


def _describe(block: Any):
    def describe(index: int, node: Node) -> str:
        where = f"block '{node.scope}'" if node.scope else f"the forward of {type(block).__name__}"
        return f"node #{index} {node.display_name()!r} in {where}"
    return describe


def export_block(block: Any, path: str, epoch: int = 0) -> tuple[str, str]:
    """Write ``path-symbol.json`` and ``path-EEEE.params`` for a hybridized, called block.

    Every input signature the block was called with is traced in predict and train
    mode. Returns the two file names. Raises RuntimeError before the first
    hybridized call, ExportError naming a node that has no file format.
    """
    if not isinstance(epoch, int) or epoch < 0:
        raise ValueError(f"export: epoch must be a non-negative integer, got {epoch!r}")
    names_by_param: dict[int, str] = {}
    for name, param in block.collect_params().items():
        names_by_param.setdefault(id(param), name)
    params: dict[str, Any] = {}
    signatures, data_names = [], None
    describe = _describe(block)
    for treedef, parts in _signatures(block):
        args = _example_args(treedef, parts)
        graphs = {}
        leaves = jax.tree_util.tree_leaves(args)
        inputs = [{"name": name, "shape": list(a.shape), "dtype": codec.dtype_name(a.dtype)}
                  for name, a in zip(data_input_names(len(leaves)), leaves)]
        for mode in ("predict", "train"):
            with autograd.pause(train_mode=mode == "train"):
                traced = trace_block(block, args)
            state_names = [names_by_param[id(p)] for p in traced.state_params]
            for param in traced.params:
                params.setdefault(names_by_param[id(param)], param)
            graph = inline_calls(traced.graph)
            try:
                graphs[mode] = encode_graph(graph, traced.n_outputs, traced.out_tree, state_names, describe)
            except ExportError as exc:
                raise ExportError(f"{type(block).__name__}.export: {exc}. {_DEPLOY_HINT}") from None
        if graphs["train"] == graphs["predict"]:
            del graphs["train"]
        names = [entry["name"] for entry in inputs]
        if data_names is not None and names != data_names:
            raise ExportError("the block was called with different numbers of inputs; export one signature")
        data_names = names
        signatures.append({"inputs": inputs, "graphs": graphs})
    symbol_file, param_file = f"{path}-symbol.json", f"{path}-{epoch:04d}.params"
    write_symbol_files(symbol_file, param_file, params, data_names, signatures)
    return symbol_file, param_file
