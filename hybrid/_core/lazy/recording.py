"""What a tape records: its nodes, the parameters read, the graphs freed, and the dependencies between slots."""
from __future__ import annotations

import operator
from typing import Any, NamedTuple, Sequence

from jax._src import ad_util, core

from .slots import SlotRegistry

_STOP_GRADIENT = ad_util.stop_gradient_p


class GradSpec(NamedTuple):
    """What a gradient node computes: the gradients of ``sum(heads * head_grads)`` with respect to the
    slots ``wrt``; the slots ``cut`` (freed by an earlier backward) are constants of it."""

    heads: list
    head_grads: list
    wrt: list
    create_graph: bool
    cut: tuple


class ParamRead(NamedTuple):
    """Parameters read together (a compiled forward's): their consecutive input ``slots``, and ``avals``,
    the reader's fixed list of their shapes and dtypes (the same object at every step)."""

    params: Sequence
    slots: range
    avals: list


class RegionSpec(NamedTuple):
    """A custom_jvp/custom_vjp call: its primal recorded as ``inner`` nodes from ``in_slots`` to
    ``out_slots``, replayed under the primitive with its ``rules`` and ``bind`` parameters."""

    inner: list
    in_slots: list
    out_slots: list
    rules: tuple
    bind: dict
    debug_info: Any


class Node:
    """One staged operation on the slots ``inputs``, writing the slots ``outputs``.

    ``kind`` says what ``op`` and ``params`` are: ``"prim"`` (a JAX primitive and its bind parameters),
    ``"call"`` (a function of arrays returning a list; params None), ``"grad"`` (op None, a
    :class:`GradSpec`) or ``"region"`` (the custom derivative primitive, a :class:`RegionSpec`)."""

    __slots__ = ("kind", "op", "params", "inputs", "outputs")

    def __init__(self, kind: str, op: Any, params: Any, inputs: tuple, outputs: tuple):
        self.kind, self.op, self.params, self.inputs, self.outputs = kind, op, params, inputs, outputs


_ABSTRACT: dict = {}  # (primitive, params key, input avals) -> (output avals, has effects)


def params_key(params: dict) -> Any:
    """A primitive's parameters as a hashable key, or None when one of them is unhashable."""
    try:
        key = tuple(params.items())
        hash(key)
        return key
    except TypeError:
        return None


def out_avals(prim: core.Primitive, avals: tuple, params: dict, pkey: Any) -> tuple[list, bool]:
    """The output avals of ``prim`` on ``avals`` (cached per key) and whether it has effects."""
    key = (prim, pkey, avals) if pkey is not None else None
    hit = _ABSTRACT.get(key) if key is not None else None
    if hit is None:
        out, effects = prim.abstract_eval(*avals, **params)
        hit = (list(out) if prim.multiple_results else [out], bool(effects))
        if key is not None:
            if len(_ABSTRACT) > 4096:
                _ABSTRACT.clear()
            _ABSTRACT[key] = hit
    return hit


class Recording:
    """The nodes of a tape and what is known about them.

    Attributes:
        nodes: the staged operations, in order.
        param_slots: Parameter -> slot of the value read while recording (what ``backward`` differentiates).
        first_read: the first read of many parameters (a :class:`ParamRead`) while no other parameter is
            read, kept as it is, so that the usual step (one such read) builds no dict (:meth:`reads`,
            :meth:`slots_if_read`; ``param_slots`` adds it to the dict).
        tokens: what the recorded functions depend on (see ``programs.forget_token``).
        cacheable: False once an operation has unhashable parameters (its program is not cached).
        freed_heads: heads of each backward()/grad() that freed its graph, in order.
    """

    __slots__ = ("slots", "nodes", "_param_slots", "first_read", "tokens", "cacheable", "freed_heads", "_freed",
                 "_freed_upto")

    def __init__(self, slots: SlotRegistry):
        self.slots = slots
        self.nodes: list[Node] = []
        self._param_slots: dict[Any, int] = {}
        self.first_read: ParamRead | None = None
        self.tokens: set[int] = set()
        self.cacheable = True
        self.freed_heads: list[list[int]] = []
        # the node outputs freed (found from freed_heads on first need: the common step differentiates once)
        self._freed: set[int] = set()
        self._freed_upto = 0

    def add(self, kind: str, op: Any, params: Any, in_slots: Sequence[int], out_avals: Sequence,
            op_key: Any) -> tuple[int, ...]:
        """Stage one node; returns its output slots."""
        slots = self.slots
        outputs = slots.outputs(out_avals)
        in_slots = tuple(in_slots)
        self.nodes.append(Node(kind, op, params, in_slots, outputs))
        slots.key.append((op_key, in_slots))
        return outputs

    def add_region(self, start: int, key_start: int) -> tuple[list, tuple]:
        """Take the nodes and key parts recorded since ``start``/``key_start`` out of the recording
        (the inner nodes of a region), returning them."""
        inner = self.nodes[start:]
        inner_key = tuple(self.slots.key[key_start:])
        del self.nodes[start:], self.slots.key[key_start:]
        return inner, inner_key

    # parameters ------------------------------------------------------------------------
    @property
    def param_slots(self) -> dict[Any, int]:
        """Parameter -> slot of its value read on this tape, in read order (the first read of each counts)."""
        if self.first_read is not None:
            params, slots, _ = self.first_read
            self.first_read = None
            self._param_slots.update(zip(params, slots))  # it came first: the dict was empty
        return self._param_slots

    def reads(self) -> tuple[Sequence, Sequence[int], list | None]:
        """The parameters read on this tape, their slots in read order, and their avals when one read of
        many has them all (else None)."""
        if self.first_read is not None:
            return self.first_read
        known = self._param_slots
        return list(known), list(known.values()), None

    def slots_if_read(self, params: Sequence, values: Sequence) -> list[int] | None:
        """The slots at which ``params`` were read, when the arrays read are still ``values``, else None."""
        first = self.first_read
        slots: Sequence[int]
        if first is not None and len(first.params) == len(params) and all(map(operator.is_, first.params, params)):
            slots = first.slots
            at = self.slots.input_position[slots[0]]  # the slots of one read are consecutive inputs
            held = self.slots.input_values[at:at + len(slots)]
        else:
            known = self.param_slots
            try:
                slots = [known[p] for p in params]
            except KeyError:
                return None
            held = self.slots.values_of(slots)
        return list(slots) if all(map(operator.is_, held, values)) else None

    def read_param(self, param: Any, slot: int) -> None:
        """Note that ``slot`` holds the value of ``param`` read on this tape (the first read counts)."""
        if param not in self.param_slots:
            self.param_slots[param] = slot

    def read_params(self, params: Sequence, values: Sequence, avals: list | None, tape: Any) -> Sequence[int]:
        """:meth:`read_param` for many parameters; returns the slots of ``values``. ``avals`` (their
        known shapes and dtypes) leaves them out of the key: the caller's node key implies them."""
        if not params:
            return []
        slots = self.slots
        if avals is not None:
            first = self.first_read is None and not self._param_slots  # the usual step reads once
            if first or self.param_slots.keys().isdisjoint(params):
                new = slots.inputs(values, avals)
                if new is not None:
                    if first:
                        self.first_read = ParamRead(params, new, avals)
                    else:
                        self.param_slots.update(zip(params, new))
                    return new
        known = self.param_slots
        found = slots.slots_of(values, avals is None, tape)
        setdefault = known.setdefault
        for param, slot in zip(params, found):
            setdefault(param, slot)
        if avals is not None:
            avals_list = slots.avals
            for slot, aval in zip(found, avals):
                if avals_list[slot] is None:
                    avals_list[slot] = aval
        return found

    # dependencies and freed graphs -------------------------------------------------------
    def depends_on(self, heads: Sequence[int], stop: set[int] | None = None, differentiable: bool = False) -> set[int]:
        """The slots (inputs and node outputs) that the slots ``heads`` are computed from, not looking
        past the slots in ``stop`` (constants: their own inputs are not included), nor past a
        ``stop_gradient`` when only the ``differentiable`` path counts."""
        needed = set(heads)
        if stop is not None or differentiable:
            stop = stop or set()
            for node in reversed(self.nodes):
                if differentiable and node.kind == "prim" and node.op is _STOP_GRADIENT:
                    continue
                if not needed.isdisjoint(node.outputs) and not stop.issuperset(needed.intersection(node.outputs)):
                    needed.update(node.inputs)
                    if node.kind == "grad":
                        needed.update(node.params.wrt)
            return needed
        for node in reversed(self.nodes):
            if needed.intersection(node.outputs):
                needed.update(node.inputs)
                if node.kind == "grad":
                    needed.update(node.params.wrt)
        return needed

    def free(self, head_slots: Sequence[int]) -> None:
        """Free the graph of the values ``head_slots`` (a backward without ``retain_graph``): they cannot be
        differentiated again, and the values computed on the way become constants for later gradients,
        as in MXNet. Values reached only through a ``stop_gradient`` (``detach()``) keep their graph. Tape
        inputs (parameters, arrays from outside) stay differentiable."""
        self.freed_heads.append(list(head_slots))

    def freed(self) -> set[int]:
        """The node outputs freed so far (see :meth:`free`)."""
        pending = self.freed_heads[self._freed_upto:]
        if pending:
            position = self.slots.input_position
            for heads in pending:
                reached = self.depends_on(heads, stop=self._freed, differentiable=True)
                self._freed.update(s for s in reached if position[s] is None)
            self._freed_upto = len(self.freed_heads)
        return self._freed

