"""Programs of tapes: evaluating recorded nodes, compiling them into one jitted program, and the cache
of programs by structural key."""
from __future__ import annotations

import functools
import logging
from collections import OrderedDict
from typing import NamedTuple, Sequence

import jax
from jax._src import linear_util as lu

from ...graph.target import compiler_options
from .recording import Node

log = logging.getLogger("hybrid.lazy")


class ProgramKey(NamedTuple):
    """What a tape program is cached by: the tape's structural key, the slots it returns and the
    positions of the inputs it donates."""

    structure: tuple
    requested: tuple
    donate: tuple


class Program(NamedTuple):
    """A compiled tape program: ``run(donated inputs, kept inputs) -> values``; ``picks`` places each
    requested slot among the values (None: they come in order); ``memory`` holds its memory record
    (made at its first run); ``nested`` is the same program called inside other traces, where jit
    takes no compiler options."""

    run: jax.stages.Wrapped
    picks: tuple | None
    memory: list
    nested: jax.stages.Wrapped


_PROGRAMS: "OrderedDict[ProgramKey, Program]" = OrderedDict()
_PROGRAMS_BY_TOKEN: dict[int, set] = {}
_LAST_RUN: list = [None]  # the entry of _PROGRAMS run last, which is its last entry
MAX_PROGRAMS = 256


def forget_token(token: int) -> None:
    """Release every cached program that calls the function registered under ``token``."""
    for key in _PROGRAMS_BY_TOKEN.pop(token, ()):
        if _PROGRAMS.pop(key, None) is _LAST_RUN[0]:
            _LAST_RUN[0] = None


def cached_programs() -> int:
    """How many tape programs are compiled and cached."""
    return len(_PROGRAMS)


def lookup(key: ProgramKey) -> Program | None:
    """The cached program of ``key`` (made the most recently used), or None."""
    entry = _PROGRAMS.get(key)
    if entry is not None:
        if entry is not _LAST_RUN[0]:  # least recently used goes first (it is already last otherwise)
            _PROGRAMS.move_to_end(key)
        _LAST_RUN[0] = entry
    return entry


def store(key: ProgramKey, entry: Program, tokens: set[int]) -> None:
    """Cache ``entry`` under ``key``, released with any of ``tokens`` (see :func:`forget_token`)."""
    _PROGRAMS[key] = entry
    _LAST_RUN[0] = entry
    for token in tokens:
        _PROGRAMS_BY_TOKEN.setdefault(token, set()).add(key)
    while len(_PROGRAMS) > MAX_PROGRAMS:
        old, _ = _PROGRAMS.popitem(last=False)
        for keys in _PROGRAMS_BY_TOKEN.values():
            keys.discard(old)


class Stats:
    """Counters of compiles and flushes (``hybrid.autograd.stats``), for tests and the debug log."""

    compiles = 0
    flushes = 0


def evaluate(nodes: Sequence[Node], env: list, start: int = 0) -> None:
    """Run ``nodes[start:]`` on ``env`` (a list indexed by slot)."""
    for index in range(start, len(nodes)):
        node = nodes[index]
        for slot, value in zip(node.outputs, _run_node(nodes, index, node, env)):
            env[slot] = value


def _run_node(nodes: Sequence[Node], index: int, node: Node, env: list) -> Sequence:
    """The outputs of ``nodes[index]`` computed from ``env``."""
    kind = node.kind
    if kind == "grad":
        return _run_grad(nodes, index, node, env)
    args = [env[s] for s in node.inputs]
    if kind == "prim":
        out = node.op.bind(*args, **node.params)
        return out if node.op.multiple_results else (out,)
    if kind == "call":
        return node.op(*args)
    return _run_region(node, args, env)


def _run_region(node: Node, args: list, env: list) -> list:
    """A custom_jvp/custom_vjp call: the recorded primal replayed under its primitive and rules."""
    spec = node.params

    def replay(*values):
        local = list(env)
        for slot, value in zip(spec.in_slots, values):
            local[slot] = value
        evaluate(spec.inner, local)
        return [local[s] for s in spec.out_slots]

    fun = lu.wrap_init(replay, debug_info=spec.debug_info)
    return node.op.bind(*args, subfuns=(fun, *spec.rules), **spec.bind)


def _run_grad(nodes: Sequence[Node], index: int, node: Node, env: list) -> list:
    """Gradients of the heads with respect to ``wrt``: the nodes before this one that depend on ``wrt``
    replayed under jax.vjp (the others, and those not yet run, are run as constants of it). The slots
    ``cut`` (values an earlier backward freed) are constants too: no gradient flows through them."""
    heads, head_grads, wrt, create_graph, cut = node.params
    fixed = set(wrt)
    stopped = set(cut) - fixed

    def prefix(wrt_values):
        local = list(env)
        for slot, value in zip(wrt, wrt_values):
            local[slot] = value  # inputs of the tape; node outputs are replaced when produced
        active = set(wrt)
        for i in range(index):
            n = nodes[i]
            if n.kind == "grad":  # its gradients are constants unless create_graph
                dependent = n.params.create_graph and not active.isdisjoint(n.inputs + tuple(n.params.wrt))
            else:
                dependent = not active.isdisjoint(n.inputs)
            if not dependent and all(local[s] is not None for s in n.outputs):
                continue  # computed already and independent of wrt
            for slot, value in zip(n.outputs, _run_node(nodes, i, n, local)):
                if slot in fixed:
                    continue
                if slot in stopped:
                    local[slot] = jax.lax.stop_gradient(value) if env[slot] is None else env[slot]
                    continue
                local[slot] = value
                if dependent:
                    active.add(slot)
        return [local[h] for h in heads], local

    outs, vjp_fn, local = jax.vjp(prefix, [env[s] for s in wrt], has_aux=True)
    # the primal values computed under vjp serve the rest of the program (values computed before stay)
    env[:] = [value if value is not None else new for value, new in zip(env, local)]
    cts = [jax.numpy.ones(o.shape, o.dtype) if g is None else env[g] for o, g in zip(outs, head_grads)]
    (grads,) = vjp_fn(cts)
    if not create_graph:
        grads = [jax.lax.stop_gradient(g) for g in grads]
    return grads


@functools.lru_cache(maxsize=64)
def kept_positions(n: int, donate: tuple[int, ...]) -> tuple[int, ...]:
    """The positions among ``n`` inputs that are not in ``donate``."""
    chosen = set(donate)
    return tuple(i for i in range(n) if i not in chosen)


def compile_program(nodes: list[Node], n_slots: int, input_slots: list[int], requested: list[int],
                    donate: tuple[int, ...]) -> Program:
    """The program computing the slots ``requested`` from the tape inputs ``input_slots`` (those at the
    positions ``donate`` given first, and donated), each slot once."""
    outputs = list(dict.fromkeys(requested))
    picks = None  # each slot requested once: the results as they come
    if len(outputs) < len(requested):
        where = {slot: i for i, slot in enumerate(outputs)}
        picks = tuple(where[s] for s in requested)
    chosen = set(donate)
    donated_slots = [input_slots[i] for i in donate]
    kept_slots = [s for i, s in enumerate(input_slots) if i not in chosen]

    # A gradient node differentiating tape inputs replays the nodes before it under jax.vjp and
    # keeps their values: running them first as well would only trace them twice.
    start = next((i for i, n in enumerate(nodes) if n.kind == "grad"), 0)
    if start and not set(input_slots).issuperset(nodes[start].params.wrt):
        start = 0

    def run(given, kept):
        env = [None] * n_slots
        for slot, value in zip(donated_slots, given):
            env[slot] = value
        for slot, value in zip(kept_slots, kept):
            env[slot] = value
        evaluate(nodes, env, start=start)
        return [env[s] for s in outputs]

    donate_argnums = (0,) if donate else ()
    Stats.compiles += 1
    return Program(jax.jit(run, compiler_options=compiler_options(), donate_argnums=donate_argnums), picks, [],
                   jax.jit(run, donate_argnums=donate_argnums))
