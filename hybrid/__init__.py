"""hybrid: a Gluon-style imperative/symbolic deep-learning framework on JAX.

    import hybrid
    from hybrid import nn, autograd, init, loss, Trainer, Parameter, Constant, Block, HybridBlock, SymbolBlock
    from hybrid import data, utils, model_zoo
"""
from . import autograd, data, errors, graph, init, loss, lr_scheduler, metric, nn, optimizer, random, utils
from . import rnn
from . import distributed
from .block import Block, HybridBlock
from ._compiled.compile import CompiledStep, compile
from . import export
from .export import SymbolBlock
from ._compiled.inspect import CacheEntry, Inspection, compile_caches, inspect, memory_plan
from .compile_log import set_verbosity
from .compilation_cache import get_compilation_cache, set_compilation_cache
from .graph.memory.remat import RematPlan
from ._core.memory_report import MemoryReport, ProgramMemory, memory_report, reset_memory_report
from .parameter import Constant, Parameter, ParameterDict
from .trainer import Trainer
from . import model_zoo
from . import estimator
from . import amp
from . import interop
from . import recordio

__version__ = "0.1.0"

__all__ = ["autograd", "errors", "graph", "init", "loss", "nn", "optimizer", "random", "Block", "HybridBlock",
           "Parameter", "Constant", "Trainer", "inspect", "Inspection", "data", "utils", "lr_scheduler", "metric",
           "compile", "CompiledStep", "export", "SymbolBlock", "rnn", "distributed", "memory_plan", "model_zoo",
           "compile_caches", "CacheEntry", "set_verbosity", "estimator", "amp", "set_compilation_cache",
           "get_compilation_cache", "ParameterDict", "interop", "RematPlan", "memory_report", "reset_memory_report",
           "MemoryReport", "ProgramMemory", "recordio"]
