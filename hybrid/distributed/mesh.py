"""Device meshes: the ``devices=`` argument of ``Trainer`` turned into a ``jax.sharding.Mesh``."""
from __future__ import annotations

import math
from typing import Any, Sequence

import jax
import numpy as np
from jax.sharding import Mesh

__all__ = ["DATA_AXIS", "MODEL_AXIS", "make_mesh"]

DATA_AXIS = "data"    # the batch is split over this mesh axis
MODEL_AXIS = "model"  # sharding rules usually split large weights over this one

_DEFAULT_NAMES = {1: (DATA_AXIS,), 2: (DATA_AXIS, MODEL_AXIS)}


def _device_list(devices: Any) -> list:
    available = jax.devices()
    if devices is None:
        return list(available)
    if isinstance(devices, (int, np.integer)) and not isinstance(devices, bool):
        if devices < 1:
            raise ValueError(f"make_mesh: the number of devices must be positive, got {devices}")
        if devices > len(available):
            hint = (f"; on CPU, start Python with XLA_FLAGS=--xla_force_host_platform_device_count={devices} "
                    "(set before jax is imported) to simulate more devices") if available[0].platform == "cpu" else ""
            raise ValueError(f"make_mesh: asked for {devices} devices, but only {len(available)} are available "
                             f"({available[0].platform}){hint}")
        return list(available[:devices])
    if isinstance(devices, jax.Device):
        return [devices]
    if isinstance(devices, (list, tuple)) and devices and all(isinstance(d, jax.Device) for d in devices):
        if len(set(devices)) != len(devices):
            raise ValueError(f"make_mesh: the device list names a device twice: {list(devices)}")
        return list(devices)
    raise TypeError(f"make_mesh: devices must be None (all devices), a device count, a non-empty list of "
                    f"jax.Device or a jax.sharding.Mesh, got {devices!r}")


def make_mesh(devices: Any = None, shape: Sequence[int] | None = None,
              axis_names: Sequence[str] | None = None) -> Mesh:
    """A mesh over ``devices``, by default 1-D with the axis ``'data'``.

    Args:
        devices: None (every device of every process, ``jax.devices()``), an int ``n``
            (the first ``n`` devices), a list of ``jax.Device``, or a ``Mesh`` (returned
            unchanged when ``shape`` and ``axis_names`` are not given).
        shape: the mesh shape, e.g. ``(2, 2)``; its product must equal the number of
            devices. Default: ``(number of devices,)``.
        axis_names: one name per mesh dimension. Default ``('data',)`` for 1-D and
            ``('data', 'model')`` for 2-D meshes; required for more dimensions.
    Raises ValueError for too few devices, a shape that does not match them or bad axis
    names, TypeError for a ``devices`` value of another kind.
    """
    if isinstance(devices, Mesh):
        if shape is None and axis_names is None:
            return devices
        devices = list(devices.devices.flat)
    chosen = _device_list(devices)
    shape = (len(chosen),) if shape is None else tuple(int(s) for s in shape)
    if any(s < 1 for s in shape) or math.prod(shape) != len(chosen):
        raise ValueError(f"make_mesh: a mesh of shape {shape} needs {math.prod(shape)} devices, got {len(chosen)}")
    if axis_names is None:
        if len(shape) not in _DEFAULT_NAMES:
            raise ValueError(f"make_mesh: give axis_names for a {len(shape)}-D mesh")
        axis_names = _DEFAULT_NAMES[len(shape)]
    axis_names = tuple(axis_names)
    if len(axis_names) != len(shape) or len(set(axis_names)) != len(axis_names) or \
            not all(isinstance(a, str) and a for a in axis_names):
        raise ValueError(f"make_mesh: axis_names must be {len(shape)} distinct non-empty strings for shape "
                         f"{shape}, got {axis_names}")
    return Mesh(np.array(chosen, dtype=object).reshape(shape), axis_names)
