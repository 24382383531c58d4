"""Multi-host start-up: one process per host (or per device group), joined by ``jax.distributed``."""
from __future__ import annotations

import os

import jax

__all__ = ["initialize", "shutdown", "is_main_process"]


def initialize(coordinator_address: str | None = None, num_processes: int | None = None,
               process_id: int | None = None, local_device_ids: list[int] | None = None,
               timeout: int = 300) -> None:
    """Join this process to the others with ``jax.distributed.initialize``.

    Call it first, before anything creates JAX arrays (including building networks).
    Arguments left None are read from ``HYBRID_COORDINATOR`` (``host:port`` of process 0),
    ``HYBRID_NUM_PROCESSES`` and ``HYBRID_PROCESS_ID``, else left to JAX's own cluster
    detection (Slurm, Open MPI, Cloud TPU). On CPU, cross-process collectives use gloo.
    Afterwards ``jax.devices()`` lists every process's devices, so ``make_mesh()`` (and
    ``Trainer(..., mesh=make_mesh())``) spans them all.
    Raises RuntimeError (from JAX) when the coordinator cannot be reached in ``timeout`` s.
    """
    env = os.environ
    coordinator_address = coordinator_address or env.get("HYBRID_COORDINATOR")
    if num_processes is None and "HYBRID_NUM_PROCESSES" in env:
        num_processes = int(env["HYBRID_NUM_PROCESSES"])
    if process_id is None and "HYBRID_PROCESS_ID" in env:
        process_id = int(env["HYBRID_PROCESS_ID"])
    jax.config.update("jax_cpu_collectives_implementation", "gloo")  # CPU devices talk over gloo (TCP)
    jax.distributed.initialize(coordinator_address, num_processes, process_id, local_device_ids,
                               initialization_timeout=timeout)


def shutdown() -> None:
    """Leave the cluster (waits for the other processes); safe to call when not initialised."""
    jax.distributed.shutdown()


def is_main_process() -> bool:
    """True in process 0: let it alone write checkpoints and logs."""
    return jax.process_index() == 0
