"""Training checkpoints: parameters, trainer states, step/epoch and random state in one directory.

Layout::

    directory/ckpt-00000120/params.npz        net.save_parameters
                           /trainer.states    trainer.save_states (when a trainer is given): optimizer
                                              states and update count (which drives lr schedulers)
                           /checkpoint.json   manifest: step, epoch, random state, learning rate, extra,
                                              and the size and SHA-256 of each file; sealed with its checksum

A checkpoint is written into a temporary directory beside the others and renamed
into place only when complete (files and directories fsynced), so a crash or a
full disk never leaves a half-written checkpoint and never touches the previous
ones. Loading verifies the manifest and every file's checksum before changing anything.
"""
from __future__ import annotations

import json
import math
import os
import re
import shutil
import tempfile
from typing import Any

from .. import random as _random
from ..serialization import FormatError, fsync_directory, read_limited
from .jsonfile import read_json, sha256_hex, write_json

__all__ = ["save_checkpoint", "load_checkpoint", "list_checkpoints"]

FORMAT = "hybrid-checkpoint"
VERSION = 1
MANIFEST = "checkpoint.json"
_FILES = ("params.npz", "trainer.states")
_NAME = re.compile(r"^ckpt-(\d{8,})$")


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


def list_checkpoints(directory: str | os.PathLike) -> list[tuple[int, str]]:
    """``[(step, path), ...]`` of the checkpoints in ``directory``, oldest step first (not verified)."""
    directory = os.fspath(directory)
    if not os.path.isdir(directory):
        return []
    found = []
    for name in os.listdir(directory):
        match = _NAME.match(name)
        if match and os.path.isdir(os.path.join(directory, name)):
            found.append((int(match.group(1)), os.path.join(directory, name)))
    return sorted(found)


def save_checkpoint(directory: str | os.PathLike, net: Any, trainer: Any = None, step: int = 0, epoch: int = 0,
                    extra: dict | None = None, keep: int | None = None, overwrite: bool = False) -> str:
    """Write checkpoint ``directory/ckpt-<step>`` atomically and return its path.

    ``extra`` is any JSON-serialisable dict (e.g. a data loader position); ``keep``
    deletes all but the newest ``keep`` checkpoints after the new one is complete.
    Raises FileExistsError if the step exists (unless ``overwrite``), ValueError
    for invalid arguments or an ``extra`` that is not finite JSON.
    """
    step, epoch = _non_negative_int("step", step), _non_negative_int("epoch", epoch)
    if keep is not None and (isinstance(keep, bool) or not isinstance(keep, int) or keep < 1):
        raise ValueError(f"save_checkpoint: keep must be a positive integer or None, got {keep!r}")
    try:
        json.dumps(extra, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"save_checkpoint: extra must be JSON-serialisable with finite numbers ({exc})") from None
    directory = os.fspath(directory)
    os.makedirs(directory, exist_ok=True)
    final = os.path.join(directory, f"ckpt-{step:08d}")
    if os.path.exists(final) and not overwrite:
        raise FileExistsError(f"save_checkpoint: {final!r} exists; pass overwrite=True to replace it")
    tmp = tempfile.mkdtemp(prefix=f".tmp-ckpt-{step:08d}-", dir=directory)
    old = None
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
        if os.path.exists(final):
            old = tempfile.mkdtemp(prefix=f".old-ckpt-{step:08d}-", dir=directory)
            os.replace(final, os.path.join(old, "ckpt"))
        os.replace(tmp, final)
        fsync_directory(directory)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        if old is not None and not os.path.exists(final):
            os.replace(os.path.join(old, "ckpt"), final)
        raise
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)
    if keep is not None:
        for _, path in list_checkpoints(directory)[:-keep]:
            shutil.rmtree(path, ignore_errors=True)
    return final


def _read_manifest(path: str) -> dict:
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
    for name, info in files.items():
        if not isinstance(info, dict) or set(info) != {"bytes", "sha256"} or type(info["bytes"]) is not int:
            raise FormatError(f"{where}: invalid manifest entry for {name!r}")
        data = read_limited(os.path.join(path, name), "checkpoint file", max_bytes=max(info["bytes"], 0))
        if len(data) != info["bytes"] or sha256_hex(data) != info["sha256"]:
            raise FormatError(f"{where}: {name} does not match its checksum in the manifest (corrupted)")
    return manifest


def load_checkpoint(directory: str | os.PathLike, net: Any = None, trainer: Any = None,
                    step: int | None = None) -> dict:
    """Restore the newest checkpoint in ``directory`` (or the one for ``step``) into ``net``,
    ``trainer`` and hybrid's random state; returns ``{'step', 'epoch', 'extra', 'path'}``.

    Every file is verified against the manifest before anything changes. Raises
    FileNotFoundError if there is no such checkpoint, FormatError if it is corrupted.
    """
    found = dict(list_checkpoints(directory))
    if not found:
        raise FileNotFoundError(f"load_checkpoint: no checkpoints in {os.fspath(directory)!r}")
    if step is None:
        step = max(found)
    if step not in found:
        raise FileNotFoundError(f"load_checkpoint: no checkpoint for step {step}; available: {sorted(found)}")
    path = found[step]
    manifest = _read_manifest(path)
    if trainer is not None:
        if "trainer.states" not in manifest["files"]:
            raise ValueError(f"load_checkpoint: {path!r} was saved without trainer states")
        trainer.load_states(os.path.join(path, "trainer.states"))
        if manifest["learning_rate"] is not None and _fixed_learning_rate(trainer) is not None:
            trainer.set_learning_rate(manifest["learning_rate"])
    if net is not None:
        net.load_parameters(os.path.join(path, "params.npz"))
    _random.set_state(tuple(manifest["random_state"]))
    return {"step": manifest["step"], "epoch": manifest["epoch"], "extra": manifest["extra"], "path": path}
