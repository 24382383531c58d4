"""``mxnet.gluon.block``: ``Block``, ``HybridBlock`` and a ``SymbolBlock`` that also takes ``mx.sym`` Symbols."""
from __future__ import annotations

import os
import tempfile
from typing import Any

from ...block import Block, HybridBlock
from ...export import SymbolBlock as _SymbolBlock
from ..symbol import Symbol

__all__ = ["Block", "HybridBlock", "SymbolBlock"]


def _names(symbols: Any) -> list[str]:
    items = [symbols] if isinstance(symbols, Symbol) else list(symbols)
    out = []
    for item in items:
        if not isinstance(item, Symbol) or not all(m.is_variable for m in item):
            raise TypeError("gluon.SymbolBlock: inputs must be mx.sym.var(...) Symbols (or a list of them)")
        out.extend(m.name for m in item)
    return out


class SymbolBlock(_SymbolBlock):
    """``SymbolBlock(outputs, inputs, params=None)``: with ``outputs`` a Symbol from ``mx.sym.load`` /
    ``load_json`` and ``inputs`` ``mx.sym.var`` Symbols, the block runs that MXNet graph once
    ``load_parameters(param_file)`` has given it its parameters (hybrid's importer reads the shapes from
    that file); with hybrid's graph Values, as ``hybrid.SymbolBlock``.
    ``SymbolBlock.imports(symbol_file, input_names, param_file)`` reads both files at once.
    """

    def __init__(self, outputs: Any = None, inputs: Any = None, params: Any = None, **kwargs: Any):
        if not isinstance(outputs, Symbol):
            super().__init__(outputs, inputs, params)
            return
        if outputs._graph is None:
            raise NotImplementedError("gluon.SymbolBlock: outputs must be a Symbol loaded with mx.sym.load or "
                                      "load_json (hybrid does not compose graphs from mx.sym Symbols)")
        HybridBlock.__init__(self)
        object.__setattr__(self, "_pending", (outputs.tojson(), _names(inputs)))

    def load_parameters(self, filename: str, *args: Any, **kwargs: Any) -> None:
        pending = self.__dict__.get("_pending")
        if pending is None:
            return super().load_parameters(filename, *args, **kwargs)
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "graph-symbol.json")
            with open(path, "w") as f:
                f.write(pending[0])
            imported = type(self).imports(path, pending[1], filename, **kwargs)
        del self.__dict__["_pending"]
        self.__dict__.update(imported.__dict__)

    def forward(self, *args: Any) -> Any:
        if "_pending" in self.__dict__:
            raise RuntimeError("gluon.SymbolBlock built from an mx.sym Symbol: call net.load_parameters(param_file) "
                               "first (hybrid reads the graph's parameter shapes from MXNet's .params file)")
        return super().forward(*args)
