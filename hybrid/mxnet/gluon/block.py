"""``mxnet.gluon.block``: ``Block``, ``HybridBlock`` and a ``SymbolBlock`` that also takes ``mx.sym`` Symbols."""
from __future__ import annotations

import os
import tempfile
from typing import Any, Sequence

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
    ``load_json`` and ``inputs`` ``mx.sym.var`` Symbols, the block runs that MXNet graph (its parameters
    start uninitialised unless ``params`` holds them); with hybrid's graph Values, as ``hybrid.SymbolBlock``.
    ``SymbolBlock.imports(symbol_file, input_names, param_file)`` reads files.
    """

    def __new__(cls, outputs: Any = None, inputs: Any = None, params: Any = None, **kwargs: Any) -> Any:
        if isinstance(outputs, Symbol):
            if outputs._graph is None:
                raise NotImplementedError("gluon.SymbolBlock: outputs must be a Symbol loaded with mx.sym.load or "
                                          "load_json (hybrid does not compose graphs from mx.sym Symbols)")
            with tempfile.TemporaryDirectory() as tmp:
                path = os.path.join(tmp, "graph-symbol.json")
                outputs.save(path)
                block = _SymbolBlock.imports.__func__(cls, path, _names(inputs))
            for name, value in (params or {}).items():
                block.collect_params()[name].set_data(value.data() if hasattr(value, "data") else value)
            block._from_symbol = True
            return block
        return super().__new__(cls)

    def __init__(self, outputs: Any = None, inputs: Any = None, params: Any = None, **kwargs: Any):
        if getattr(self, "_from_symbol", False):
            return
        super().__init__(outputs, inputs, params)
