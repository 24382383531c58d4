"""Schedules: the order in which a graph's nodes run (a topological order of ``graph.nodes``).

- :func:`topological`: the graph's own order (the order of tracing).
- :func:`memory_aware`: greedy list scheduling for a low peak. Among the nodes whose inputs
  are ready it runs the one with the smallest *net allocation*: the bytes of its outputs minus
  the bytes of the intermediates it reads for the last time (ties: the earlier node in the
  graph's order, so with no memory to win the graph's order is kept). Nodes with side effects
  keep their relative order. The result is compared with the graph's own order by peak live
  bytes of intermediates (then with inputs and outputs) and the better one is returned, so the
  peak never goes up.
"""
from __future__ import annotations

import heapq
from collections import Counter
from typing import Callable

from ..ir import Graph, Node, Value
from .liveness import liveness, nbytes

__all__ = ["topological", "memory_aware", "SCHEDULES"]


def topological(graph: Graph) -> list[Node]:
    """The graph's own node order."""
    return list(graph.nodes)


def memory_aware(graph: Graph) -> list[Node]:
    """A valid order whose peak live bytes are at most those of the graph's own order (see module doc)."""
    given = list(graph.nodes)
    greedy = _net_allocation_order(graph)
    return min((given, greedy), key=lambda order: _peaks(graph, order))


def _peaks(graph: Graph, order: list[Node]) -> tuple[int, int]:
    live = liveness(graph, order)
    return live.max_live_bytes(), live.max_live_bytes(with_io=True)


def _net_allocation_order(graph: Graph) -> list[Node]:
    position = {node: i for i, node in enumerate(graph.nodes)}
    outputs = set(graph.outputs)
    reads = {node: Counter(v for v in node.inputs if v.producer is not None) for node in graph.nodes}
    freeable = {v: nbytes(v) for node in graph.nodes for v in node.outputs if v not in outputs}
    users: dict[Value, list[Node]] = {}
    for node in graph.nodes:
        for value in reads[node]:
            users.setdefault(value, []).append(node)
    left = {value: len(readers) for value, readers in users.items()}  # distinct readers not yet run
    waiting: dict[Node, int] = {}
    after: dict[Node, list[Node]] = {}
    previous_effect = None
    for node in graph.nodes:
        producers = {v.producer for v in reads[node] if v.producer is not None}
        if node.effects:
            if previous_effect is not None:
                producers.add(previous_effect)
            previous_effect = node
        waiting[node] = len(producers)
        for producer in producers:
            after.setdefault(producer, []).append(node)

    def score(node: Node) -> int:
        allocated = sum(nbytes(v) for v in node.outputs)
        freed = sum(freeable.get(v, 0) for v in reads[node] if left[v] == 1)
        return allocated - freed

    ready = [(score(n), position[n], n) for n in graph.nodes if not waiting[n]]
    heapq.heapify(ready)
    done: set[Node] = set()
    order: list[Node] = []
    while ready:
        key, _, node = heapq.heappop(ready)
        if node in done or key != score(node):
            continue  # a stale entry: the node was pushed again with a lower score
        done.add(node)
        order.append(node)
        for value in reads[node]:
            left[value] -= 1
            if left[value] == 1 and value in freeable:
                last = next(u for u in users[value] if u not in done)
                if not waiting[last]:
                    heapq.heappush(ready, (score(last), position[last], last))
        for successor in after.get(node, ()):
            waiting[successor] -= 1
            if not waiting[successor]:
                heapq.heappush(ready, (score(successor), position[successor], successor))
    return order


SCHEDULES: dict[str, Callable[[Graph], list[Node]]] = {"topological": topological, "memory_aware": memory_aware}
