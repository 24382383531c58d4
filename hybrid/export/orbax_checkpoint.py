"""The orbax backend of training checkpoints: ``save_checkpoint(..., backend='orbax')``.

Layout (beside ``checkpoint.json``, whose other entries are those of every checkpoint)::

    ckpt-00000120.g00000003/state/...        orbax-checkpoint's files (PyTreeCheckpointHandler, OCDBT):
                                             {'params': [array, ...], 'states': [leaf, ...]}
                           /checkpoint.json  also: "backend": "orbax", the parameters' names, shapes and
                                             dtypes, the optimizer, update count and state leaves per
                                             parameter, and the size and SHA-256 of every file in state/

Arrays are written per shard (each process writes the shards it holds, replicas once) and restored
with the sharding of the parameter they go into. orbax writes into a temporary directory that it renames
when complete, inside hybrid's own temporary checkpoint directory, which is published only after that and
after the manifest; an asynchronous save takes the values when called and finishes in the background.
orbax-checkpoint is imported when this module is, so only by ``backend='orbax'``.
"""
from __future__ import annotations

import functools
import hashlib
import os
import secrets
from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np
import orbax.checkpoint as ocp
from jax.sharding import NamedSharding, PartitionSpec

from ..distributed.placement import parameter_sharding
from ..formats.serialization import FormatError
from ..formats.checkpoint_backend import Backend, check_file_entry

__all__ = ["OrbaxBackend"]

STATE = "state"
_CHUNK = 1 << 22
_BARRIER_TIMEOUT_MS = 1_200_000


def _array_entry(name: str, value: Any) -> dict:
    return {"name": name, "shape": list(value.shape), "dtype": np.dtype(value.dtype).name}


def _named_params(net: Any) -> dict[Any, str]:
    """Each distinct Parameter of ``net`` with its first structural name."""
    names: dict[Any, str] = {}
    for name, param in net.collect_params().items():
        names.setdefault(param, name)
    return names


def _hash_file(path: str) -> dict:
    digest, size = hashlib.sha256(), 0
    with open(path, "rb") as f:
        while chunk := f.read(_CHUNK):
            digest.update(chunk)
            size += len(chunk)
    return {"bytes": size, "sha256": digest.hexdigest()}


def _files_under(root: str) -> list[str]:
    """Every file below ``root`` as a '/'-separated path relative to ``root``'s parent, sorted."""
    base = os.path.dirname(root)
    found = []
    for folder, _, files in os.walk(root):
        found += [os.path.relpath(os.path.join(folder, f), base).replace(os.sep, "/") for f in files]
    return sorted(found)


def _file_entries(tmp: str) -> dict:
    return {name: _hash_file(os.path.join(tmp, name)) for name in _files_under(os.path.join(tmp, STATE))}


class OrbaxBackend(Backend):
    """Checkpoint arrays written and read by orbax-checkpoint, per shard, optionally asynchronously."""

    name = "orbax"
    asynchronous = True
    manifest_keys = frozenset({"backend", "params", "trainer"})

    # -- writing -----------------------------------------------------------------------------
    def temporary_directory(self, directory: str, step: int) -> str:
        """Process 0 draws the name and every process uses it (orbax writes it together)."""
        token = np.asarray(secrets.randbits(62), np.int64)
        if jax.process_count() > 1:
            token = ocp.multihost.broadcast_one_to_all(token)
        tmp = os.path.join(directory, f".tmp-ckpt-{step:08d}-{int(token):016x}")
        if self.is_publisher():
            os.mkdir(tmp)
        return tmp

    def is_publisher(self) -> bool:
        return jax.process_index() == 0

    def start(self, tmp: str, net: Any, trainer: Any) -> Callable[[], dict]:
        params, param_entries = [], []
        for param, name in _named_params(net).items():
            if not param.is_initialized:
                raise ValueError(f"save_checkpoint: parameter {name!r} has no value yet (deferred initialisation); "
                                 "run a forward pass before saving")
            value = param.data()
            params.append(value)
            param_entries.append(_array_entry(name, value))
        tree: dict[str, list] = {"params": params}
        trainer_entry = None
        if trainer is not None:
            states, entries = [], []
            for name, _, state in trainer.state_entries():
                entries.append({"name": name,
                                "leaves": None if state is None else [_array_entry(str(j), leaf)
                                                                      for j, leaf in enumerate(state)]})
                states += list(state or ())
            trainer_entry = {"optimizer": type(trainer.optimizer).__name__,
                             "num_update": int(trainer.optimizer.num_update), "states": entries}
            if trainer.loss_scaler is not None:
                trainer_entry["loss_scaler"] = trainer.loss_scaler.state_dict()
            if states:
                tree["states"] = states
        checkpointer = ocp.AsyncCheckpointer(ocp.PyTreeCheckpointHandler())
        try:
            checkpointer.save(os.path.abspath(os.path.join(tmp, STATE)), args=ocp.args.PyTreeSave(tree))
        except BaseException:
            checkpointer.close()
            raise

        def finish() -> dict:
            try:
                checkpointer.wait_until_finished()
            finally:
                checkpointer.close()
            files = _file_entries(tmp) if self.is_publisher() else {}
            return {"backend": self.name, "params": param_entries, "trainer": trainer_entry, "files": files}
        return finish

    def published(self, directory: str, step: int, serial: str) -> None:
        if jax.process_count() > 1:
            ocp.multihost.get_barrier_sync_fn()(key=f"hybrid-checkpoint-{serial}-published",
                                                timeout_ms=_BARRIER_TIMEOUT_MS)

    # -- reading -----------------------------------------------------------------------------
    def loader(self, path: str, manifest: dict, net: Any, trainer: Any) -> list[Callable[[], None]]:
        where = f"checkpoint {path!r}"
        saved_params = _check_entries(where, manifest["params"], "params")
        saved_trainer = manifest["trainer"]
        if saved_trainer is not None:
            _check_trainer_entry(where, saved_trainer)
        _verify_files(path, manifest["files"])

        targets: dict[Any, tuple] = {}  # Parameter -> (shape, dtype, sharding) it is restored to
        abstract_params: list[Any] = [ocp.PLACEHOLDER] * len(saved_params)
        if net is not None:
            named = _named_params(net)
            by_name = {entry["name"]: i for i, entry in enumerate(saved_params)}
            loaded = {param for param, name in named.items() if name in by_name}
            missing = [name for name, param in net.collect_params().items() if param not in loaded]
            if missing:
                raise ValueError(f"load_checkpoint: parameter(s) {missing[:8]} of {type(net).__name__} are not in "
                                 f"{path!r} (it holds {sorted(by_name)[:8]})")
            extra = sorted(set(by_name) - set(net.collect_params()))
            if extra:
                raise ValueError(f"load_checkpoint: {path!r} holds parameter(s) {extra[:8]} that "
                                 f"{type(net).__name__} does not have")
            for param, name in named.items():
                entry = saved_params[by_name[name]]
                shape, dtype = tuple(entry["shape"]), jnp.dtype(entry["dtype"])
                _check_fits(path, name, param, shape, dtype)
                targets[param] = (shape, dtype, _target_sharding(param, shape, trainer))
                abstract_params[by_name[name]] = jax.ShapeDtypeStruct(shape, dtype, sharding=targets[param][2])

        abstract: dict[str, list] = {"params": abstract_params}
        trainer_plan = None
        if trainer is not None:
            trainer_plan, abstract_states = _trainer_plan(path, saved_trainer, trainer, targets)
            if abstract_states:
                abstract["states"] = abstract_states
        elif saved_trainer is not None and any(e["leaves"] for e in saved_trainer["states"]):
            abstract["states"] = [ocp.PLACEHOLDER] * sum(len(e["leaves"] or ()) for e in saved_trainer["states"])

        restored = _restore(path, abstract)
        changes: list[Callable[[], None]] = []
        if net is not None:
            values = [(param, restored["params"][by_name[name]]) for param, name in named.items()]

            def set_parameters() -> None:
                for param, value in values:
                    param.set_data(value)
            changes.append(set_parameters)
        if trainer_plan is not None:
            changes.append(_trainer_change(trainer_plan, restored.get("states", [])))
        return changes


def _check_entries(where: str, entries: Any, what: str) -> list[dict]:
    """Raise FormatError unless ``entries`` is a list of ``{'name', 'shape', 'dtype'}`` with distinct names."""
    if not isinstance(entries, list):
        raise FormatError(f"{where}: the manifest's {what!r} must be a list")
    for entry in entries:
        if not (isinstance(entry, dict) and set(entry) == {"name", "shape", "dtype"} and
                isinstance(entry["name"], str) and isinstance(entry["shape"], list) and
                all(type(d) is int and d >= 0 for d in entry["shape"]) and isinstance(entry["dtype"], str)):
            raise FormatError(f"{where}: invalid entry {entry!r:.80} in the manifest's {what!r}")
        try:
            dtype = jnp.dtype(entry["dtype"])
        except TypeError:
            raise FormatError(f"{where}: unknown dtype {entry['dtype']!r:.40} in the manifest's {what!r}") from None
        if not (jnp.issubdtype(dtype, jnp.number) or dtype == np.bool_):
            raise FormatError(f"{where}: dtype {entry['dtype']!r:.40} in the manifest's {what!r} is not numeric")
    if len({e["name"] for e in entries}) != len(entries):
        raise FormatError(f"{where}: a name appears twice in the manifest's {what!r}")
    return entries


def _check_trainer_entry(where: str, entry: Any) -> None:
    if not (isinstance(entry, dict) and set(entry) - {"loss_scaler"} == {"optimizer", "num_update", "states"} and
            isinstance(entry["optimizer"], str) and type(entry["num_update"]) is int and
            0 <= entry["num_update"] < 2 ** 53 and isinstance(entry["states"], list)):
        raise FormatError(f"{where}: invalid 'trainer' entry in the manifest")
    for state in entry["states"]:
        if not (isinstance(state, dict) and set(state) == {"name", "leaves"} and isinstance(state["name"], str)):
            raise FormatError(f"{where}: invalid trainer state entry {state!r:.80} in the manifest")
        if state["leaves"] is not None:
            _check_entries(where, state["leaves"], f"states of {state['name']}")
    if len({s["name"] for s in entry["states"]}) != len(entry["states"]):
        raise FormatError(f"{where}: a parameter name appears twice in the manifest's trainer states")


def _verify_files(path: str, files: Any) -> None:
    """Every file below ``path/state`` is listed in ``files`` with its size and SHA-256, and vice versa."""
    where = f"checkpoint {path!r}"
    if not isinstance(files, dict) or not files:
        raise FormatError(f"{where}: the manifest lists no files")
    for name, info in files.items():
        parts = name.split("/") if isinstance(name, str) else []
        if len(parts) < 2 or parts[0] != STATE or any(p in ("", ".", "..") for p in parts):
            raise FormatError(f"{where}: invalid file name {name!r:.80} in the manifest (expected {STATE}/...)")
        check_file_entry(where, name, info)
    root = os.path.join(path, STATE)
    if not os.path.isdir(root):
        raise FileNotFoundError(f"{where}: the orbax directory {root!r} is missing")
    present = _files_under(root)
    unlisted = sorted(set(present) - set(files))
    if unlisted:
        raise FormatError(f"{where}: files {unlisted[:4]} are not in the manifest (added or renamed; corrupted)")
    for name, info in files.items():
        file = os.path.join(path, *name.split("/"))
        if not os.path.isfile(file):
            raise FileNotFoundError(f"{where}: {name} is missing (listed in the manifest)")
        if _hash_file(file) != info:
            raise FormatError(f"{where}: {name} does not match its checksum in the manifest (corrupted)")


def _check_fits(path: str, name: str, param: Any, shape: tuple, dtype: np.dtype) -> None:
    """Raise ValueError unless the saved ``shape``/``dtype`` fit ``param`` (unknown dimensions are 0)."""
    current = param.shape
    if current is not None and (len(current) != len(shape) or any(d not in (0, s) for d, s in zip(current, shape))):
        raise ValueError(f"load_checkpoint: parameter {name!r} has shape {shape} in {path!r}, but the network "
                         f"expects {tuple(current)}")
    if dtype != np.dtype(param.dtype):
        raise ValueError(f"load_checkpoint: parameter {name!r} has dtype {dtype} in {path!r}, but the network "
                         f"expects {np.dtype(param.dtype)}")


def _target_sharding(param: Any, shape: tuple, trainer: Any) -> Any:
    """Where ``param``'s restored value goes: its Trainer placement (the rules' sharding for a parameter not
    placed yet), else the sharding of its current value when that is committed to devices; None for JAX's
    default device, uncommitted, as a value read from a ``.npz`` file (so compiled calls see the same kind
    of argument as before and are not compiled again)."""
    placement = trainer.placement if trainer is not None else None
    name = trainer.name_of(param) if placement is not None else None
    if name is not None:
        if param in placement.shardings:
            return placement.shardings[param]
        spec = placement.rules.spec_for(name) if placement.rules is not None else PartitionSpec()
        return parameter_sharding(name, shape, placement.mesh, spec)
    if param.is_initialized:
        value = param.data()
        return value.sharding if value.committed else None
    return None


def _replicated_like(sharding: Any) -> Any:
    """A sharding that holds any shape on ``sharding``'s devices, replicated (None stays None)."""
    if isinstance(sharding, NamedSharding):
        return NamedSharding(sharding.mesh, PartitionSpec())
    return sharding


def _trainer_plan(path: str, saved: dict | None, trainer: Any, targets: dict) -> tuple[dict, list]:
    """Check the saved trainer entry against ``trainer``; return the plan (the leaf count per Parameter,
    in saved order, and ``trainer.states_restorer`` for the saved update count and loss scaler state) and
    the abstract state leaves to restore."""
    if saved is None:
        raise ValueError(f"load_checkpoint: {path!r} was saved without trainer states")
    optimizer = type(trainer.optimizer).__name__
    if saved["optimizer"] != optimizer:
        raise ValueError(f"load_checkpoint: {path!r} holds states of optimizer {saved['optimizer']}, this Trainer "
                         f"uses {optimizer}")
    params = {name: param for name, param, _ in trainer.state_entries()}
    by_name = {entry["name"]: entry for entry in saved["states"]}
    if sorted(by_name) != sorted(params):
        missing, extra = sorted(set(params) - set(by_name)), sorted(set(by_name) - set(params))
        raise ValueError(f"load_checkpoint: the trainer states in {path!r} are for other parameters (missing "
                         f"{missing[:5]}, not in this Trainer {extra[:5]})")
    layout, abstract = [], []
    for entry in saved["states"]:
        param = params[entry["name"]]
        if entry["leaves"] is None:
            continue
        if param in targets:
            shape, dtype, sharding = targets[param]
        elif param.is_initialized:
            value = param.data()
            shape, dtype, sharding = tuple(value.shape), value.dtype, _target_sharding(param, value.shape, trainer)
        else:
            raise ValueError(f"load_checkpoint: parameter {entry['name']!r} of the Trainer has no value yet; pass "
                             "the network too, or run a forward pass first")
        expected = jax.eval_shape(trainer.optimizer.create_state_multi_precision, jax.ShapeDtypeStruct(shape, dtype))
        want = tuple((tuple(leaf.shape), np.dtype(leaf.dtype).name) for leaf in jax.tree_util.tree_leaves(expected))
        got = tuple((tuple(leaf["shape"]), leaf["dtype"]) for leaf in entry["leaves"])
        if got != want:
            raise ValueError(f"load_checkpoint: the trainer state of parameter {entry['name']!r} in {path!r} has "
                             f"shapes/dtypes {got}, expected {want}")
        for leaf_shape, leaf_dtype in got:
            leaf_sharding = sharding if leaf_shape == shape else _replicated_like(sharding)
            abstract.append(jax.ShapeDtypeStruct(leaf_shape, jnp.dtype(leaf_dtype), sharding=leaf_sharding))
        layout.append((param, len(got)))
    restore = trainer.states_restorer(saved["num_update"], saved.get("loss_scaler"), f"load_checkpoint: {path!r}")
    return {"layout": layout, "restore": restore}, abstract


def _trainer_change(plan: dict, leaves: list) -> Callable[[], None]:
    states, position = {}, 0
    for param, count in plan["layout"]:
        states[param] = tuple(leaves[position:position + count])
        position += count
    return functools.partial(plan["restore"], states)


def _restore(path: str, abstract: dict) -> dict:
    """orbax's restore of ``abstract`` from ``path/state``; FormatError naming the path when it fails, or when
    an array comes back with another shape or dtype."""
    if all(leaf is ocp.PLACEHOLDER for group in abstract.values() for leaf in group):
        return abstract  # nothing to read

    def restore_arg(leaf: Any) -> Any:
        """Only the sharding is requested: orbax then gives the stored shape and dtype, checked below."""
        if leaf is ocp.PLACEHOLDER:
            return leaf
        if leaf.sharding is None:  # read to the host; made an uncommitted JAX array below
            return ocp.RestoreArgs(restore_type=np.ndarray)
        return ocp.ArrayRestoreArgs(sharding=leaf.sharding)

    restore_args = jax.tree_util.tree_map(restore_arg, abstract)
    checkpointer = ocp.Checkpointer(ocp.PyTreeCheckpointHandler())
    try:
        restored = checkpointer.restore(os.path.abspath(os.path.join(path, STATE)),
                                        args=ocp.args.PyTreeRestore(item=abstract, restore_args=restore_args))
    except Exception as exc:  # noqa: BLE001 - orbax and tensorstore raise many kinds
        raise FormatError(f"checkpoint {path!r}: orbax could not read {STATE}/ ({type(exc).__name__}: "
                          f"{str(exc)[:300]})") from exc
    finally:
        checkpointer.close()
    for group, wanted in abstract.items():
        got = restored.get(group, []) if isinstance(restored, dict) else []
        if len(got) != len(wanted):
            raise FormatError(f"checkpoint {path!r}: {STATE}/ holds {len(got)} arrays in {group!r}, the manifest "
                              f"{len(wanted)}")
        for i, (value, want) in enumerate(zip(got, wanted)):
            if want is not ocp.PLACEHOLDER and (tuple(value.shape) != want.shape or value.dtype != want.dtype):
                raise FormatError(f"checkpoint {path!r}: array {group}[{i}] is {value.dtype}{list(value.shape)} in "
                                  f"{STATE}/, the manifest says {want.dtype}{list(want.shape)}")
    return {group: [jnp.asarray(v) if isinstance(v, np.ndarray) else v for v in restored[group]] for group in abstract}
