"""``mxnet.context``: ``cpu()``, ``gpu(i)``, ``Context`` and ``current_context()`` over JAX's devices.

A :class:`Context` names a device the way MXNet does (``cpu(0)``, ``gpu(1)``); ``.jax_device`` is the
``jax.Device`` it stands for. hybrid's own APIs take ``jax.Device``; where they receive a Context they
use JAX's default device. ``with mx.gpu(0):`` makes that device JAX's default inside the block.
"""
from __future__ import annotations

import threading
from typing import Any

import jax

__all__ = ["Context", "cpu", "gpu", "cpu_pinned", "current_context", "num_gpus"]

_DEVICE_TYPES = {1: "cpu", 2: "gpu", 3: "cpu_pinned", 5: "cpu_shared"}
_TYPE_IDS = {name: key for key, name in _DEVICE_TYPES.items()}


class _Default(threading.local):
    context: "Context | None" = None


_default = _Default()


class Context:
    """A device named as MXNet names it: ``Context('gpu', 1)`` or ``Context(other_context)``.

    Raises ValueError for a device type other than cpu, gpu, cpu_pinned, cpu_shared.
    """

    def __init__(self, device_type: "str | Context", device_id: int = 0):
        if isinstance(device_type, Context):
            device_type, device_id = device_type.device_type, device_type.device_id
        if device_type not in _TYPE_IDS:
            raise ValueError(f"mx.Context: device_type must be one of {sorted(_TYPE_IDS)}, got {device_type!r}")
        self.device_type = device_type
        self.device_id = int(device_id)
        self._previous: list = []

    @property
    def device_typeid(self) -> int:
        return _TYPE_IDS[self.device_type]

    @property
    def jax_device(self) -> jax.Device:
        """The ``jax.Device`` this context names; RuntimeError when JAX has no such device."""
        platform = "gpu" if self.device_type == "gpu" else "cpu"
        try:
            devices = jax.devices(platform)
        except RuntimeError:
            devices = []
        if self.device_id >= len(devices):
            raise RuntimeError(f"{self}: JAX has {len(devices)} {platform} device(s) ({jax.devices()}); "
                               f"use one of them or mx.cpu()")
        return devices[self.device_id]

    def __eq__(self, other: Any) -> bool:
        return isinstance(other, Context) and (self.device_type, self.device_id) == (other.device_type,
                                                                                    other.device_id)

    def __hash__(self) -> int:
        return hash((self.device_type, self.device_id))

    def __repr__(self) -> str:
        return f"{self.device_type}({self.device_id})"

    __str__ = __repr__

    def __enter__(self) -> "Context":
        manager = jax.default_device(self.jax_device)
        manager.__enter__()
        self._previous.append((_default.context, manager))
        _default.context = self
        return self

    def __exit__(self, *exc: Any) -> None:
        _default.context, manager = self._previous.pop()
        manager.__exit__(*exc)

    def empty_cache(self) -> None:
        """Nothing to release: XLA manages device memory."""


def cpu(device_id: int = 0) -> Context:
    """The CPU context (``cpu(0)``)."""
    return Context("cpu", device_id)


def cpu_pinned(device_id: int = 0) -> Context:
    """MXNet's pinned host memory; a CPU context here."""
    return Context("cpu_pinned", device_id)


def gpu(device_id: int = 0) -> Context:
    """The ``device_id``-th GPU; ``.jax_device`` raises RuntimeError when JAX has no such GPU."""
    return Context("gpu", device_id)


def num_gpus() -> int:
    """How many GPUs JAX sees."""
    try:
        return len(jax.devices("gpu"))
    except RuntimeError:
        return 0


def current_context() -> Context:
    """The context of the innermost ``with ctx:`` block, else the context of JAX's default device."""
    if _default.context is not None:
        return _default.context
    device = jax.devices()[0]
    return Context("gpu" if device.platform in ("gpu", "cuda", "rocm") else "cpu", 0)


def to_device(ctx: Any) -> Any:
    """A Context (or list of them) as ``jax.Device`` (list); anything else unchanged."""
    if isinstance(ctx, Context):
        return ctx.jax_device
    if isinstance(ctx, (list, tuple)) and ctx and all(isinstance(c, Context) for c in ctx):
        return [c.jax_device for c in ctx]
    return ctx
