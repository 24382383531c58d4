"""``mxnet.gluon``: hybrid's blocks, parameters, layers, losses and trainer under Gluon 1.x's module names."""
from __future__ import annotations

from .. import array_methods as _array_methods
from . import data  # noqa: F401
from ...parameter import Constant, Parameter, ParameterDict
from . import block, contrib, loss, model_zoo, nn, parameter, rnn, utils  # noqa: F401
from .block import Block, HybridBlock, SymbolBlock
from .trainer import Trainer

__all__ = ["Block", "HybridBlock", "SymbolBlock", "Parameter", "Constant", "ParameterDict", "Trainer", "nn", "rnn",
           "loss", "data", "utils", "model_zoo", "contrib", "block", "parameter"]

_array_methods.enable()
