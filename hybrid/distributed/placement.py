"""Placing parameters (replicated, or split by sharding rules) and batches (split over ``'data'``) on a mesh."""
from __future__ import annotations

import math
import re
from typing import Any, Sequence

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from .._core import functional as _functional, lazy as _lazy
from ..parameter import Parameter
from .mesh import DATA_AXIS

__all__ = ["ShardingRules", "Placement", "parameter_sharding", "place_parameters", "shard_batch"]


def _spec_axes(entry: Any) -> tuple[str, ...]:
    if entry is None:
        return ()
    return tuple(entry) if isinstance(entry, (tuple, list)) else (entry,)


class ShardingRules:
    """Which parameters are split over which mesh axes.

    Args:
        rules: ``(pattern, spec)`` pairs (or a dict of them), tried in order. ``pattern``
            is a regular expression searched (``re.search``) in the parameter's structural
            name (``'features.0.weight'``); ``spec`` is a ``PartitionSpec`` (or a tuple of
            mesh axis names / None), one entry per leading parameter dimension.
    The first matching rule gives the spec; a parameter no rule matches is replicated.
    Example: ``ShardingRules([(r'dense\\d*\\.weight$', P('model', None))])`` splits those
    Dense weights (``(units, in_units)``) by rows over the ``'model'`` axis.
    """

    def __init__(self, rules: Sequence[tuple[str, Any]] | dict):
        pairs = list(rules.items()) if isinstance(rules, dict) else list(rules)
        self.rules: list[tuple[re.Pattern, PartitionSpec]] = []
        for pair in pairs:
            if not (isinstance(pair, (tuple, list)) and len(pair) == 2 and isinstance(pair[0], str)):
                raise TypeError(f"ShardingRules: each rule must be a (regex string, PartitionSpec) pair, got {pair!r}")
            pattern, spec = pair
            spec = spec if isinstance(spec, PartitionSpec) else PartitionSpec(*(spec or ()))
            for entry in spec:
                if not all(isinstance(a, str) for a in _spec_axes(entry)):
                    raise TypeError(f"ShardingRules: rule {pattern!r} has spec {spec}; its entries must be mesh axis "
                                    "names, tuples of them, or None")
            self.rules.append((re.compile(pattern), spec))

    def spec_for(self, name: str) -> PartitionSpec:
        """The spec of the first rule whose pattern occurs in ``name``; ``PartitionSpec()`` if none."""
        for pattern, spec in self.rules:
            if pattern.search(name):
                return spec
        return PartitionSpec()

    def __repr__(self) -> str:
        return "ShardingRules([" + ", ".join(f"({p.pattern!r}, {s})" for p, s in self.rules) + "])"


def parameter_sharding(name: str, shape: tuple[int, ...], mesh: Mesh, spec: PartitionSpec) -> NamedSharding:
    """``NamedSharding(mesh, spec)`` after checking that ``spec`` fits a parameter of ``shape``.

    Raises ValueError naming the parameter when the spec has more entries than the
    parameter has dimensions, names an axis the mesh lacks or uses one twice, or when a
    dimension is not divisible by the number of devices it is split over.
    """
    if len(spec) > len(shape):
        raise ValueError(f"sharding rule for parameter {name!r}: spec {spec} has {len(spec)} entries, but the "
                         f"parameter has shape {shape}")
    used: list[str] = []
    for dim, (size, entry) in enumerate(zip(shape, spec)):
        axes = _spec_axes(entry)
        for axis in axes:
            if axis not in mesh.shape:
                raise ValueError(f"sharding rule for parameter {name!r}: spec {spec} names mesh axis {axis!r}, but "
                                 f"the mesh has axes {tuple(mesh.axis_names)}")
        used += axes
        parts = math.prod(mesh.shape[a] for a in axes)
        if size % parts:
            raise ValueError(f"sharding rule for parameter {name!r}: dimension {dim} of shape {shape} has size "
                             f"{size}, which cannot be split evenly over mesh axes {axes} ({parts} devices)")
    if len(set(used)) != len(used):
        raise ValueError(f"sharding rule for parameter {name!r}: spec {spec} uses a mesh axis twice")
    return NamedSharding(mesh, spec)


def _put(value: jax.Array, sharding: NamedSharding) -> jax.Array:
    value = _lazy.concrete(value)  # a recorded value (first step of a deferred parameter): computed now
    if value.is_fully_addressable and not sharding.is_fully_addressable:
        # Several processes: each holds the same full value (same seed) and keeps the slices it addresses.
        host = np.asarray(value)
        return jax.make_array_from_callback(host.shape, sharding, lambda index: host[index])
    return jax.device_put(value, sharding)


class Placement:
    """Where a set of parameters lives on a mesh: replicated, or split by ``rules``.

    Built by :func:`place_parameters` and by ``Trainer(devices=...)``. ``shardings`` maps each placed Parameter to its
    ``NamedSharding``. Parameters whose data does not exist yet (deferred initialisation)
    are placed by :meth:`place_pending`, which the Trainer calls before every update.
    """

    def __init__(self, named: list[tuple[Parameter, str]], mesh: Mesh, rules: ShardingRules | list | None = None):
        if rules is not None and not isinstance(rules, ShardingRules):
            rules = ShardingRules(rules)
        self.mesh, self.rules = mesh, rules
        self.shardings: dict[Parameter, NamedSharding] = {}
        self._pending = named
        self.place_pending()

    def place_pending(self) -> None:
        """Place every pending parameter that has been initialised since (cheap when none waits)."""
        if not self._pending:
            return
        waiting = []
        with _functional.no_frame(), jax.ensure_compile_time_eval():  # also inside a hybrid.compile trace
            for param, name in self._pending:
                if not param.is_initialized:
                    waiting.append((param, name))
                    continue
                spec = self.rules.spec_for(name) if self.rules is not None else PartitionSpec()
                sharding = parameter_sharding(name, tuple(param.own_data.shape), self.mesh, spec)
                self.shardings[param] = sharding
                param.assign_data(_put(param.own_data, sharding))
                state = param.grad_state
                if state.value is not None:
                    state.set(_put(state.resolved(), sharding), state.fresh)
        self._pending = waiting

    def place_state(self, param: Parameter, state: tuple) -> tuple:
        """Optimizer state of ``param`` on the mesh: leaves of the parameter's shape share its
        sharding, other leaves (step counters) are replicated."""
        sharding = self.shardings[param]
        replicated = NamedSharding(self.mesh, PartitionSpec())
        return tuple(_put(leaf, sharding if leaf.shape == param.own_data.shape else replicated) for leaf in state)


def place_parameters(params: dict[str, Parameter] | Sequence[Parameter], mesh: Mesh,
                     rules: ShardingRules | list | None = None) -> Placement:
    """Move each parameter's data (and gradient) to its sharding on ``mesh``.

    ``params`` is a dict by structural name (e.g. ``net.collect_params()``; a shared
    parameter takes its first name) or a list (names from ``Parameter.name``). Without
    ``rules`` every parameter is replicated. Returns the :class:`Placement`.
    Raises ValueError as :func:`parameter_sharding` does.
    """
    if not isinstance(mesh, Mesh):
        raise TypeError(f"place_parameters: expected a jax.sharding.Mesh, got {type(mesh).__name__}")
    named = params.items() if isinstance(params, dict) else ((p.name or "param", p) for p in params)
    names: dict[Parameter, str] = {}
    for name, param in named:
        names.setdefault(param, name)
    return Placement(list(names.items()), mesh, rules)


def _batch_shards(mesh: Mesh, axis_name: str) -> int:
    """How many slices of the batch this process feeds (all of them with one process)."""
    index = mesh.axis_names.index(axis_name)
    me = jax.process_index()
    return len({pos[index] for pos, device in np.ndenumerate(mesh.devices) if device.process_index == me})


def shard_batch(data: Any, mesh: Mesh, axis_name: str = DATA_AXIS, batch_axis: int = 0) -> Any:
    """Split every array in ``data`` (an array or a pytree of them) along ``batch_axis`` over mesh axis
    ``axis_name``; the slices are replicated over the mesh's other axes.

    With several processes, ``data`` is this process's part of the global batch (the
    global batch concatenates the parts in process order). Returns JAX arrays of the
    global shape. Raises ValueError when the mesh has no axis ``axis_name`` or when the
    batch size is not a multiple of the number of slices; TypeError for a non-Mesh.
    """
    if not isinstance(mesh, Mesh):
        raise TypeError(f"shard_batch: expected a jax.sharding.Mesh (e.g. trainer.mesh), got {type(mesh).__name__}")
    if axis_name not in mesh.shape:
        raise ValueError(f"shard_batch: the mesh has axes {tuple(mesh.axis_names)}, none named {axis_name!r} to split "
                         "the batch over; build it with hybrid.distributed.make_mesh or pass axis_name=")
    parts = _batch_shards(mesh, axis_name)
    multi = jax.process_count() > 1

    def put(x: Any) -> Any:
        if not isinstance(x, (jax.Array, np.ndarray, np.generic)):
            return x  # Python values pass through
        if x.ndim == 0:
            raise ValueError("shard_batch: cannot split a scalar; every array needs a batch axis")
        axis = batch_axis % x.ndim
        if x.shape[axis] % parts:
            where = " per process" if multi else ""
            raise ValueError(f"shard_batch: a batch of {x.shape[axis]} samples{where} (shape {x.shape}, axis "
                             f"{batch_axis}) cannot be split evenly over {parts} devices of mesh axis "
                             f"{axis_name!r}; use a batch size that is a multiple of {parts}")
        sharding = NamedSharding(mesh, PartitionSpec(*([None] * axis + [axis_name])))
        if multi:
            return jax.make_array_from_process_local_data(sharding, np.asarray(x))
        return jax.device_put(x, sharding)

    return jax.tree_util.tree_map(put, data)
