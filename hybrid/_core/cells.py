"""Names of the pieces of state a step reads and writes.

A :class:`Cell` names one piece of mutable state: its ``kind`` (one of the constants below), the
object that holds it (``owner``) and, where the owner holds several, which one (``part``). The
recorder's pending writes and the cells of a ``hybrid.compile`` step use the same keys; two cells
are the same state when they compare equal.
"""
from __future__ import annotations

from typing import Any, NamedTuple

__all__ = ["Cell", "DATA", "GRAD", "OPTIMIZER_STATE", "LOSS_SCALER", "ATTRIBUTE", "PREPARED", "LR",
           "RNG_BASE", "RNG_COUNTER", "UPDATE", "PACK"]

DATA = "data"                          # a Parameter's array; owner: the Parameter
GRAD = "grad"                          # a Parameter's gradient; owner: the Parameter
OPTIMIZER_STATE = "optimizer_state"    # owner: the Parameter, part: the Trainer
LOSS_SCALER = "loss_scaler"            # owner: the hybrid.amp LossScaler
ATTRIBUTE = "attribute"                # owner: the Block, part: the attribute's name
PREPARED = "prepared"                  # parameter-only work of a graph; owner: its program, part: the Parameters
LR = "lr"                              # host input: a Trainer's learning rate; owner: the Trainer
RNG_BASE = "rng_base"                  # host input: the global stream's base key
RNG_COUNTER = "rng_counter"            # host input: the global stream's counter
UPDATE = "update"                      # the recorder: an optimizer update's results; owner: the Trainer
PACK = "pack"                          # the recorder: the values of a pack; owner: the pack


class Cell(NamedTuple):
    """One piece of state: ``kind`` of ``owner`` (``part`` when the owner holds several)."""

    kind: str
    owner: Any = None
    part: Any = None
