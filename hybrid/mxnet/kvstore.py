"""``mxnet.kvstore`` (``mx.kv``): MXNet's key-value store, in one process.

``create('local')`` (also ``'device'``, ``'local_update_cpu'``, ``'local_allreduce_cpu'``,
``'local_allreduce_device'``, ``'nccl'``) gives a :class:`KVStore` holding one value per key (int or str
keys, not mixed), as MXNet's local stores do:

- ``init(key, value)`` stores a copy; ``push(key, value)`` sums a list of values given for one key and
  either stores the sum or, after ``set_optimizer``/``set_updater``, hands it to the updater as the
  gradient of the stored weight; ``pull(key, out=...)`` writes the stored value into the handles given
  (cast to their dtype); ``pushpull`` does both, ``broadcast`` is ``init`` then ``pull``.
- ``set_optimizer(optimizer)`` takes a ``mx.optimizer`` (hybrid) optimizer: each push then updates the
  weight by the optimizer's rule, with per-key states and update counts as MXNet's ``Updater`` keeps them.
  ``save_optimizer_states``/``load_optimizer_states`` write and read those states (an ``.npz`` file, not
  MXNet's pickle).

Every store here lives in one process: the device types differ from ``'local'`` only by name, since the
values are JAX arrays wherever JAX put them. The distributed types (``dist_sync``, ``dist_async``,
``dist_device_sync``, ``horovod``, ``byteps``) raise: several processes train with ``hybrid.distributed``
(``initialize()`` over ``jax.distributed``, ``make_mesh``, ``shard_batch``) and ``Trainer(..., mesh=...)``,
where XLA's collectives reduce the gradients (docs/distributed.md). ``gluon.Trainer`` accepts a store or its
name as ``kvstore=``; its compiled update does not go through the store.
"""
from __future__ import annotations

import json
from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np

from .._core import compat as _compat
from ..formats import serialization
from ..optimizer import Optimizer
from .base import MXNetError
from .handle import NDArray, value_of

__all__ = ["KVStoreBase", "KVStore", "create"]

# the one-process types MXNet 1.9.1 creates, and the distributed ones it has
LOCAL_TYPES = ("local", "device", "local_update_cpu", "local_allreduce_cpu", "local_allreduce_device", "nccl")
DISTRIBUTED_TYPES = ("dist_sync", "dist_async", "dist_device_sync", "dist_sync_device", "dist_async_device",
                     "dist", "horovod", "byteps", "p3")


class KVStoreBase:
    """The interface of a key-value store; ``KVStoreBase.register`` adds a class that ``create`` finds by its
    lower-case name."""

    OPTIMIZER = "optimizer"
    kv_registry: dict[str, type] = {}

    @staticmethod
    def register(klass: type) -> type:
        """Register ``klass`` (a KVStoreBase subclass) under its lower-case class name."""
        if not (isinstance(klass, type) and issubclass(klass, KVStoreBase)):
            raise TypeError(f"KVStoreBase.register: expected a KVStoreBase subclass, got {klass!r}")
        KVStoreBase.kv_registry[klass.__name__.lower()] = klass
        return klass

    def broadcast(self, key: Any, value: Any, out: Any, priority: int = 0) -> None:
        raise NotImplementedError

    def pushpull(self, key: Any, value: Any, out: Any = None, priority: int = 0) -> None:
        raise NotImplementedError

    def set_optimizer(self, optimizer: Optimizer) -> None:
        raise NotImplementedError

    def is_capable(self, capability: str) -> bool:
        raise NotImplementedError

    def save_optimizer_states(self, fname: str, dump_optimizer: bool = False) -> None:
        raise NotImplementedError

    def load_optimizer_states(self, fname: str) -> None:
        raise NotImplementedError

    @property
    def type(self) -> str:
        raise NotImplementedError

    @property
    def rank(self) -> int:
        raise NotImplementedError

    @property
    def num_workers(self) -> int:
        raise NotImplementedError


class _OptimizerUpdater:
    """The updater ``set_optimizer`` installs: the optimizer's rule applied to one key's stored weight, with
    the key's optimizer state and update count (MXNet's ``Updater``)."""

    def __init__(self, optimizer: Optimizer):
        self.optimizer = optimizer
        self.states: dict[Any, tuple] = {}
        self.counts: dict[Any, int] = {}
        self._programs: dict[tuple, Callable] = {}

    def __call__(self, key: Any, grad: NDArray, stored: NDArray) -> None:
        opt = self.optimizer
        weight = stored.value
        state = self.states.get(key)
        if state is None:
            state = tuple(opt.create_state_multi_precision(weight))
        count = self.counts.get(key, opt.begin_num_update) + 1
        self.counts[key] = count
        opt.num_update = max(opt.num_update, count)
        new_weight, new_state = self._program()(weight, value_of(grad), state, np.float32(opt.learning_rate),
                                                np.float32(opt.rescale_grad))
        self.states[key] = new_state
        stored._assign(new_weight)

    def _program(self) -> Callable:
        """The jitted update of one weight, for the optimizer's current hyperparameters."""
        opt = self.optimizer
        key = opt.hyperparameters()
        program = self._programs.get(key)
        if program is None:
            def update(weight, grad, state, lr, rescale):
                dtype = jnp.float32 if weight.dtype in (jnp.float16, jnp.bfloat16) else weight.dtype
                grad = opt.preprocess(grad.astype(weight.dtype), rescale)
                weights, states = opt.update_all_multi_precision(
                    [weight], [grad], [state], [lr.astype(dtype)], [jnp.asarray(opt.wd, dtype)])
                return weights[0].astype(weight.dtype), tuple(n.astype(o.dtype) for o, n in zip(state, states[0]))
            program = self._programs[key] = jax.jit(update)
        return program


def _is_int_key(key: Any) -> bool:
    return isinstance(key, (int, np.integer)) and not isinstance(key, (bool, np.bool_))


class KVStore(KVStoreBase):
    """A one-process key-value store (see the module docstring); make one with :func:`create`."""

    def __init__(self, name: str = "local"):
        self._type = name
        self._store: dict[Any, NDArray] = {}
        self._key_kind: type | None = None  # int or str, fixed by the first key
        self._updater: Callable | None = None

    # -- keys and values --------------------------------------------------------------------------------
    def _key(self, key: Any, method: str) -> Any:
        if _is_int_key(key):
            kind, key = int, int(key)
        elif isinstance(key, str):
            kind = str
        else:
            raise TypeError(f"KVStore.{method}: a key must be an int or a str, got {key!r} ({type(key).__name__})")
        if self._key_kind is None:
            self._key_kind = kind
        elif kind is not self._key_kind:
            raise MXNetError(f"KVStore.{method}: key {key!r} is a {kind.__name__}, but this store's keys are "
                             f"{self._key_kind.__name__}s; mixed key types are not allowed (as in MXNet)")
        return key

    def _pairs(self, key: Any, value: Any, method: str, what: str = "value") -> list[tuple[Any, list]]:
        """``(key, [values])`` for one key or a list of keys (each given a value or a list of values)."""
        if isinstance(key, (list, tuple)):
            if not isinstance(value, (list, tuple)) or len(value) != len(key):
                got = f"{len(value)} {what}s" if isinstance(value, (list, tuple)) else f"one {type(value).__name__}"
                raise ValueError(f"KVStore.{method}: {len(key)} keys {list(key)} need a list of {len(key)} {what}s "
                                 f"(one per key, each an NDArray or a list of them), got {got}")
            return [pair for k, v in zip(key, value) for pair in self._pairs(k, v, method, what)]
        values = list(value) if isinstance(value, (list, tuple)) else [value]
        key = self._key(key, method)
        if not values:
            raise ValueError(f"KVStore.{method}: no {what} given for key {key!r}")
        for v in values:
            if not isinstance(v, (NDArray, jax.Array, np.ndarray)):
                raise TypeError(f"KVStore.{method}: the {what} for key {key!r} must be an NDArray (or a list of "
                                f"them), got {type(v).__name__}")
        return [(key, values)]

    def _stored(self, key: Any, method: str) -> NDArray:
        stored = self._store.get(key)
        if stored is None:
            raise MXNetError(f"KVStore.{method}: key {key!r} has not been initialised: call kv.init({key!r}, "
                             f"value) first")
        return stored

    # -- the store's operations -------------------------------------------------------------------------
    def init(self, key: Any, value: Any) -> None:
        """Store a copy of ``value`` under ``key`` (or of each value under each key of a list)."""
        for k, values in self._pairs(key, value, "init"):
            if len(values) != 1:
                raise ValueError(f"KVStore.init: key {k!r} takes one value, got a list of {len(values)}")
            if k in self._store:
                raise MXNetError(f"KVStore.init: duplicate init of key {k!r}: each key is initialised once "
                                 "(kv.init or kv.broadcast)")
            self._store[k] = NDArray(jnp.asarray(value_of(values[0])))

    def push(self, key: Any, value: Any, priority: int = 0) -> None:
        """Sum the values given for each key; store the sum, or hand it to the updater (``set_optimizer``)."""
        for k, values in self._pairs(key, value, "push"):
            stored = self._stored(k, "push")
            target = stored.value
            arrays = [jnp.asarray(value_of(v)) for v in values]
            for i, array in enumerate(arrays):
                if array.shape != target.shape or array.dtype != target.dtype:
                    which = f"value {i} of {len(arrays)}" if len(arrays) > 1 else "the value"
                    raise ValueError(f"KVStore.push: {which} pushed to key {k!r} has shape {array.shape} and dtype "
                                     f"{array.dtype}; the stored value has shape {target.shape} and dtype "
                                     f"{target.dtype}")
            merged = arrays[0]
            for array in arrays[1:]:
                merged = merged + array
            if self._updater is None:
                stored._assign(merged)
            else:
                self._updater(k, NDArray(merged), stored)

    def pull(self, key: Any, out: Any = None, priority: int = 0, ignore_sparse: bool = True) -> None:
        """Write each key's stored value into the handle(s) ``out`` (cast to their dtype)."""
        if out is None:
            raise ValueError("KVStore.pull: out= is required (the NDArray, or list of them, to write into)")
        for k, outs in self._pairs(key, out, "pull", what="out"):
            value = self._stored(k, "pull").value
            for target in outs:
                if not isinstance(target, NDArray):
                    raise TypeError(f"KVStore.pull: out for key {k!r} must be an NDArray handle to write into, "
                                    f"got {type(target).__name__}")
                if target.shape != value.shape:
                    raise ValueError(f"KVStore.pull: out for key {k!r} has shape {target.shape}, the stored value "
                                     f"has shape {value.shape}")
                target._assign(value.astype(target.value.dtype))

    def pushpull(self, key: Any, value: Any, out: Any = None, priority: int = 0) -> None:
        """``push(key, value)`` then ``pull(key, out)``; without ``out`` the result is written into ``value``."""
        self.push(key, value, priority)
        self.pull(key, value if out is None else out, priority)

    def broadcast(self, key: Any, value: Any, out: Any, priority: int = 0) -> None:
        """``init(key, value)`` then ``pull(key, out)``."""
        self.init(key, value)
        self.pull(key, out, priority)

    def row_sparse_pull(self, key: Any, out: Any = None, priority: int = 0, row_ids: Any = None) -> None:
        """Dense form of MXNet's sparse pull: ``out`` gets the stored rows ``row_ids`` and zeros elsewhere."""
        if out is None or row_ids is None:
            raise ValueError("KVStore.row_sparse_pull: out= and row_ids= are required")
        pairs = self._pairs(key, out, "row_sparse_pull", what="out")
        ids = row_ids if isinstance(row_ids, (list, tuple)) else [row_ids]
        flat_outs = [(k, target) for k, outs in pairs for target in outs]
        if len(ids) not in (1, len(flat_outs)):
            raise ValueError(f"KVStore.row_sparse_pull: {len(ids)} row_ids for {len(flat_outs)} outs; give one, or "
                             "one per out")
        for i, (k, target) in enumerate(flat_outs):
            value = self._stored(k, "row_sparse_pull").value
            rows = jnp.asarray(value_of(ids[0 if len(ids) == 1 else i])).astype(jnp.int32).reshape(-1)
            dense = jnp.zeros_like(value).at[rows].set(value[rows])
            if target.shape != value.shape:
                raise ValueError(f"KVStore.row_sparse_pull: out for key {k!r} has shape {target.shape}, the "
                                 f"stored value has shape {value.shape}")
            target._assign(dense.astype(target.value.dtype))

    # -- updates ----------------------------------------------------------------------------------------
    def set_optimizer(self, optimizer: Optimizer) -> None:
        """Apply ``optimizer`` on every push: the pushed sum is the gradient of the stored weight."""
        if not isinstance(optimizer, Optimizer):
            raise TypeError(f"KVStore.set_optimizer: expected an mx.optimizer.Optimizer (e.g. "
                            f"mx.optimizer.SGD(learning_rate=0.1)), got {type(optimizer).__name__}")
        self._updater = _OptimizerUpdater(optimizer)

    def set_updater(self, updater: Callable[[Any, NDArray, NDArray], None]) -> None:
        """Call ``updater(key, pushed, stored)`` on every push; it writes the new value into ``stored``
        (``stored += ...``, ``stored[:] = ...``). Keys are passed as given (MXNet passes str keys as bytes)."""
        if not callable(updater):
            raise TypeError(f"KVStore.set_updater: updater must be callable(key, input, stored), got "
                            f"{type(updater).__name__}")
        self._updater = updater

    _set_updater = set_updater

    def set_gradient_compression(self, compression_params: dict) -> None:
        """Accepted for the device types and ignored (values are summed uncompressed); MXNet's 'local' store
        refuses it, as here."""
        if self._type not in ("device", "local_allreduce_device", "nccl"):
            raise MXNetError(f"KVStore.set_gradient_compression: not supported by a {self._type!r} store "
                             "(as in MXNet)")
        _compat.ignored_argument("KVStore", "set_gradient_compression", compression_params,
                                 "values are summed in full precision")

    def is_capable(self, capability: str) -> bool:
        """Whether the store can apply an optimizer (``'optimizer'``: yes)."""
        if str(capability).lower() == KVStoreBase.OPTIMIZER:
            return True
        raise ValueError(f"KVStore.is_capable: unknown capability {capability!r} (known: 'optimizer')")

    def save_optimizer_states(self, fname: str, dump_optimizer: bool = False) -> None:
        """Write the optimizer states and update counts of every key to ``fname`` (an ``.npz`` file)."""
        updater = self._optimizer_updater("save_optimizer_states")
        arrays: dict[str, Any] = {}
        entries = []
        for i, (key, state) in enumerate(updater.states.items()):
            entries.append({"key": key, "n_state": len(state), "count": updater.counts.get(key, 0)})
            for j, leaf in enumerate(state):
                arrays[f"{i}.{j}"] = np.asarray(leaf)
        meta = {"optimizer": type(updater.optimizer).__name__, "num_update": updater.optimizer.num_update,
                "keys": entries}
        if dump_optimizer:
            meta["hyperparameters"] = {k: v for k, v in updater.optimizer.hyperparameters()}
            meta["learning_rate"] = updater.optimizer.lr
        arrays["__meta__"] = np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8)
        serialization.save_arrays(fname, arrays)

    def load_optimizer_states(self, fname: str) -> None:
        """Restore the states written by :meth:`save_optimizer_states` (ValueError, nothing changed, when the
        file holds another optimizer's states)."""
        updater = self._optimizer_updater("load_optimizer_states")
        arrays = serialization.load_arrays(fname)
        try:
            meta = json.loads(bytes(arrays.pop("__meta__")).decode())
            entries = meta["keys"]
            name = meta["optimizer"]
        except (KeyError, ValueError, TypeError) as exc:
            raise ValueError(f"KVStore.load_optimizer_states: {fname} is not a file of save_optimizer_states "
                             f"({exc})") from None
        if name != type(updater.optimizer).__name__:
            raise ValueError(f"KVStore.load_optimizer_states: {fname} holds states of {name}, this store's "
                             f"optimizer is {type(updater.optimizer).__name__}")
        states, counts = {}, {}
        for i, entry in enumerate(entries):
            key = entry["key"]
            leaves = []
            for j in range(entry["n_state"]):
                if f"{i}.{j}" not in arrays:
                    raise ValueError(f"KVStore.load_optimizer_states: {fname} lacks state {j} of key {key!r}")
                leaves.append(jnp.asarray(arrays[f"{i}.{j}"]))
            states[key], counts[key] = tuple(leaves), int(entry["count"])
        updater.states, updater.counts = states, counts
        updater.optimizer.num_update = int(meta.get("num_update", max(counts.values(), default=0)))

    def _optimizer_updater(self, method: str) -> _OptimizerUpdater:
        if not isinstance(self._updater, _OptimizerUpdater):
            raise MXNetError(f"KVStore.{method}: the store has no optimizer; call kv.set_optimizer(optimizer) first")
        return self._updater

    def barrier(self) -> None:
        """Wait for the work dispatched so far (one worker: nothing to synchronise with)."""
        jax.effects_barrier()

    _barrier = barrier

    # -- description ------------------------------------------------------------------------------------
    @property
    def type(self) -> str:
        """The store's type (the name given to :func:`create`, lower case)."""
        return self._type

    @property
    def rank(self) -> int:
        """This worker's rank: 0 (one process)."""
        return 0

    @property
    def num_workers(self) -> int:
        """The number of workers: 1 (one process)."""
        return 1

    def __repr__(self) -> str:
        return f"<KVStore {self._type!r} with {len(self._store)} keys>"


def create(name: str = "local") -> KVStoreBase:
    """A new store of type ``name`` (see the module docstring); a class registered with
    ``KVStoreBase.register`` is found first."""
    if not isinstance(name, str):
        raise TypeError(f"kvstore.create: name must be a string, got {type(name).__name__}")
    name = name.lower()
    if name in KVStoreBase.kv_registry:
        return KVStoreBase.kv_registry[name]()
    if name in LOCAL_TYPES:
        return KVStore(name)
    if name in DISTRIBUTED_TYPES or name.startswith("dist"):
        raise MXNetError(
            f"kvstore.create({name!r}): hybrid has no parameter server. Train on several processes or hosts with "
            "hybrid.distributed: initialize() (jax.distributed) in every process, make_mesh() over all devices, "
            "shard_batch() for the inputs, and gluon.Trainer(..., mesh=mesh); XLA's collectives then reduce the "
            "gradients inside the compiled step (docs/distributed.md). One-process stores: "
            f"{', '.join(LOCAL_TYPES)}")
    raise ValueError(f"kvstore.create: unknown store type {name!r}; one-process types: {', '.join(LOCAL_TYPES)}"
                     + (f"; registered: {', '.join(sorted(KVStoreBase.kv_registry))}" if KVStoreBase.kv_registry
                        else ""))
