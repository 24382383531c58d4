"""Graph passes: each module registers one pass, ``pass(graph, target) -> (graph, stats dict)``, under the
name of its module and function.

A pass declares the passes it must follow (``requires``, when both are in a pipeline) and whether it
must be the last one (``last``); the pipeline checks the order. A pass that leaves dead nodes behind
reports how many nodes it rewrote away as ``nodes_removed`` in its statistics, and the pipeline then
runs dead-code elimination after it: passes do not clean up after themselves.
"""
from __future__ import annotations

from ._registry import PASSES, PassFn, PassInfo, register_pass
from . import attention, bn_fold, cse, dce, fold, fuse, horizontal_fusion, layout, recognize, simplify  # noqa: F401,E501
from . import softmax_ce  # noqa: F401

__all__ = ["PASSES", "PassFn", "PassInfo", "register_pass"]
