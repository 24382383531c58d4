"""Optimizer states staged as a group: a few packed buffers per step instead of one input and one output per array.

A step returns the new states packed (:class:`~.effects.PackLayout`: small arrays in one flat buffer per
dtype, large ones as they are) and hands the trainer references to the members (LazyArrays that split
the buffers if anyone reads them). When the next step gets exactly those members back, the buffers are
its inputs, unpacked inside the program and donated to the new buffers. Dispatching an array costs
about 1 us per donated input and output (mlp33: 68 momenta, 136 arrays a step), which is what this saves.
"""
from __future__ import annotations

import sys
from typing import Any, Callable, Sequence

from jax._src import core

from .effects import Pack, PackLayout, intact_pack, pack_layout
from .trace import LazyArray

REPLACED = ("this optimizer state was replaced by a later step, which reused its buffer; read the trainer's "
            "current states instead")

# References to each member of the previous step's states while a step is staged: the list of states, the
# trainer's tuple of the parameter's states, and getrefcount's argument. More: someone else holds it.
_MEMBER_HOLDERS = 3


class StateGroup:
    """The states of one update, staged as the buffers of ``layout``.

    ``buffers`` are the previous step's packed outputs (``previous`` is their pack) or the states packed on
    the host (the first step, or after the states were read or replaced); ``reuse`` says whether the
    buffers may be donated (no member of ``previous`` is held outside the trainer)."""

    __slots__ = ("layout", "buffers", "previous", "reuse", "member_avals", "input_slots")

    def __init__(self, layout: PackLayout, buffers: list, previous: Pack | None, reuse: bool, member_avals: list):
        self.layout, self.buffers, self.previous, self.reuse = layout, buffers, previous, reuse
        self.member_avals = member_avals
        self.input_slots: list[int] = []

    @classmethod
    def of(cls, states: Sequence) -> "StateGroup | None":
        """The group of ``states`` (a flat list of state arrays), or None to stage them one by one: fewer than
        two, nothing small enough to pack, or arrays that cannot be packed (sharded over several devices)."""
        if len(states) < 2:
            return None
        previous = intact_pack(states)
        if previous is not None:
            reuse = max(map(sys.getrefcount, states)) <= _MEMBER_HOLDERS
            return cls(previous.layout, previous.buffers, previous, reuse, previous.avals)
        avals = [core.ShapedArray(s.shape, s.dtype) for s in states]
        layout = pack_layout(avals)
        if not layout.groups:
            return None
        # members of a group read since (their values split out) are packed again from those values
        buffers = layout.host_pack([s._value if type(s) is LazyArray and s._value is not None else s for s in states])
        return None if buffers is None else cls(layout, buffers, None, True, avals)

    def stage_inputs(self, tape: Any) -> list[int]:
        """Add the buffers as inputs of ``tape`` and unpack them there; returns the states' slots."""
        layout = self.layout
        self.input_slots = list(tape.slots.inputs(self.buffers, layout.buffer_avals, findable=False))
        if self.previous is None:
            # the tape holds them now: buffers packed on the host then have no other holder, and the large
            # states passed as they are only their parameters' tuple of states, as in the step that follows
            self.buffers = None
        return tape.add("call", layout.unpacked, None, self.input_slots, self.member_avals,
                        ("call", "unpack", layout), slots_only=True)

    def stage_outputs(self, tape: Any, results: Sequence[int], n_weights: int,
                      store: Callable[[list], None]) -> tuple[list[int], Callable[[list], None], list[int]]:
        """Pack the new states among the update's ``results`` (after ``n_weights`` weights). Returns the slots
        to write (the weights, the new buffers, the rest), the setter handing ``store`` the weights, the
        new states' members and the rest, and the input slots replaced by the new buffers (donated)."""
        layout, avals = self.layout, self.member_avals
        n_states, n_buffers = len(avals), len(layout.buffer_avals)
        state_slots = list(results[n_weights:n_weights + n_states])
        buffers = tape.add("call", layout.pack, None, state_slots, layout.buffer_avals, ("call", "pack", layout),
                           slots_only=True)
        previous = self.previous if self.reuse else None
        end = n_weights + n_buffers

        def setter(values: list) -> None:
            pack = Pack(layout, None, tape, state_slots, avals)
            pack.fill(values[n_weights:end])
            if previous is not None:
                previous.buffers, previous.dropped = None, REPLACED
            store(values[:n_weights] + [pack.member(i) for i in range(n_states)] + values[end:])

        written = list(results[:n_weights]) + list(buffers) + list(results[n_weights + n_states:])
        return written, setter, (self.input_slots if self.reuse else [])
