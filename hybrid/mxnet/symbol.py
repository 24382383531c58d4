"""``mxnet.symbol`` (``mx.sym``): MXNet's operators, and symbol files through hybrid's importer.

Inside ``hybrid_forward`` the ``F`` given is the same operator namespace for eager and hybridized calls,
so ``F.Convolution(...)`` never builds a Symbol. This module serves code that names ``mx.sym`` directly:

- ``sym.<Operator>(...)`` on arrays computes as ``nd.<Operator>``; given a :class:`Symbol` it raises
  ``NotImplementedError`` (graphs are not composed from Symbols here: write a HybridBlock, or load a file);
- ``sym.load(path)`` / ``load_json(text)`` give a :class:`Symbol` holding an MXNet graph, which
  ``gluon.SymbolBlock(outputs, inputs)`` turns into a block (through ``SymbolBlock.imports``);
- ``var``/``Variable`` make named input Symbols; ``Group`` groups Symbols (only as SymbolBlock arguments).
"""
from __future__ import annotations

import json
import os
from typing import TYPE_CHECKING, Any, Sequence

from . import array_methods as _array_methods
from ..formats.serialization import FormatError, read_limited

if TYPE_CHECKING:  # at run time these come from mx.nd through __getattr__, on first use
    from .ndarray import arange, full, ones, zeros

__all__ = ["Symbol", "var", "Variable", "Group", "load", "load_json", "zeros", "ones", "full", "arange"]

_array_methods.enable()


class Symbol:
    """An MXNet symbol: a named variable, a group, or a graph loaded from a ``-symbol.json`` file."""

    def __init__(self, name: str | None = None, graph: dict | None = None, members: Sequence["Symbol"] = (),
                 attrs: dict | None = None):
        self.name, self._graph, self._members, self.attrs = name, graph, tuple(members), dict(attrs or {})

    @property
    def is_variable(self) -> bool:
        return self._graph is None and not self._members

    def list_outputs(self) -> list[str]:
        """Output names (``<node>_output`` as MXNet names them)."""
        if self._graph is not None:
            nodes = self._graph["nodes"]
            return [f"{nodes[h[0]]['name']}_output" if nodes[h[0]]["op"] != "null" else nodes[h[0]]["name"]
                    for h in self._graph["heads"]]
        if self._members:
            return [name for m in self._members for name in m.list_outputs()]
        return [self.name]

    def list_arguments(self) -> list[str]:
        """Variables the graph reads (inputs and parameters), in file order."""
        if self._graph is not None:
            return [n["name"] for i, n in enumerate(self._graph["nodes"])
                    if n["op"] == "null" and i in self._graph.get("arg_nodes", [i])]
        return [self.name] if self.is_variable else [n for m in self._members for n in m.list_arguments()]

    list_inputs = list_arguments

    def tojson(self) -> str:
        """The graph as MXNet's JSON text (graphs loaded from files only)."""
        if self._graph is None:
            raise NotImplementedError(f"Symbol {self.name!r}: only symbols loaded with sym.load/load_json have a "
                                      "JSON form here; export a HybridBlock with net.export(path)")
        return json.dumps(self._graph)

    def save(self, fname: str, remove_amp_cast: bool = True) -> None:
        """Write the graph as a ``-symbol.json`` file."""
        with open(fname, "w") as f:
            f.write(self.tojson())

    def __iter__(self):
        return iter(self._members or (self,))

    def __len__(self) -> int:
        return len(self._members) or 1

    def __getitem__(self, index: int) -> "Symbol":
        return (self._members or (self,))[index]

    def __repr__(self) -> str:
        if self._members:
            return f"<Symbol group [{', '.join(m.name or '?' for m in self._members)}]>"
        return f"<Symbol {self.name}>"

    def _compose_error(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError(_COMPOSE)

    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = __truediv__ = __rtruediv__ = _compose_error
    __call__ = _compose_error

    def get_internals(self) -> Any:
        raise NotImplementedError(_COMPOSE)

    @property
    def shape(self) -> Any:  # a block called with a Symbol reads it first
        raise NotImplementedError(f"a block was called with the Symbol {self.name!r}: {_COMPOSE}")

    ndim = dtype = shape


_COMPOSE = ("hybrid does not compose graphs from mx.sym Symbols: write the network as a HybridBlock (its "
            "hybrid_forward gets F, which works eagerly and hybridized), or load an MXNet graph with "
            "gluon.SymbolBlock.imports(symbol_file, input_names, param_file)")


def var(name: str, attr: dict | None = None, shape: Any = None, dtype: Any = None, **kwargs: Any) -> Symbol:
    """A named input variable (usable as ``gluon.SymbolBlock``'s ``inputs``)."""
    if not isinstance(name, str):
        raise TypeError(f"sym.var: name must be a string, got {type(name).__name__}")
    return Symbol(name, attrs={"shape": shape, "dtype": dtype, **(attr or {})})


Variable = var


def Group(symbols: Sequence[Symbol]) -> Symbol:
    """Several Symbols as one (for ``gluon.SymbolBlock``'s outputs or inputs)."""
    symbols = list(symbols)
    if not all(isinstance(s, Symbol) for s in symbols):
        raise TypeError("sym.Group expects a list of Symbols")
    return Symbol(None, members=symbols)


def load_json(json_str: str) -> Symbol:
    """A Symbol holding the MXNet graph in ``json_str``; FormatError when it is not one."""
    try:
        graph = json.loads(json_str)
    except ValueError as exc:
        raise FormatError(f"sym.load_json: not JSON ({exc})") from None
    if not isinstance(graph, dict) or not isinstance(graph.get("nodes"), list) or "heads" not in graph:
        raise FormatError("sym.load_json: not an MXNet symbol graph (expected 'nodes' and 'heads')")
    heads = graph["heads"]
    name = graph["nodes"][heads[0][0]]["name"] if len(heads) == 1 else None
    return Symbol(name, graph=graph)


def load(fname: str | os.PathLike) -> Symbol:
    """A Symbol holding the graph of an MXNet ``-symbol.json`` file."""
    symbol = load_json(read_limited(fname, "MXNet symbol file").decode("utf-8"))
    symbol.attrs["__file__"] = os.fspath(fname)
    return symbol


def _refuse_symbols(name: str, fn: Any) -> Any:
    def call(*args: Any, **kwargs: Any) -> Any:
        if any(isinstance(a, Symbol) for a in args) or any(isinstance(v, Symbol) for v in kwargs.values()):
            raise NotImplementedError(f"mx.sym.{name} on a Symbol: {_COMPOSE}")
        return fn(*args, **kwargs)
    call.__name__ = name
    call.__doc__ = fn.__doc__
    return call


def __getattr__(name: str) -> Any:
    if name.startswith("__"):
        raise AttributeError(name)
    from . import ndarray
    if name in ("contrib", "linalg", "random", "image"):
        from ..gluon1.ops import F
        return getattr(F, name)
    try:
        value = getattr(ndarray, name)
    except AttributeError:
        raise AttributeError(f"mx.sym.{name}: not an MXNet symbol function or operator that hybrid has") from None
    if callable(value):
        value = _refuse_symbols(name, value)
    globals()[name] = value
    return value
