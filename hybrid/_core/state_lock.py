"""The one lock that keeps parameter state consistent when several threads use the same blocks.

A program may reuse (donate) the buffers of the parameter and optimizer-state arrays it replaces
when nothing else holds them. Whoever reads those arrays to hold them (``Parameter.data()``, a
recording noting its inputs, a trainer staging its update) and whoever checks who holds them, runs
the program and writes the results back, does so under :data:`state_lock`. So a reader either holds
its array before the check (and the buffer is not reused) or reads the new array after the write.
"""
from __future__ import annotations

import threading

__all__ = ["state_lock"]

state_lock = threading.RLock()
