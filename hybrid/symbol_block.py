"""SymbolBlock: a block that runs a stored graph (hybrid's symbol file, an MXNet symbol, or one built in code).

Its parameters are real Parameters (named as in the file), so it can be
hybridized, trained, saved and exported again.  A graph from hybrid's symbol
file holds fixed input shapes (every shape the exporting block was called
with); an MXNet symbol is shape-generic.
"""
from __future__ import annotations

import os
from contextlib import nullcontext
from typing import Any, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from ._core import functional as _functional
from . import autograd
from . import random as _random
from .block import HybridBlock
from .errors import ShapeError
from .graph.ir import Graph, Value
from .graph._lower import evaluate_node
from .parameter import Parameter
from .formats.builder import build_graph
from .formats.serialization import FormatError, read_limited
from .formats.graph_json import GraphDoc, check_graph
from .formats.jsonfile import sha256_hex
from .formats.symbol_json import RNG_INPUTS, ParamSpec, SymbolFile, decode_symbol, read_symbol_file

__all__ = ["SymbolBlock"]


def draw_rng() -> tuple[Any, Any]:
    """``(key, counter)`` for a graph's ``rng_key``/``rng_counter`` inputs: from the global stream as a
    top-level CachedOp call draws them (so an imported graph draws the same dropout masks as the
    original hybridized block), or derived from the key of the enclosing trace."""
    frame = _functional.current()
    if frame is None or (frame.key is None and not frame.inline_hybridized and not frame.whole_step):
        return _random.base_key(), _random.next_counter()
    return frame.next_key(), np.uint32(0)


def _interpreter(graph: Graph):
    """Like :func:`hybrid.graph.lower`, keeping each node's block scope, so that tracing the
    SymbolBlock again (hybridize, export) gives nodes with their original scopes."""
    def run(*inputs: Any) -> list:
        env: dict[Value, Any] = dict(graph.consts)
        env.update(zip(graph.inputs, inputs))
        for node in graph.nodes:
            with jax.named_scope(node.scope) if node.scope else nullcontext():
                env.update(zip(node.outputs, evaluate_node(node, [env[v] for v in node.inputs])))
        return [env[v] for v in graph.outputs]
    return run


class _GraphRunner:
    """One stored graph, jitted, with the role of each of its inputs."""

    def __init__(self, gdoc: GraphDoc, data_index: dict[str, int]):
        self.roles = []
        for value in gdoc.graph.inputs:
            if value.name in data_index:
                self.roles.append(("data", data_index[value.name]))
            elif value.name in RNG_INPUTS:
                self.roles.append((value.name, None))
            else:
                self.roles.append(("param", value.name))
        self.uses_rng = any(role in RNG_INPUTS for role, _ in self.roles)
        self.n_outputs, self.out_tree, self.state_names = gdoc.n_outputs, gdoc.out_tree, gdoc.state_names
        self.run = jax.jit(_interpreter(gdoc.graph))

    def __call__(self, block: "SymbolBlock", arrays: list) -> Any:
        rng = dict(zip(RNG_INPUTS, draw_rng())) if self.uses_rng else {}
        params = block._reg_params
        flat = [arrays[key] if role == "data" else params[key].data() if role == "param" else rng[role]
                for role, key in self.roles]
        results = self.run(*flat)
        for name, value in zip(self.state_names, results[self.n_outputs:]):
            params[name].set_data(value)
        return jax.tree_util.tree_unflatten(self.out_tree, results[:self.n_outputs])


class GraphProgram:
    """Stored graphs by input signature; picks the train graph under ``autograd.is_training()``."""

    def __init__(self, data_names: list[str], signatures: list[tuple[list, GraphDoc, GraphDoc | None]]):
        self.data_names = data_names
        index = {name: i for i, name in enumerate(data_names)}
        self.signatures = [([(shape, dtype) for shape, dtype in types], _GraphRunner(predict, index),
                            _GraphRunner(train, index) if train is not None else None)
                           for types, predict, train in signatures]

    def describe(self) -> str:
        return "; ".join(", ".join(f"{n}: {np.dtype(d).name}{list(s)}" for n, (s, d) in zip(self.data_names, types))
                         for types, _, _ in self.signatures)

    def __call__(self, block: "SymbolBlock", args: tuple) -> Any:
        if len(args) != len(self.data_names):
            raise TypeError(f"expected {len(self.data_names)} input(s) {self.data_names}, got {len(args)}")
        arrays = [a if hasattr(a, "shape") and hasattr(a, "dtype") else jnp.asarray(a) for a in args]
        got = [(tuple(a.shape), np.dtype(a.dtype)) for a in arrays]
        for types, predict, train in self.signatures:
            if [s for s, _ in types] == [s for s, _ in got]:
                if got != types:
                    raise TypeError(f"expected inputs {self.describe()}, got dtypes {[d.name for _, d in got]}")
                runner = train if train is not None and autograd.is_training() else predict
                return runner(block, arrays)
        raise ShapeError(f"this SymbolBlock holds graphs for inputs {self.describe()}, got shapes "
                         f"{[s for s, _ in got]}. Call the original block with this shape before export (every "
                         "shape used is exported), or use hybrid.export.export_deployment with dynamic_batch=True")


class SymbolBlock(HybridBlock):
    """A block running a graph: imported with :meth:`imports`, or built in code.

    ``SymbolBlock(outputs, inputs, params=None)``: ``outputs`` is a Value (or a
    list/tuple of Values) made with :class:`hybrid.export.GraphBuilder`, ``inputs``
    the data input Values in call order; every other named input becomes a
    Parameter of that name. ``params`` maps names to Parameters (shared) or arrays
    (initial values); the others start uninitialised (call ``initialize()``).
    """

    def _runs_compiled(self) -> bool:
        return False  # its forward runs its graph and draws random keys as the exporting block did

    def __init__(self, outputs: Value | Sequence[Value], inputs: Value | Sequence[Value],
                 params: dict[str, Any] | None = None):
        super().__init__()
        leaves, out_tree = jax.tree_util.tree_flatten(outputs, is_leaf=lambda x: isinstance(x, Value))
        data = [inputs] if isinstance(inputs, Value) else list(inputs)
        graph = build_graph(leaves, data)
        check_graph(graph, "SymbolBlock graph")
        n_data = len(data)
        specs = [ParamSpec(v.name, v.shape, v.dtype) for v in graph.inputs[:len(graph.inputs) - n_data]]
        program = GraphProgram([v.name for v in data],
                               [([(v.shape, v.dtype) for v in data], GraphDoc(graph, len(leaves), out_tree, []),
                                 None)])
        self._setup(program, specs, params or {})

    def _setup(self, program: Any, specs: list[ParamSpec], given: dict[str, Any]) -> None:
        object.__setattr__(self, "_program", program)
        unknown = set(given) - {s.name for s in specs}
        if unknown:
            raise ValueError(f"SymbolBlock: params {sorted(unknown)} are not inputs of the graph")
        for spec in specs:
            param = given.get(spec.name)
            if isinstance(param, Parameter):
                if param.shape is not None and any(d not in (0, e) for d, e in zip(param.shape, spec.shape)):
                    raise ShapeError(f"SymbolBlock: Parameter {spec.name!r} has shape {param.shape}, the graph "
                                     f"needs {spec.shape}")
            else:
                value = param
                param = Parameter(spec.name, grad_req=spec.grad_req, shape=spec.shape, dtype=spec.dtype,
                                  lr_mult=spec.lr_mult, wd_mult=spec.wd_mult, differentiable=spec.differentiable)
                if value is not None:
                    param.set_data(value)
            self._reg_params[spec.name] = param
        self._changed()

    @classmethod
    def _create(cls, program: Any, specs: list[ParamSpec]) -> "SymbolBlock":
        block = cls.__new__(cls)
        HybridBlock.__init__(block)
        block._setup(program, specs, {})
        return block

    @classmethod
    def imports(cls, symbol_file: str | os.PathLike, input_names: str | Sequence[str] | None = None,
                param_file: str | os.PathLike | None = None, device: Any = None, allow_missing: bool = False,
                ignore_extra: bool = False, ctx: Any = None) -> "SymbolBlock":
        """Rebuild a block from ``symbol_file`` (hybrid's ``-symbol.json`` or MXNet's) and ``param_file``.

        ``input_names`` orders the data inputs of ``forward`` (for hybrid files
        ``'data'`` for one input, ``'data0'``, ``'data1'``, ... for several; None keeps the
        file's order; for MXNet files the names of the data variables, default ``['data']``).
        Without ``param_file`` the parameters start uninitialised. ``device`` (Gluon 1.x: ``ctx``;
        the fourth positional argument in both), a ``jax.Device``, receives the loaded parameters.
        Raises FormatError for corrupted, forged or unsupported files, and for a parameter file other
        than the one exported with the symbol file, naming what is wrong.
        """
        device = ctx if device is None else device
        kind, doc = read_symbol_file(symbol_file)
        where = f"symbol file {os.fspath(symbol_file)!r}"
        names = [input_names] if isinstance(input_names, str) else input_names
        if kind == "mxnet":
            from .gluon1.symbol_graph import import_mxnet
            return import_mxnet(cls, doc, where, names, param_file, device, allow_missing, ignore_extra)
        symbol = decode_symbol(doc, where)
        block = cls._create(_program_from(symbol, names, where), symbol.params)
        if param_file is not None:
            data = read_limited(param_file, "parameter file")
            if symbol.params_sha256 is not None and sha256_hex(data) != symbol.params_sha256:
                raise FormatError(f"{where} was exported with another parameter file than {os.fspath(param_file)!r} "
                                  "(its SHA-256 differs from the one the symbol file records): the two files were "
                                  "not written together. Export the block again.")
            block._parameter_loader(os.fspath(param_file), data, device=device, allow_missing=allow_missing,
                                    ignore_extra=ignore_extra)()
        return block

    def forward(self, *args: Any) -> Any:
        return self._program(self, args)

    def _owner_of(self, structural_name: str) -> tuple["SymbolBlock", str]:
        return self, structural_name

    def __repr__(self) -> str:
        return f"SymbolBlock(inputs={self._program.data_names}, params={len(self._reg_params)})"


def _program_from(symbol: SymbolFile, input_names: Sequence[str] | None, where: str) -> GraphProgram:
    order = list(symbol.data_names) if input_names is None else list(input_names)
    if sorted(order) != sorted(symbol.data_names):
        raise ValueError(f"{where}: input_names {order} must name the data inputs {symbol.data_names}")
    position = [symbol.data_names.index(name) for name in order]
    signatures = [([sig.inputs[i][1:] for i in position], sig.predict, sig.train) for sig in symbol.signatures]
    return GraphProgram(order, signatures)
