"""Memory planning on any :class:`~hybrid.graph.Graph`: schedules, liveness, in-place reuse,
arena offsets (greedy-by-size, shared objects, exact) and :func:`plan_memory`.

    plan = hybrid.graph.memory.plan_memory(graph, schedule="memory_aware")
    print(plan.summary())

:func:`training_graph` gives the forward-plus-backward graph of a pure function to plan for.
:class:`RematPlan` and the ``remat=`` options of ``hybridize`` are planned by :mod:`.remat`.
"""
from .assignment import Assignment, AssignmentError, arena_size, check_assignment, greedy_by_size, shared_objects
from .exact import exact
from .inplace import inplace_pairs, merge_inplace
from .liveness import Buffer, Liveness, live_bytes, liveness
from .plan import STRATEGIES, MemoryPlan, format_bytes, plan_memory
from .remat import BudgetWarning, RematPlan
from .schedule import SCHEDULES, memory_aware, topological
from .training import training_graph, training_step

__all__ = ["Assignment", "AssignmentError", "Buffer", "BudgetWarning", "Liveness", "MemoryPlan", "RematPlan",
           "SCHEDULES", "STRATEGIES",
           "arena_size", "check_assignment", "exact", "format_bytes", "greedy_by_size", "inplace_pairs",
           "live_bytes", "liveness", "memory_aware", "merge_inplace", "plan_memory", "shared_objects",
           "topological", "training_graph", "training_step"]
