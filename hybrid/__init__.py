"""hybrid: a Gluon-style imperative/symbolic deep-learning framework on JAX.

    import hybrid
    from hybrid import nn, autograd, init, loss, Trainer, Parameter, Constant, Block, HybridBlock
    from hybrid import data, utils
"""
from . import autograd, errors, graph, init, loss, nn, optimizer, random
from . import lr_scheduler, metric
from .block import Block, HybridBlock
from .inspect import Inspection, inspect
from .parameter import Constant, Parameter
from .trainer import Trainer
from . import data, utils
from . import rnn

__version__ = "0.1.0"

__all__ = ["autograd", "errors", "graph", "init", "loss", "nn", "optimizer", "random", "Block", "HybridBlock",
           "Parameter", "Constant", "Trainer", "inspect", "Inspection", "data", "utils", "lr_scheduler", "metric",
           "rnn"]
