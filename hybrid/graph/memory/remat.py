"""Rematerialisation of repeated layers, lowered so that XLA honours it on every backend.

On XLA:CPU, ``jax.checkpoint`` around Python-unrolled layers does not lower memory: the optimisation
barriers are dropped and CSE merges the recomputation back into the forward pass. Rematerialisation
inside ``lax.scan`` survives. So this module looks for a *chain* of isomorphic units in a graph
(consecutive layers built the same way, e.g. the 48 Dense+ReLU blocks of a deep MLP), and replaces the
run by one ``remat_scan`` node. Its lowering stacks each parameter slot across the layers and runs:

- ``segment=k``: an outer scan over ``n // k`` checkpointed segments, each an inner scan over ``k``
  checkpointed layers (Chen et al. 2016): the forward keeps only segment boundaries, the backward
  recomputes one segment at a time and inside it one layer at a time; about ``n/k + k`` activations are
  live instead of ``n``-times the per-layer residuals, for one extra forward pass.
- ``segment=0`` with ``policy='dots'``: one scan whose checkpointed layers save their matmul/conv
  outputs and recompute the cheap elementwise ops (no extra matmuls).

A unit is the group of nodes sharing a block-path prefix; units form a chain when each reads exactly
one value from the previous unit (the activation), otherwise only graph inputs (its own parameters,
each used by this unit alone) and constants, and nothing but the next unit reads its values.
"""
from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from ..ir import Graph, Node, Value
from .._lower import lower, register_kind
from ..rewrite import Rewriter

__all__ = ["Chain", "find_chains", "apply_remat", "RematPlan"]


@dataclass
class Chain:
    """A run of isomorphic units (``units[i]`` lists unit i's nodes).

    Inputs of a unit, by role: the activation from the previous unit (``inputs[i]``); values
    shared by every unit (``shared``); values that differ per unit, e.g. parameters (``stacked[j][i]``
    for slot ``j``). ``outputs[i]`` is the activation leaving unit i; ``states[j][i]`` are further
    values a unit returns (e.g. BatchNorm statistics), read outside the chain.
    """

    units: list[list[Node]]
    inputs: list[Value]
    outputs: list[Value]
    shared: list[Value]
    stacked: list[list[Value]]
    states: list[list[Value]]
    template: Graph

    @property
    def length(self) -> int:
        return len(self.units)

    @property
    def activation_bytes(self) -> int:
        return self.outputs[0].nbytes


@dataclass(frozen=True)
class RematPlan:
    """What to do with a chain: ``segment`` layers per checkpointed segment (0: one level),
    ``policy`` 'full' (save layer inputs only) or 'dots' (also save matmul/conv outputs)."""

    segment: int
    policy: str = "full"

    def describe(self) -> str:
        if self.segment:
            return f"nested scan, segments of {self.segment} layers"
        return f"scan, per-layer checkpoint saving {'matmul outputs' if self.policy == 'dots' else 'layer inputs'}"


def _scope_key(node: Node, depth: int) -> tuple[str, ...] | None:
    parts = tuple(p for p in node.scope.split(".") if p) if node.scope else ()
    return parts[:depth] if len(parts) >= depth else None


def _freeze(value: Any) -> Any:
    if isinstance(value, dict):
        return tuple(sorted((k, _freeze(v)) for k, v in value.items()))
    if isinstance(value, (list, tuple)):
        return tuple(_freeze(v) for v in value)
    try:
        hash(value)
        return value
    except TypeError:
        return repr(value)


def _unit_signature(nodes: list[Node], consts: dict) -> tuple | None:
    """(signature, external input values, constant values, local positions) of a unit; None when
    the unit has side effects. Constants enter the signature by type only (values may differ)."""
    local: dict[Value, tuple[int, int]] = {}
    external: list[Value] = []
    constants: list[Value] = []
    signature = []
    for i, node in enumerate(nodes):
        if node.effects:
            return None
        refs = []
        for value in node.inputs:
            if value in local:
                refs.append(("local",) + local[value])
            elif value in consts:
                if value not in constants:
                    constants.append(value)
                refs.append(("const", constants.index(value)))
            else:
                if value not in external:
                    external.append(value)
                refs.append(("ext", external.index(value)))
        attrs = {k: v for k, v in node.attrs.items() if k != "_subgraph"}
        signature.append((node.kind, node.op, _freeze(attrs), tuple((v.shape, str(v.dtype)) for v in node.outputs),
                          tuple(refs)))
        for j, value in enumerate(node.outputs):
            local[value] = (i, j)
    types = (tuple((v.shape, str(v.dtype)) for v in external), tuple((v.shape, str(v.dtype)) for v in constants))
    return (tuple(signature), types), external, constants, local


def _const_key(consts: dict, value: Value) -> Any:
    array = consts[value]
    try:
        array = np.asarray(array)
        return (array.dtype.str, array.shape, hashlib.sha1(array.tobytes()).hexdigest())
    except Exception:  # e.g. PRNG keys: never equal to another unit's
        return id(value)


def find_chains(graph: Graph, min_length: int = 3, max_period: int = 6) -> list[Chain]:
    """Maximal runs of at least ``min_length`` isomorphic, chained units (largest first); runs never
    overlap. A unit is a group of up to ``max_period`` consecutive blocks at some block-path depth
    (e.g. the Dense, BatchNorm, Activation and Dropout children that make up one layer)."""
    readers: dict[Value, set[Node]] = {}
    for node in graph.nodes:
        for value in node.inputs:
            readers.setdefault(value, set()).add(node)
    graph_outputs = set(graph.outputs)
    position = {node: i for i, node in enumerate(graph.nodes)}
    max_depth = max((len([p for p in n.scope.split(".") if p]) for n in graph.nodes if n.scope), default=0)
    found: list[Chain] = []
    for depth in range(1, max_depth + 1):
        blocks: list[tuple[Any, list[Node]]] = []
        for node in graph.nodes:
            key = _scope_key(node, depth)
            if key is not None and blocks and blocks[-1][0] == key:
                blocks[-1][1].append(node)
            else:
                blocks.append((key, [node]))
        for period in range(1, max_period + 1):  # a layer may span several consecutive blocks
            for offset in range(period):
                units = _merge(blocks, offset, period)
                found.extend(_runs(graph, units, readers, graph_outputs, position, min_length))
    found.sort(key=lambda c: (-sum(len(unit) for unit in c.units), -c.activation_bytes))
    chosen: list[Chain] = []
    taken: set = set()
    for chain in found:
        nodes = {n for unit in chain.units for n in unit}
        if not nodes & taken:
            chosen.append(chain)
            taken |= nodes
    return chosen


def _merge(blocks: list[tuple[Any, list[Node]]], offset: int, period: int) -> list[tuple[Any, list[Node]]]:
    """Blocks grouped ``period`` at a time from ``offset``; groups containing an unscoped block are
    marked unusable (key None)."""
    units = [(None, nodes) for _, nodes in blocks[:offset]]
    for start in range(offset, len(blocks), period):
        group = blocks[start:start + period]
        key = None if any(k is None for k, _ in group) or len(group) < period else tuple(k for k, _ in group)
        units.append((key, [n for _, nodes in group for n in nodes]))
    return units


def _runs(graph, units, readers, graph_outputs, position, min_length) -> list[Chain]:
    infos = [_unit_signature(nodes, graph.consts) if key is not None else None for key, nodes in units]
    chains, run = [], []
    for index, info in enumerate(infos + [None]):
        if info is not None and run and _links(infos, run, index):
            run.append(index)
            continue
        if len(run) >= min_length:
            chain = _close(graph, units, infos, run, readers, graph_outputs, position, min_length)
            if chain is not None:
                chains.append(chain)
        run = [index] if info is not None else []
    return chains


def _link(infos, a: int, b: int) -> tuple[int, tuple[int, int]] | None:
    """(external-input position in unit b, output position in unit a) of the single value unit b
    reads from unit a; None unless there is exactly one."""
    produced = infos[a][3]
    hits = [(k, produced[v]) for k, v in enumerate(infos[b][1]) if v in produced]
    return hits[0] if len(hits) == 1 else None


def _links(infos, run: list[int], index: int) -> bool:
    """Unit ``index`` continues the run: same signature, and linked to its predecessor the way the
    run's first two units are."""
    if infos[index][0] != infos[run[-1]][0]:
        return False
    link = _link(infos, run[-1], index)
    return link is not None and (len(run) == 1 or link == _link(infos, run[0], run[1]))


def _close(graph, units, infos, run, readers, graph_outputs, position, min_length) -> Chain | None:
    """The Chain of a run of linked units, trimmed from the end until it is valid; None if too short."""
    k_chain, exit_position = _link(infos, run[0], run[1])
    while len(run) >= min_length:
        result = _build_chain(graph, [units[i][1] for i in run], [infos[i] for i in run], k_chain, exit_position,
                              readers, graph_outputs, position)
        if result is not None:
            return result
        run = run[:-1]
    return None


def _build_chain(graph, units, infos, k_chain, exit_position, readers, graph_outputs, position) -> Chain | None:
    n = len(units)
    start = position[units[0][0]]
    members = [set(unit) for unit in units]
    # exits: values read outside their unit; the activation must only feed the next unit
    exits: list[list[tuple[int, int]]] = []
    for i, unit in enumerate(units):
        local = infos[i][3]
        out = [local[v] for node in unit for v in node.outputs
               if v in graph_outputs or readers.get(v, set()) - members[i]]
        exits.append(out)
        if exit_position not in out:
            return None
        activation = unit[exit_position[0]].outputs[exit_position[1]]
        if i + 1 < n and (activation in graph_outputs or readers.get(activation, set()) - members[i] - members[i + 1]):
            return None
        for pos in out:
            value = unit[pos[0]].outputs[pos[1]]
            if pos != exit_position and readers.get(value, set()) & set().union(*members):
                return None  # a state read by another unit of the chain
    if any(e != exits[0] for e in exits):
        return None
    shared, stacked_positions = [], []
    for k in range(len(infos[0][1])):
        if k == k_chain:
            continue
        values = [info[1][k] for info in infos]
        if any(v.producer is not None and position[v.producer] >= start for v in values):
            return None  # must be available before the chain starts
        if all(v is values[0] for v in values):
            shared.append(k)
        else:
            stacked_positions.append(k)
    const_shared, const_stacked = [], []
    for k in range(len(infos[0][2])):
        keys = {_const_key(graph.consts, info[2][k]) for info in infos}
        (const_shared if len(keys) == 1 else const_stacked).append(k)
    inputs = [info[1][k_chain] for info in infos]
    outputs = [unit[exit_position[0]].outputs[exit_position[1]] for unit in units]
    state_positions = [pos for pos in exits[0] if pos != exit_position]
    template = _template(units[0], infos[0], k_chain, shared, stacked_positions, const_shared, const_stacked,
                         exit_position, state_positions, graph.consts)
    return Chain(units, inputs, outputs, [infos[0][1][k] for k in shared],
                 [[info[1][k] for info in infos] for k in stacked_positions]
                 + [[info[2][k] for info in infos] for k in const_stacked],
                 [[unit[p[0]].outputs[p[1]] for unit in units] for p in state_positions], template)


def _template(unit, info, k_chain, shared, stacked, const_shared, const_stacked, exit_position, state_positions,
              consts) -> Graph:
    """Unit 0 as a graph of (activation, *shared, *stacked slices) -> [activation, *states]."""
    external, constants = info[1], info[2]
    mapping: dict[Value, Value] = {}
    inputs = []
    for name, value in [("h", external[k_chain])] + [(f"shared{i}", external[k]) for i, k in enumerate(shared)] \
            + [(f"slot{i}", external[k]) for i, k in enumerate(stacked)] \
            + [(f"const{i}", constants[k]) for i, k in enumerate(const_stacked)]:
        mapping[value] = Value(value.shape, value.dtype, name)
        inputs.append(mapping[value])
    sub_consts = {}
    for k in const_shared:
        fresh = Value(constants[k].shape, constants[k].dtype)
        mapping[constants[k]] = fresh
        sub_consts[fresh] = consts[constants[k]]
    nodes = []
    for node in unit:
        copy = node.with_inputs([mapping[v] for v in node.inputs])
        mapping.update(zip(node.outputs, copy.outputs))
        nodes.append(copy)
    outs = [unit[exit_position[0]].outputs[exit_position[1]]] + [unit[p[0]].outputs[p[1]] for p in state_positions]
    return Graph(inputs, [mapping[v] for v in outs], nodes, sub_consts)


def apply_remat(graph: Graph, chains: list[Chain], plan: RematPlan) -> tuple[Graph, dict]:
    """Replace each chain by a ``remat_scan`` node lowered according to ``plan``."""
    if not chains:
        return graph, {"chains": 0, "layers": 0}
    first_of = {chain.units[0][0]: chain for chain in chains}
    absorbed = {n for chain in chains for unit in chain.units for n in unit}
    rewriter = Rewriter(graph)
    for node in graph.nodes:
        chain = first_of.get(node)
        if chain is not None:
            n = chain.length
            inputs = [chain.inputs[0]] + chain.shared + [v for slot in chain.stacked for v in slot]
            replaced = [chain.outputs[-1]] + [v for state in chain.states for v in state]
            remat = rewriter.emit(Node(
                "remat_scan", "remat_scan", [rewriter.value(v) for v in inputs], [(v.shape, v.dtype) for v in replaced],
                {"name": f"{n}x{chain.template.nodes[0].display_name()}", "layers": n, "shared": len(chain.shared),
                 "slots": len(chain.stacked), "states": len(chain.states),
                 "segment": plan.segment if 0 < plan.segment < n else 0, "policy": plan.policy,
                 "_subgraph": chain.template}, None, node.scope))
            for old, new in zip(replaced, remat.outputs):
                rewriter.replace(old, new)
        elif node not in absorbed:
            rewriter.keep(node)
    result = rewriter.finish()
    return result, {"chains": len(chains), "layers": sum(c.length for c in chains), "segment": plan.segment,
                    "policy": plan.policy, "nodes_removed": len(graph.nodes) - len(result.nodes)}


def sqrt_segment(length: int) -> int:
    """The segment size of the classic sqrt(n) plan."""
    return max(1, round(math.sqrt(length)))


@register_kind("remat_scan")
def _evaluate_remat_scan(node: Node, args: list) -> list:
    attrs = node.attrs
    n, n_shared, n_slots, segment = attrs["layers"], attrs["shared"], attrs["slots"], attrs["segment"]
    body = lower(attrs["_subgraph"])
    policy = jax.checkpoint_policies.dots_with_no_batch_dims_saveable if attrs["policy"] == "dots" else None
    shared = args[1:1 + n_shared]
    slots = [jnp.stack(args[1 + n_shared + s * n:1 + n_shared + (s + 1) * n]) for s in range(n_slots)]

    def layer(h, per_layer):
        out = body(h, *shared, *per_layer)
        return out[0], tuple(out[1:])

    layer = jax.checkpoint(layer, policy=policy)

    def run_layers(h, stacked):
        return jax.lax.scan(layer, h, stacked)

    h = args[0]
    if not segment:
        h, states = run_layers(h, slots)
    else:
        count, rest = divmod(n, segment)
        grouped = [s[:count * segment].reshape((count, segment) + s.shape[1:]) for s in slots]
        h, states = jax.lax.scan(jax.checkpoint(run_layers), h, grouped)
        states = tuple(s.reshape((count * segment,) + s.shape[2:]) for s in states)
        if rest:
            h, tail = run_layers(h, [s[count * segment:] for s in slots])
            states = tuple(jnp.concatenate([a, b]) for a, b in zip(states, tail))
    return [h] + [state[i] for state in states for i in range(n)]


def candidate_plans(length: int) -> list[RematPlan]:
    """Plans for a chain of ``length`` layers, cheapest recomputation first: save matmul outputs
    (recompute elementwise ops), then plans recomputing the forward once (per-layer checkpoints,
    and nested segments around sqrt(length))."""
    root = sqrt_segment(length)
    segments = sorted({k for k in (root - 2, root - 1, root, root + 1, root + 2) if 1 < k < length})
    return [RematPlan(0, "dots"), RematPlan(0, "full")] + [RematPlan(k) for k in segments]


def choose_plan(graph: Graph, spec: Any, measure) -> tuple[Graph, RematPlan | None, dict]:
    """Apply the remat ``spec`` to ``graph``.

    ``spec``: None (nothing), ``'sqrt'``, ``'auto'`` (least memory among plans recomputing at
    most one forward pass), an int byte budget (the least recomputation whose memory fits), or a
    :class:`RematPlan`. ``measure(graph) -> bytes`` compiles a candidate's training step and
    returns XLA's memory figure; it is only called for ``'auto'`` and budgets.
    Returns the graph, the plan used (None when nothing applies) and statistics.
    """
    if spec is None:
        return graph, None, {}
    chains = find_chains(graph)
    if not chains:
        return graph, None, {"chains": 0, "note": "no chain of repeated layers: memory unchanged"}
    length = chains[0].length
    if isinstance(spec, RematPlan):
        plan = spec
    elif spec == "sqrt":
        plan = RematPlan(sqrt_segment(length))
    elif spec == "auto" or isinstance(spec, (int, np.integer)):
        measured = {None: measure(graph)}
        for candidate in candidate_plans(length):
            measured[candidate] = measure(apply_remat(graph, chains, candidate)[0])
        if spec == "auto":
            plan = min((p for p in measured if p is not None), key=lambda p: (measured[p], p.segment == 0))
        else:
            fitting = [p for p in measured if measured[p] <= spec]
            plan = fitting[0] if fitting else min(measured, key=lambda p: measured[p])
            if plan is None:
                return graph, None, {"chains": len(chains), "budget": int(spec), "planned_bytes": measured[None],
                                     "note": "fits without rematerialisation"}
        result, stats = apply_remat(graph, chains, plan)
        stats.update(planned_bytes=measured[plan], unoptimised_bytes=measured[None],
                     budget=None if spec == "auto" else int(spec),
                     candidates={(p.describe() if p else "none"): b for p, b in measured.items()})
        if spec != "auto" and measured[plan] > spec:
            stats["note"] = "budget cannot be met; using the plan with the least memory"
        return result, plan, stats
    else:
        raise ValueError(f"remat must be None, 'sqrt', 'auto', a byte budget or a RematPlan, got {spec!r}")
    result, stats = apply_remat(graph, chains, plan)
    return result, plan, stats
