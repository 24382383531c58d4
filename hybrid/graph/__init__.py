"""The symbolic half of hybrid: IR, big ops, tracing, passes and lowering.

Knows nothing of Blocks; usable on any pure JAX function::

    g = hybrid.graph.trace(fn, x)
    g, stats = hybrid.graph.run_passes(g, hybrid.graph.DEFAULT_PASSES)
    y = hybrid.graph.lower(g)(x)
"""
from . import layer_ops, ops, passes  # noqa: F401  (layer_ops registers the big ops)
from .ir import Graph, GraphError, Node, Value
from ._lower import lower
from .pipeline import DEFAULT_PASSES, PassStat, default_passes, format_stats, resolve_passes, run_passes
from .target import Target, compiler_options
from ._trace import from_jaxpr, trace
from . import memory  # noqa: E402,F401  (after trace and passes, which it uses)

__all__ = ["Graph", "GraphError", "Node", "Value", "trace", "from_jaxpr", "lower", "run_passes",
           "resolve_passes", "format_stats", "DEFAULT_PASSES", "default_passes", "PassStat", "Target",
           "compiler_options", "ops", "layer_ops", "memory"]
