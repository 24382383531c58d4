"""The tape: one recording, coordinating its slots, nodes, effects and program.

Slots number every value (:mod:`.slots`), nodes stage operations (:mod:`.recording`), writes and
donation say what a run stores and reuses (:mod:`.effects`), and :mod:`.programs` compiles and caches
the program that a run calls.
"""
from __future__ import annotations

import functools
import itertools
import logging
import weakref
from typing import Any, Callable, Sequence

from jax._src import core
from jax._src import linear_util as lu

from .. import memory_report
from ... import compile_log
from ..state_lock import state_lock
from ...errors import AutogradError
from . import programs
from .effects import Cell, Effects, Pack, PackRef, pack_layout, resolve
from .programs import ProgramKey, Stats
from .recording import GradSpec, Recording, RegionSpec, out_avals, params_key
from .slots import Group, SlotRegistry
from .trace import LazyArray, LazyTrace

log = logging.getLogger("hybrid.lazy")
# the level of the line logged per run of a recorded program: below DEBUG, so that a script logging at DEBUG
# (MXNet's examples call logging.basicConfig(level=logging.DEBUG)) gets no line per step
RUN_LEVEL = 5


def _identity(value: Any) -> list:
    return [value]


class Tape:
    """The staged computation of one recording: inputs, nodes, live values, pending writes.

    ``slots`` (a :class:`SlotRegistry`) numbers every value, ``recording`` holds the nodes and the
    parameters read, ``effects`` the pending writes; the tape adds the LazyArrays standing for its
    values and runs its program.
    """

    def __init__(self, parent_trace: Any):
        self.parent = parent_trace
        self.trace = LazyTrace(self)
        self.slots = slots = SlotRegistry()
        self.recording = recording = Recording(slots)
        self.effects = effects = Effects(slots)
        self.live: dict[int, Any] = {}  # slot -> weakref to the LazyArray standing for it
        self.released = False
        # the components' methods, bound once (these run per parameter or per operation)
        self.aval, self.avals_of, self.values_of = slots.aval, slots.avals_of, slots.values_of
        self.input, self.depends_on, self.free, self.freed = (slots.input, recording.depends_on, recording.free,
                                                              recording.freed)
        self.write_group, self.drop_packed = effects.write_group, effects.drop_packed

    # views of the components that other modules read ------------------------------------
    @property
    def param_slots(self) -> dict:
        return self.recording.param_slots

    @property
    def freed_heads(self) -> list:
        return self.recording.freed_heads

    @property
    def input_ids(self) -> dict:
        return self.slots.input_ids

    @property
    def input_values(self) -> list:
        return self.slots.input_values

    @property
    def nodes(self) -> list:
        return self.recording.nodes

    # recording ---------------------------------------------------------------------------
    def slots_of(self, values: Sequence, keyed: bool = True) -> list[int]:
        """The slot of each of ``values`` (LazyArrays of this tape have theirs; arrays become inputs)."""
        return self.slots.slots_of(values, keyed, self)

    def slot_of(self, value: Any, keyed: bool = True) -> int:
        if type(value) is LazyArray and value._tape is self:
            return value._slot
        return self.slots.input(value, keyed)

    def read_param(self, param: Any, value: Any) -> None:
        """Note that ``value`` stands for ``param`` on this tape (for ``backward``)."""
        if param not in self.recording.param_slots:
            self.recording.param_slots[param] = self.slot_of(value)

    def read_params(self, params: Sequence, values: Sequence, avals: list | None = None) -> Sequence[int]:
        """:meth:`read_param` for many parameters; returns the slots of ``values``. ``avals`` (their
        known shapes and dtypes) leaves them out of the key: the caller's node key implies them."""
        return self.recording.read_params(params, values, avals, self)

    def new_inputs(self, values: Sequence, avals: Sequence | None = None, findable: bool = True) -> range | None:
        """See :meth:`SlotRegistry.inputs`."""
        return self.slots.inputs(values, avals, findable)

    def recorded(self, value: Any) -> Any:
        """``value`` as a value of this tape: an input array is passed through an identity node."""
        if isinstance(value, LazyArray) and value._tape is self or id(value) not in self.slots.input_ids:
            return value
        slot = self.slots.input_ids[id(value)]
        return self.add("call", _identity, None, [slot], [self.aval(slot)], ("call", "identity"))[0]

    def packed(self, slots: Sequence[int], on_split: Callable[[Any, list], None] | None = None,
               avals: list | None = None) -> list[PackRef]:
        """References to the values of ``slots``, which the program computes packed (see
        :class:`~.effects.PackLayout`: small ones in one flat buffer per dtype, one output instead of one
        per array); :func:`~.effects.resolve` turns one into its value. The values are split together
        when one is first needed: then ``on_split(pack, values)`` runs. ``avals``: their shapes and
        dtypes as a fixed list (see :func:`~.effects.pack_layout`), when the caller has one."""
        member_avals = self.avals_of(slots) if avals is None else avals
        layout = pack_layout(member_avals, fixed=avals is not None)
        pack = Pack(layout, on_split, self, slots, member_avals)
        buffers = self.add("call", layout.pack, None, slots, layout.buffer_avals, ("call", "pack", layout),
                           slots_only=True)
        self.effects.write_group(Cell("pack", pack), buffers, pack.fill)
        # made by tuple.__new__ from zip: 2.6x faster than calling PackRef 68 times (timeit)
        n = len(slots)
        return list(map(tuple.__new__, itertools.repeat(PackRef, n), zip(itertools.repeat(pack, n), range(n))))

    def own_slots(self, values: Sequence) -> list[int] | None:
        """The slots of ``values`` when every one is a LazyArray recorded on this tape, or every one a
        reference to a member of one pack of this tape, else None (a cheap check for the common case: the
        gradients of this recording's backward)."""
        if not values:
            return []
        first = values[0]
        # plain loops: on 136 values, 2.3x faster than the set(map(...)) checks they replace (timeit)
        if type(first) is PackRef:
            pack = first.pack
            if pack.tape is not self:
                return None
            for value in values:
                if type(value) is not PackRef or value.pack is not pack:
                    return None
            members = pack.slots
            return [members[v.position] for v in values]
        for value in values:
            if type(value) is not LazyArray or value._tape is not self:
                return None
        return [v._slot for v in values]

    def lazy(self, slot: int) -> LazyArray:
        ref = self.live.get(slot)
        tracer = ref() if ref is not None else None
        if tracer is None:
            tracer = LazyArray(self, self.aval(slot), slot)
            self.live[slot] = weakref.ref(tracer)
        return tracer

    def _check_open(self) -> None:
        if self.released:
            raise AutogradError("this recording ended at the last trainer.step() (or backward() without "
                                "retain_graph=True); start a new `with autograd.record():` scope")

    def add(self, kind: str, op: Any, params: Any, in_slots: Sequence[int], out_avals: Sequence,
            op_key: Any, slots_only: bool = False) -> list:
        """Stage one node; returns a LazyArray per output (or the output slots)."""
        self._check_open()
        outputs = self.recording.add(kind, op, params, in_slots, out_avals, op_key)
        return list(outputs) if slots_only else [self.lazy(s) for s in outputs]

    def prim(self, prim: core.Primitive, args: Sequence, params: dict) -> Any:
        slots = self.slots.slots_of(args, True, self)
        aval = self.slots.aval
        avals = tuple([aval(s) for s in slots])
        pkey = params_key(params)
        if pkey is None:
            self.recording.cacheable = False
        outs = self.add("prim", prim, params, slots, out_avals(prim, avals, params, pkey)[0], (prim, pkey))
        return outs if prim.multiple_results else outs[0]

    def call(self, fn: Callable, key: Any, args: Sequence, out_avals: Sequence, token: int | None = None,
             slots_only: bool = False, keyed_inputs: bool = True, slots: Sequence[int] | None = None) -> list:
        """Stage ``fn(*args) -> list of arrays``, a pure function identified by the hashable ``key``.
        ``token`` names what the function depends on (see :func:`~.programs.forget_token`). Returns a
        LazyArray per result, or with ``slots_only`` their slots (for results only written).
        ``keyed_inputs=False`` when ``key`` determines the shapes and dtypes of ``args``; ``slots``
        when the caller has the slots of ``args`` already (``args`` is not read then)."""
        if token is not None:
            self.recording.tokens.add(token)
        if slots is None:
            slots = self.slots.slots_of(args, keyed_inputs, self)
        return self.add("call", fn, None, slots, out_avals, ("call", key), slots_only)

    def region(self, prim: core.Primitive, fun: lu.WrappedFun, tracers: Sequence, rules: tuple, bind: dict,
               rule_key: Any) -> list[LazyArray]:
        """Stage a custom_jvp/custom_vjp call: its primal function is recorded as a sub-tape that is
        replayed under ``prim`` with the original rules, so that its derivative rules hold."""
        in_slots = [self.slot_of(t) for t in tracers]
        node_start, key_start = len(self.recording.nodes), len(self.slots.key)
        with core.set_current_trace(self.trace):
            outs = fun.call_wrapped(*tracers)
        out_slots = [self.slot_of(o) for o in outs]
        inner, inner_key = self.recording.add_region(node_start, key_start)
        spec = RegionSpec(inner, in_slots, out_slots, rules, bind, fun.debug_info)
        return self.add("region", prim, spec, in_slots, [self.aval(s) for s in out_slots],
                        ("region", prim, rule_key, inner_key, tuple(out_slots)))

    def grad(self, heads: Sequence, head_grads: Sequence, wrt_slots: Sequence[int], create_graph: bool,
             slots_only: bool = False, avals: list | None = None) -> list:
        """Stage the gradients of ``sum(head * head_grad)`` with respect to the values in ``wrt_slots``
        (whose ``avals`` the caller may know). Values freed by an earlier differentiation (:meth:`free`)
        are constants of it."""
        head_slots = [self.slot_of(h) for h in heads]
        grad_slots = [None if g is None else self.slot_of(g) for g in head_grads]
        wrt_slots = list(wrt_slots)
        cut = tuple(sorted(self.freed())) if self.recording.freed_heads else ()
        ins = [s for s in head_slots + grad_slots if s is not None]
        spec = GradSpec(head_slots, grad_slots, wrt_slots, create_graph, cut)
        return self.add("grad", None, spec, ins, self.avals_of(wrt_slots) if avals is None else avals,
                        ("grad", tuple(head_slots), tuple(grad_slots), tuple(wrt_slots), create_graph, cut),
                        slots_only)

    def write(self, cell: Any, value: Any, setter: Callable[[Any], None], replaces: Any = None) -> None:
        """Call ``setter(value's data)`` at the next materialisation. ``replaces`` is the array the
        cell held; at the step boundary its buffer is reused when nothing else holds it."""
        self.effects.write_group(cell, [self.slot_of(value)], lambda values: setter(values[0]),
                                 () if replaces is None else (replaces,))

    # updates -------------------------------------------------------------------------------
    def stage_update(self, owner: Any, update: Callable, key: Any, weights: list, grads: list, states: list,
                     extras: list, out_avals: list, store: Callable[[list], None], params: Sequence = (),
                     drop_grads: Sequence = (), drop_reason: str = "") -> None:
        """Stage an optimizer update, then run the step as one program: the recording ends.

        ``update(*weights, *grads, *states, *extras) -> new weights + new states + rest`` is a pure
        function fixed by the hashable ``key``; its results have ``out_avals`` (weights and states
        first). ``store(results)`` takes them when the program has run. The weights are the values
        read as ``params`` on this tape when they still are (else inputs); ``grads`` are values of this
        tape, references to its packed values, or arrays. ``weights`` and ``states`` are emptied once
        staged: the old arrays are then held by their owners only (one holder each, which ``store``
        replaces), and their buffers are donated to the results. The states are staged as one group
        slot (see :meth:`~.slots.SlotRegistry.group`). The packs of the values among
        ``drop_grads`` are not computed (reading one later raises AutogradError(``drop_reason``)).
        """
        slots = self.slots
        # the slots of the weights as recorded, when the recorded arrays are still the parameters' data
        weight_slots = self.recording.slots_if_read(params, weights) if len(params) == len(weights) else None
        if weight_slots is None:
            weight_slots = slots.slots_of(weights, False, self)
        grad_slots = self.own_slots(grads)
        if grad_slots is None:  # gradients recorded on another tape (several record() scopes) enter as inputs
            grad_slots = slots.slots_of([resolve(g) for g in grads], True, self)
        n, m = len(weights), len(states)
        state_slots = []
        if m:  # the states are one input and one output, a list: their Python scales with one slot, not m
            state_slots = [slots.group(states, out_avals[n:n + m])]
            update = _GroupedStates(update, n, len(grad_slots), m)
            out_avals = out_avals[:n] + [Group(tuple(out_avals[n:n + m]))] + out_avals[n + m:]
            store = functools.partial(_store_ungrouped, store, n)
        in_slots = weight_slots + grad_slots + state_slots + slots.slots_of(extras, True, self)
        results = self.add("call", update, None, in_slots, out_avals, ("call", "update", key), slots_only=True)
        self.effects.write_group(Cell("update", owner), results, store, holders=1,
                                 replaced_slots=weight_slots + state_slots)
        if drop_grads:
            self.effects.drop_packed(drop_grads, drop_reason)
        weights.clear()
        states.clear()
        self.materialize(final=True)

    # running -------------------------------------------------------------------------------
    def materialize(self, final: bool = False) -> None:
        """Compute every value still needed (live LazyArrays, pending writes) in one program.

        ``final`` ends the recording (the step boundary): inputs whose cells are overwritten
        and that nothing else holds are donated, and no node can be added afterwards."""
        with state_lock:  # the donation check, the run and the writes happen together
            self._materialize(final)

    def _materialize(self, final: bool) -> None:
        if self.released:
            return
        pending = [(s, t) for s, ref in self.live.items() if (t := ref()) is not None and t._value is None]
        writes, replaced = self.effects.writes, self.effects.replaced
        write_cells = list(writes)
        if not (pending or write_cells):
            if final:
                self.release()
            return
        if replaced and len(write_cells) > 1:  # the writes that replace inputs first (see below)
            write_cells.sort(key=lambda cell: cell not in replaced)
        write_slots = [s for cell in write_cells for s in writes[cell].slots]
        donate, first = (self.effects.donation(write_cells)
                         if final and replaced and self.parent is core.eval_trace else ((), []))
        pending_slots = [s for s, _ in pending]
        # The replacement of every donated input comes first among the outputs, in the same order, so that
        # XLA gives it the donated buffer. When the writes begin with those replacements (the step's update,
        # every old array donated), they come first as they are; otherwise the replacements are requested
        # once more in front (the program returns each slot once, and its results are spread again).
        if write_slots[:len(first)] == first:
            self._run(write_slots + pending_slots, write_cells, donate, pending, len(write_slots), 0)
        else:
            self._run(first + pending_slots + write_slots, write_cells, donate, pending, len(first),
                      len(first) + len(pending))
        if final:
            self.release()

    def release(self) -> None:
        """Drop the recording; values already computed stay with their LazyArrays."""
        self.released = True
        self.recording.nodes, self.live = [], {}
        self.slots.release()

    def _run(self, requested: list, write_cells: list, donate: tuple, pending: list, pending_at: int,
             writes_at: int) -> None:
        """Run the program computing the slots ``requested``, donating the inputs at positions ``donate``;
        give the ``pending`` (slot, LazyArray) pairs their values, requested from ``pending_at`` on, and
        apply the writes of ``write_cells``, whose slots are requested from ``writes_at`` on."""
        slots, recording = self.slots, self.recording
        key = ProgramKey(tuple(slots.key), tuple(requested), donate)
        cacheable = recording.cacheable
        entry = programs.lookup(key) if cacheable else None
        new = False
        if entry is None:
            new = True
            entry = programs.compile_program(list(recording.nodes), len(slots.avals), slots.input_slots,
                                             requested, donate)
            log.debug("compiling a recorded program: %d inputs, %d nodes, %d outputs, %d donated%s",
                      len(slots.input_slots), len(recording.nodes), len(set(requested)), len(donate),
                      "" if cacheable else " (not cached: an operation has unhashable parameters)")
            if cacheable:
                programs.store(key, entry, recording.tokens)
        top_level = type(self.parent) is core.EvalTrace  # else part of a program being traced (hybrid.compile)
        program = entry.run if top_level else entry.nested
        Stats.flushes += 1
        if log.isEnabledFor(RUN_LEVEL):
            log.log(RUN_LEVEL, "running a recorded program: %d nodes, %d values computed, %d writes, %d buffers "
                    "reused", len(recording.nodes), len(set(requested)), len(write_cells), len(donate))
        values = slots.input_values
        if donate:
            given = [values[i] for i in donate]
            kept = [values[i] for i in programs.kept_positions(len(values), donate)]
        else:
            given, kept = [], values
        memory = entry.memory
        if memory and top_level:
            memory[0].note_run()
        elif top_level:
            memory_report.track("recorded step", program, (given, kept), memory)
        with core.set_current_trace(self.parent):
            if new:
                with compile_log.timed(f"compiled a recorded step program ({len(recording.nodes)} operations)",
                                       f"{len(values)} input arrays"):
                    results = program(given, kept)
            else:
                results = program(given, kept)
        del given
        if entry.picks is not None:  # one result per requested slot
            results = [results[i] for i in entry.picks]
        for (_, tracer), value in zip(pending, results[pending_at:]):
            tracer._value = value
        at = writes_at
        writes = self.effects.take()
        for cell in write_cells:
            write = writes[cell]
            n = len(write.slots)
            write.setter(results[at:at + n])
            at += n


def _store_ungrouped(store: Callable[[list], None], n: int, values: list) -> None:
    """``store`` the results of a :class:`_GroupedStates` update with its new states' list spread out."""
    store(values[:n] + values[n] + values[n + 1:])


class _GroupedStates:
    """An update ``fn(*weights, *grads, *states, *extras) -> new weights + new states + rest`` called with
    the states as one list and returning the new states as one list (one slot each on the tape)."""

    __slots__ = ("fn", "n", "n_grads", "m")

    def __init__(self, fn: Callable, n: int, n_grads: int, m: int):
        self.fn, self.n, self.n_grads, self.m = fn, n, n_grads, m

    def __call__(self, *args: Any) -> list:
        at, n, m = self.n + self.n_grads, self.n, self.m
        results = list(self.fn(*args[:at], *args[at], *args[at + 1:]))
        return results[:n] + [results[n:n + m]] + results[n + m:]


def open_tape(values: Sequence) -> Tape | None:
    """The recording that the first of ``values`` recorded on one still open (a LazyArray or a reference to a
    packed value) belongs to, else None."""
    for value in values:
        if type(value) is PackRef:
            tape = value.pack.tape
        elif type(value) is LazyArray:
            tape = value._tape
        else:
            continue
        if not tape.released:
            return tape
    return None
