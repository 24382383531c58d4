"""Training checkpoints: parameters, trainer states, step/epoch and random state in one directory.

Layout::

    directory/ckpt-00000120.g00000003/params.npz        net.save_parameters
                                     /trainer.states    trainer.save_states (when a trainer is given):
                                                        optimizer states and update count (which drives
                                                        lr schedulers)
                                     /checkpoint.json   manifest: step, epoch, random state, learning rate,
                                                        extra, and the size and SHA-256 of each file;
                                                        sealed with its checksum

That is the default backend, ``'npz'``. With ``backend='orbax'`` (hybrid.export.orbax_checkpoint) the
arrays are written by orbax-checkpoint into ``state/``, one piece per shard, possibly asynchronously and by
several processes together; the manifest then also lists the arrays' names, shapes and dtypes.

The generation (``g``) numbers the writes in the directory. A checkpoint is written into a
temporary directory beside the others and renamed to the next generation's name only when
complete (files and directories fsynced); after that it never changes. A crash or a full disk
never leaves a half-written checkpoint and never touches the previous ones, and a reader finds
either a complete checkpoint or none. Loading reads and verifies everything before changing anything.
"""
from __future__ import annotations

import errno
import functools
import logging
import math
import os
import re
import shutil
import time
import threading
from typing import Any, Callable

from .. import random as _random
from ..formats.serialization import FormatError, fsync_directory
from ..formats.checkpoint_backend import Backend, check_file_entry  # noqa: F401 - check_file_entry: also importable from here
from ..formats.jsonfile import MAX_DEPTH, read_json, write_json

__all__ = ["save_checkpoint", "load_checkpoint", "list_checkpoints", "PendingCheckpoint"]

FORMAT = "hybrid-checkpoint"
VERSION = 1
MANIFEST = "checkpoint.json"
_COMMON_KEYS = frozenset({"format", "version", "checksum", "step", "epoch", "random_state", "learning_rate",
                          "extra", "files"})
_NAME = re.compile(r"^ckpt-(\d{8,})(?:\.g(\d{8,}))?$")
_RETRIES = 8
log = logging.getLogger("hybrid.checkpoint")


def _orbax_backend() -> Backend:
    try:
        from .orbax_checkpoint import OrbaxBackend
    except ImportError as exc:
        raise ImportError(f"backend='orbax' needs orbax-checkpoint ({exc}); install it with "
                          "pip install 'hybrid[orbax]'") from exc
    return OrbaxBackend()


_BACKENDS: dict[str, Callable[[], Backend]] = {"npz": Backend, "orbax": _orbax_backend}


def _backend(name: Any, caller: str) -> Backend:
    if not isinstance(name, str) or name not in _BACKENDS:
        raise ValueError(f"{caller}: backend must be one of {sorted(_BACKENDS)}, got {name!r}")
    return _BACKENDS[name]()


class PendingCheckpoint:
    """A checkpoint being written in the background, returned by
    ``save_checkpoint(..., asynchronous=True)``.

    The checkpoint appears in the directory (``list_checkpoints``, ``load_checkpoint``) only once it is
    complete. A later ``save_checkpoint`` or ``load_checkpoint`` of the same directory in this process
    waits for it first, and so does the end of the process (the writing thread is not a daemon).
    """

    def __init__(self, directory: str, step: int, complete: Callable[[], str]):
        self.directory, self.step = directory, step
        self._path: str | None = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, args=(complete,), name=f"hybrid-checkpoint-{step}")
        self._thread.start()

    def _run(self, complete: Callable[[], str]) -> None:
        try:
            self._path = complete()
        except BaseException as exc:  # noqa: BLE001 - raised again by wait_until_finished
            self._error = exc
            log.error("asynchronous checkpoint of step %d in %r failed: %s: %s", self.step, self.directory,
                      type(exc).__name__, exc)

    def done(self) -> bool:
        """True once the write has finished (successfully or not)."""
        return not self._thread.is_alive()

    def wait_until_finished(self) -> str:
        """Block until the checkpoint is complete; return its path. Raises the error that stopped the
        write (the checkpoint then does not exist)."""
        self._thread.join()
        if self._error is not None:
            raise self._error
        return self._path

    def __repr__(self) -> str:
        state = "writing" if not self.done() else ("failed" if self._error else self._path)
        return f"PendingCheckpoint(step={self.step}, {state})"


_pending: dict[str, list[PendingCheckpoint]] = {}
_pending_lock = threading.Lock()
_exit_hook: list[bool] = []


def _wait_for_all_pending() -> None:
    for directory in list(_pending):
        _wait_for_pending(directory)


def _register_pending(handle: PendingCheckpoint) -> None:
    """Remember ``handle`` until a save or load of its directory, or the end of the process, waits for it."""
    with _pending_lock:
        _pending.setdefault(os.path.realpath(handle.directory), []).append(handle)
        if not _exit_hook:
            import concurrent.futures.thread  # noqa: F401 - its exit hook must be registered before ours
            # Hooks registered here run, last registered first, when the main thread ends and before
            # non-daemon threads are joined; concurrent.futures' hook stops the thread pools that the
            # background write still needs, so ours waits for the writes before it.
            getattr(threading, "_register_atexit", lambda hook: None)(_wait_for_all_pending)
            _exit_hook.append(True)


def _wait_for_pending(directory: str) -> None:
    """Wait until this process's asynchronous saves into ``directory`` have finished (their errors
    belong to their handles' ``wait_until_finished``)."""
    with _pending_lock:
        handles = _pending.pop(os.path.realpath(directory), [])
    for handle in handles:
        handle._thread.join()


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
    """``[(step, path), ...]`` of the checkpoints in ``directory``, oldest step first (not verified;
    checkpoints still being written are not listed)."""
    newest = _newest_per_step(_generations(os.fspath(directory)))
    return sorted((step, path) for step, (_, path) in newest.items())


def save_checkpoint(directory: str | os.PathLike, net: Any, trainer: Any = None, step: int = 0, epoch: int = 0,
                    extra: dict | None = None, keep: int | None = None, overwrite: bool = False,
                    backend: str = "npz", asynchronous: bool = False) -> str | PendingCheckpoint:
    """Write a checkpoint of ``step`` into ``directory`` atomically and return its path.

    Each write is a new directory ``ckpt-<step>.g<generation>`` that is never changed afterwards;
    ``overwrite`` writes a new generation of an existing step, then removes the older one, so a
    reader always finds a complete checkpoint. ``extra`` is a JSON-serialisable dict (e.g. a data
    loader position); ``keep`` deletes all but the ``keep`` most recently written checkpoints once
    the new one is complete (never the new one).

    ``backend`` is ``'npz'`` (one ``.npz`` file each for the parameters and the trainer states) or
    ``'orbax'`` (orbax-checkpoint: sharded arrays written shard by shard, by every process of a
    multi-host run, each of which must call ``save_checkpoint``). With ``asynchronous=True``
    (orbax only) the values are taken now and written in the background: the call returns a
    :class:`PendingCheckpoint` whose ``wait_until_finished()`` returns the path.

    Raises FileExistsError if the step exists (unless ``overwrite``), ValueError for invalid arguments
    or an ``extra`` that JSON would not give back unchanged (non-string keys, non-finite numbers,
    other types, deep nesting), ImportError for ``backend='orbax'`` without orbax-checkpoint.
    """
    step, epoch = _non_negative_int("step", step), _non_negative_int("epoch", epoch)
    if keep is not None and (isinstance(keep, bool) or not isinstance(keep, int) or keep < 1):
        raise ValueError(f"save_checkpoint: keep must be a positive integer or None, got {keep!r}")
    _check_extra(extra)
    store = _backend(backend, "save_checkpoint")
    if asynchronous and not store.asynchronous:
        raise ValueError(f"save_checkpoint: backend {store.name!r} cannot save asynchronously; use "
                         "backend='orbax'")
    directory = os.fspath(directory)
    _wait_for_pending(directory)
    os.makedirs(directory, exist_ok=True)
    existing = [path for _, s, path in _generations(directory) if s == step]
    if existing and not overwrite:
        raise FileExistsError(f"save_checkpoint: {existing[-1]!r} exists; pass overwrite=True to replace it")
    manifest = {"format": FORMAT, "version": VERSION, "step": step, "epoch": epoch,
                "random_state": list(_random.get_state()), "learning_rate": _fixed_learning_rate(trainer),
                "extra": extra}
    tmp = store.temporary_directory(directory, step)
    try:
        finish = store.start(tmp, net, trainer)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    complete = functools.partial(_complete, store, directory, tmp, step, manifest, finish, keep)
    if not asynchronous:
        return complete()
    handle = PendingCheckpoint(directory, step, complete)
    _register_pending(handle)
    return handle


def _complete(store: Backend, directory: str, tmp: str, step: int, manifest: dict, finish: Callable[[], dict],
              keep: int | None) -> str:
    """Wait for the backend's write, then (in the publishing process) seal the manifest, publish the
    checkpoint and apply retention. Returns the published path."""
    serial = os.path.basename(tmp)
    final = None
    try:
        try:
            entries = finish()
            if store.is_publisher():
                write_json(os.path.join(tmp, MANIFEST), {**manifest, **entries})
                fsync_directory(tmp)
                final = _publish(directory, tmp, step)
        except BaseException:
            if store.is_publisher():
                shutil.rmtree(tmp, ignore_errors=True)
            raise
        if final is not None:
            _retain(directory, final, step, keep)
    finally:
        store.published(directory, step, serial)
    if final is None:  # another process published it
        newest = _newest_per_step(_generations(directory))
        if step not in newest:
            raise RuntimeError(f"save_checkpoint: the process that publishes checkpoints did not publish step "
                               f"{step} in {directory!r}; see its error")
        final = newest[step][1]
    return final


def _retain(directory: str, final: str, step: int, keep: int | None) -> None:
    """Remove the older writes of ``step`` and, with ``keep``, all but the ``keep`` newest writes."""
    generations = _generations(directory)
    mine = int(_NAME.match(os.path.basename(final)).group(2))  # a concurrent writer may have replaced it
    stale = [path for g, s, path in generations if s == step and g < mine]  # replaced by this write
    if keep is not None:
        by_write = sorted(_newest_per_step(generations).values())  # the newest write of each step
        stale += [path for g, path in by_write[:-keep] if g < mine]
    for path in stale:
        _remove(directory, path)


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


def _read_manifest(path: str) -> dict:
    """The manifest of the checkpoint at ``path`` with its common entries checked (the backend checks
    ``files`` and its own entries)."""
    where = f"checkpoint {path!r}"
    manifest = read_json(os.path.join(path, MANIFEST), "checkpoint manifest")
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise FormatError(f"{where}: not a hybrid checkpoint manifest")
    name = manifest.get("backend", "npz")
    if name not in _BACKENDS:
        raise FormatError(f"{where}: unknown backend {name!r:.40}")
    if manifest["version"] != VERSION:
        raise FormatError(f"{where}: format version {manifest['version']!r:.20} is not supported (this hybrid "
                          f"reads version {VERSION})")
    for key in ("step", "epoch"):
        if type(manifest.get(key)) is not int or manifest[key] < 0:
            raise FormatError(f"{where}: {key} must be a non-negative integer")
    state = manifest.get("random_state")
    if not (isinstance(state, list) and len(state) == 2 and all(type(s) is int and s >= 0 for s in state)):
        raise FormatError(f"{where}: invalid random_state {state!r:.60}")
    rate = manifest.get("learning_rate")
    if rate is not None and (type(rate) not in (int, float) or not math.isfinite(rate)):
        raise FormatError(f"{where}: invalid learning_rate {rate!r:.40}")
    return manifest


def load_checkpoint(directory: str | os.PathLike, net: Any = None, trainer: Any = None,
                    step: int | None = None, backend: str | None = None) -> dict:
    """Restore the most recently written checkpoint in ``directory`` (or the newest one of ``step``)
    into ``net``, ``trainer`` and hybrid's random state; returns ``{'step', 'epoch', 'extra', 'path',
    'backend'}``.

    ``backend`` (``'npz'``, ``'orbax'``) requires the checkpoint to have been written by that backend;
    None takes whichever wrote it. The orbax backend restores every array with the sharding of the
    parameter it goes into (a placed Trainer's rules for parameters not created yet), so a sharded
    checkpoint is read shard by shard; every process of a multi-host run must call it.

    The manifest and every file are read once and verified, and the parameters and trainer states
    are checked against ``net`` and ``trainer``, before anything changes. A checkpoint removed while
    it is read (by a concurrent ``save_checkpoint`` with ``keep`` or ``overwrite``) is looked up
    again; this process's own asynchronous saves into ``directory`` are waited for first. Raises
    FileNotFoundError if there is no such checkpoint, FormatError if it is corrupted, ValueError
    (nothing changed) if it does not fit ``net`` or ``trainer`` or was written by another backend.
    """
    if backend is not None:
        _backend(backend, "load_checkpoint")
    directory = os.fspath(directory)
    _wait_for_pending(directory)
    for attempt in range(_RETRIES):
        # a listing is not atomic: while another process publishes a checkpoint and removes older ones,
        # one listing can see the removed directories but not yet the new one; look again before refusing
        newest = _newest_per_step(_generations(directory))
        last = attempt == _RETRIES - 1
        if not newest:
            if not last:
                time.sleep(0.001 * attempt)
                continue
            raise FileNotFoundError(f"load_checkpoint: no checkpoints in {directory!r}")
        if step is not None and step not in newest:
            if not last:
                time.sleep(0.001 * attempt)
                continue
            raise FileNotFoundError(f"load_checkpoint: no checkpoint for step {step}; available: {sorted(newest)}")
        _, path = newest[step] if step is not None else max(newest.values())
        try:
            manifest = _read_manifest(path)
            found = manifest.get("backend", "npz")
            if backend is not None and found != backend:
                raise ValueError(f"load_checkpoint: {path!r} was written by backend {found!r}, not {backend!r}")
            store = _backend(found, "load_checkpoint")
            expected = _COMMON_KEYS | store.manifest_keys
            if set(manifest) != expected:
                raise FormatError(f"checkpoint {path!r}: not a hybrid checkpoint manifest (keys "
                                  f"{sorted(manifest)[:12]}, expected {sorted(expected)})")
            changes = store.loader(path, manifest, net, trainer)
            break
        except (FileNotFoundError, NotADirectoryError):
            if attempt == _RETRIES - 1 or os.path.isdir(path):
                raise
    if trainer is not None and manifest["learning_rate"] is not None and _fixed_learning_rate(trainer) is not None:
        changes.append(functools.partial(trainer.set_learning_rate, manifest["learning_rate"]))
    for change in changes:
        change()
    _random.set_state(tuple(manifest["random_state"]))
    return {"step": manifest["step"], "epoch": manifest["epoch"], "extra": manifest["extra"], "path": path,
            "backend": store.name}
