"""In-place reuse: an elementwise node may write its output over an input that dies there.

The rule: the node's fusion pattern is ``elementwise`` (one output, each output element
depends only on the same element of each input), the input and the output are both arena
intermediates of the same byte size, and the node is the input's last reader. The output
then takes the input's buffer, so the two form one buffer live from the input's definition to
the output's last use. Chains (``exp`` then ``tanh`` then ``neg`` ...) share one buffer.
"""
from __future__ import annotations

from typing import Sequence

from ..ir import Node, Value
from ..ops import OpPattern, pattern_of
from .liveness import Buffer, Liveness

__all__ = ["inplace_pairs", "merge_inplace"]


def inplace_pairs(schedule: Sequence[Node], live: Liveness) -> list[tuple[Value, Value]]:
    """``(input, output)`` pairs where ``output`` may be written into ``input``'s buffer."""
    arena = set(live.intermediates)
    pairs = []
    for step, node in enumerate(schedule):
        if len(node.outputs) != 1 or node.outputs[0] not in arena or pattern_of(node) is not OpPattern.ELEMENTWISE:
            continue
        out = node.outputs[0]
        for value in dict.fromkeys(node.inputs):
            if value in arena and live.intervals[value][1] == step and live.sizes[value] == live.sizes[out]:
                pairs.append((value, out))
                break
    return pairs


def merge_inplace(values: Sequence[Value], live: Liveness,
                  pairs: Sequence[tuple[Value, Value]] = ()) -> tuple[list[Buffer], dict[Value, int]]:
    """One buffer per value, except that each in-place output joins its input's buffer.

    ``values`` must be in order of definition. Returns the buffers and the buffer index of each value.
    """
    written_over = {out: value for value, out in pairs}
    buffer_of: dict[Value, int] = {}
    buffers: list[Buffer] = []
    for value in values:
        start, end = live.intervals[value]
        source = written_over.get(value)
        if source is None:
            buffer_of[value] = len(buffers)
            buffers.append(Buffer(live.sizes[value], start, end))
        else:
            k = buffer_of[value] = buffer_of[source]
            buffers[k] = buffers[k]._replace(end=max(buffers[k].end, end))
    return buffers, buffer_of
