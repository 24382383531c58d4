"""Training checkpoints: parameters, trainer states, step/epoch and random state in one directory.

Layout::

    directory/ckpt-00000120.g00000003/params.npz        net.save_parameters
                                     /trainer.states    trainer.save_states (when a trainer is given):
                                                        optimizer states and update count (which drives
                                                        lr schedulers)
                                     /checkpoint.json   manifest: step, epoch, random state, learning rate,
                                                        extra, and the size and SHA-256 of each file;
                                                        sealed with its checksum

The generation (``g``) numbers the writes in the directory. A checkpoint is written into a
temporary directory beside the others and renamed to the next generation's name only when
complete (files and directories fsynced); after that it never changes. A crash or a full disk
never leaves a half-written checkpoint and never touches the previous ones, and a reader finds
either a complete checkpoint or none. Loading reads and verifies everything before changing anything.
"""
from __future__ import annotations

import errno
import functools
import math
import os
import re
import shutil
import tempfile
from typing import Any

from .. import random as _random
from ..serialization import FormatError, fsync_directory, read_limited
from .jsonfile import MAX_DEPTH, read_json, sha256_hex, write_json

__all__ = ["save_checkpoint", "load_checkpoint", "list_checkpoints"]

FORMAT = "hybrid-checkpoint"
VERSION = 1
MANIFEST = "checkpoint.json"
_FILES = ("params.npz", "trainer.states")
_NAME = re.compile(r"^ckpt-(\d{8,})(?:\.g(\d{8,}))?$")
_RETRIES = 8


def _non_negative_int(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"save_checkpoint: {name} must be a non-negative integer, got {value!r}")
    return value


def _fixed_learning_rate(trainer: Any) -> float | None:
    """The learning rate to save: None without a trainer, or when a scheduler derives it from the
    update count (restored with the trainer states)."""
    if trainer is None or getattr(trainer.optimizer, "lr_scheduler", None) is not None:
        return None
    return float(trainer.learning_rate)


def _check_extra(extra: Any, where: str = "extra", depth: int = 0) -> None:
    """``extra`` must be JSON that loads back as it was: string keys, finite numbers, bounded depth."""
    if depth > MAX_DEPTH - 4:
        raise ValueError(f"save_checkpoint: {where} is nested deeper than {MAX_DEPTH - 4} levels")
    if isinstance(extra, dict):
        for key, value in extra.items():
            if not isinstance(key, str):
                raise ValueError(f"save_checkpoint: {where} has the key {key!r} of type {type(key).__name__}; "
                                 "keys must be strings (JSON object keys)")
            _check_extra(value, f"{where}[{key!r}]", depth + 1)
    elif isinstance(extra, (list, tuple)):
        for i, value in enumerate(extra):
            _check_extra(value, f"{where}[{i}]", depth + 1)
    elif isinstance(extra, float):
        if not math.isfinite(extra):
            raise ValueError(f"save_checkpoint: {where} is {extra}; numbers must be finite")
    elif not (extra is None or isinstance(extra, (str, int))):
        raise ValueError(f"save_checkpoint: {where} is a {type(extra).__name__}, which JSON cannot hold")


def _generations(directory: str) -> list[tuple[int, int, str]]:
    """``(generation, step, path)`` of every complete checkpoint directory, in write order (a
    checkpoint written before generations were numbered counts as generation -1)."""
    if not os.path.isdir(directory):
        return []
    found = []
    for name in os.listdir(directory):
        match = _NAME.match(name)
        if match and os.path.isdir(os.path.join(directory, name)):
            generation = int(match.group(2)) if match.group(2) else -1
            found.append((generation, int(match.group(1)), os.path.join(directory, name)))
    return sorted(found)


def _newest_per_step(generations: list[tuple[int, int, str]]) -> dict[int, tuple[int, str]]:
    """``{step: (generation, path)}`` of the newest write of each step."""
    return {step: (generation, path) for generation, step, path in generations}


def list_checkpoints(directory: str | os.PathLike) -> list[tuple[int, str]]:
    """``[(step, path), ...]`` of the checkpoints in ``directory``, oldest step first (not verified)."""
    newest = _newest_per_step(_generations(os.fspath(directory)))
    return sorted((step, path) for step, (_, path) in newest.items())


def save_checkpoint(directory: str | os.PathLike, net: Any, trainer: Any = None, step: int = 0, epoch: int = 0,
                    extra: dict | None = None, keep: int | None = None, overwrite: bool = False) -> str:
    """Write a checkpoint of ``step`` into ``directory`` atomically and return its path.

    Each write is a new directory ``ckpt-<step>.g<generation>`` that is never changed afterwards;
    ``overwrite`` writes a new generation of an existing step, then removes the older one, so a
    reader always finds a complete checkpoint. ``extra`` is a JSON-serialisable dict (e.g. a data
    loader position); ``keep`` deletes all but the ``keep`` most recently written checkpoints once
    the new one is complete (never the new one). Raises FileExistsError if the step exists (unless
    ``overwrite``), ValueError for invalid arguments or an ``extra`` that JSON would not give back
    unchanged (non-string keys, non-finite numbers, other types, deep nesting).
    """
    step, epoch = _non_negative_int("step", step), _non_negative_int("epoch", epoch)
    if keep is not None and (isinstance(keep, bool) or not isinstance(keep, int) or keep < 1):
        raise ValueError(f"save_checkpoint: keep must be a positive integer or None, got {keep!r}")
    _check_extra(extra)
    directory = os.fspath(directory)
    os.makedirs(directory, exist_ok=True)
    existing = [path for _, s, path in _generations(directory) if s == step]
    if existing and not overwrite:
        raise FileExistsError(f"save_checkpoint: {existing[-1]!r} exists; pass overwrite=True to replace it")
    tmp = tempfile.mkdtemp(prefix=f".tmp-ckpt-{step:08d}-", dir=directory)
    try:
        net.save_parameters(os.path.join(tmp, "params.npz"))
        if trainer is not None:
            trainer.save_states(os.path.join(tmp, "trainer.states"))
        files = {}
        for name in sorted(os.listdir(tmp)):
            data = read_limited(os.path.join(tmp, name), "checkpoint file")
            files[name] = {"bytes": len(data), "sha256": sha256_hex(data)}
        manifest = {"format": FORMAT, "version": VERSION, "step": step, "epoch": epoch,
                    "random_state": list(_random.get_state()),
                    "learning_rate": _fixed_learning_rate(trainer),
                    "extra": extra, "files": files}
        write_json(os.path.join(tmp, MANIFEST), manifest)
        fsync_directory(tmp)
        final = _publish(directory, tmp, step)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    generations = _generations(directory)
    mine = int(_NAME.match(os.path.basename(final)).group(2))  # a concurrent writer may have replaced it
    stale = [path for g, s, path in generations if s == step and g < mine]  # replaced by this write
    if keep is not None:
        by_write = sorted(_newest_per_step(generations).values())  # the newest write of each step
        stale += [path for g, path in by_write[:-keep] if g < mine]
    for path in stale:
        _remove(directory, path)
    return final


def _publish(directory: str, tmp: str, step: int) -> str:
    """Rename the complete ``tmp`` to the next generation's name, retrying when a concurrent writer
    took that name first (renaming onto a non-empty directory fails), and make it durable."""
    for _ in range(64):
        generation = max((g for g, _, _ in _generations(directory)), default=-1) + 1
        final = os.path.join(directory, f"ckpt-{step:08d}.g{generation:08d}")
        try:
            os.rename(tmp, final)
        except OSError as exc:
            if exc.errno in (errno.ENOTEMPTY, errno.EEXIST):
                continue
            raise
        fsync_directory(directory)
        return final
    raise OSError(f"save_checkpoint: could not claim a checkpoint name in {directory!r} (too many concurrent "
                  "writers)")


def _remove(directory: str, path: str) -> None:
    """Delete a checkpoint: first rename it out of the listing (atomic), then remove its files."""
    trash = os.path.join(directory, ".old-" + os.path.basename(path) + f"-{os.getpid()}-{id(path)}")
    try:
        os.rename(path, trash)
    except OSError:
        return  # already removed by a concurrent writer
    shutil.rmtree(trash, ignore_errors=True)


def _read_verified(path: str) -> tuple[dict, dict[str, bytes]]:
    """The manifest of the checkpoint at ``path`` and the bytes of its files, each read once and
    verified against the manifest."""
    where = f"checkpoint {path!r}"
    manifest = read_json(os.path.join(path, MANIFEST), "checkpoint manifest")
    expected = {"format", "version", "checksum", "step", "epoch", "random_state", "learning_rate", "extra", "files"}
    if set(manifest) != expected or manifest["format"] != FORMAT:
        raise FormatError(f"{where}: not a hybrid checkpoint manifest")
    if manifest["version"] != VERSION:
        raise FormatError(f"{where}: format version {manifest['version']!r:.20} is not supported (this hybrid "
                          f"reads version {VERSION})")
    for key in ("step", "epoch"):
        if type(manifest[key]) is not int or manifest[key] < 0:
            raise FormatError(f"{where}: {key} must be a non-negative integer")
    state = manifest["random_state"]
    if not (isinstance(state, list) and len(state) == 2 and all(type(s) is int and s >= 0 for s in state)):
        raise FormatError(f"{where}: invalid random_state {state!r:.60}")
    rate = manifest["learning_rate"]
    if rate is not None and (type(rate) not in (int, float) or not math.isfinite(rate)):
        raise FormatError(f"{where}: invalid learning_rate {rate!r:.40}")
    files = manifest["files"]
    if not isinstance(files, dict) or "params.npz" not in files or not set(files) <= set(_FILES):
        raise FormatError(f"{where}: the manifest must list params.npz (and optionally trainer.states)")
    contents = {}
    for name, info in files.items():
        if not isinstance(info, dict) or set(info) != {"bytes", "sha256"} or type(info["bytes"]) is not int:
            raise FormatError(f"{where}: invalid manifest entry for {name!r}")
        data = read_limited(os.path.join(path, name), "checkpoint file", max_bytes=max(info["bytes"], 0))
        if len(data) != info["bytes"] or sha256_hex(data) != info["sha256"]:
            raise FormatError(f"{where}: {name} does not match its checksum in the manifest (corrupted)")
        contents[name] = data
    return manifest, contents


def load_checkpoint(directory: str | os.PathLike, net: Any = None, trainer: Any = None,
                    step: int | None = None) -> dict:
    """Restore the most recently written checkpoint in ``directory`` (or the newest one of ``step``)
    into ``net``, ``trainer`` and hybrid's random state; returns ``{'step', 'epoch', 'extra', 'path'}``.

    The manifest and every file are read once and verified, and the parameters and trainer states
    are checked against ``net`` and ``trainer``, before anything changes. A checkpoint removed while
    it is read (by a concurrent ``save_checkpoint`` with ``keep`` or ``overwrite``) is looked up
    again. Raises FileNotFoundError if there is no such checkpoint, FormatError if it is corrupted,
    ValueError (nothing changed) if it does not fit ``net`` or ``trainer``.
    """
    directory = os.fspath(directory)
    for attempt in range(_RETRIES):
        newest = _newest_per_step(_generations(directory))
        if not newest:
            raise FileNotFoundError(f"load_checkpoint: no checkpoints in {directory!r}")
        if step is not None and step not in newest:
            raise FileNotFoundError(f"load_checkpoint: no checkpoint for step {step}; available: {sorted(newest)}")
        _, path = newest[step] if step is not None else max(newest.values())
        try:
            manifest, contents = _read_verified(path)
            break
        except (FileNotFoundError, NotADirectoryError):
            if attempt == _RETRIES - 1 or os.path.isdir(path):
                raise
    changes = []
    if trainer is not None:
        if "trainer.states" not in contents:
            raise ValueError(f"load_checkpoint: {path!r} was saved without trainer states")
        changes.append(trainer._states_loader(os.path.join(path, "trainer.states"), contents["trainer.states"]))
        if manifest["learning_rate"] is not None and _fixed_learning_rate(trainer) is not None:
            changes.append(functools.partial(trainer.set_learning_rate, manifest["learning_rate"]))
    if net is not None:
        changes.append(net._parameter_loader(os.path.join(path, "params.npz"), contents["params.npz"]))
    for change in changes:
        change()
    _random.set_state(tuple(manifest["random_state"]))
    return {"step": manifest["step"], "epoch": manifest["epoch"], "extra": manifest["extra"], "path": path}
