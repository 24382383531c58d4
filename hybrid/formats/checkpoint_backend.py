"""The base of checkpoint backends (and the default one, ``'npz'``): how the arrays of one checkpoint are
written into, and read from, its directory. :mod:`hybrid.export.checkpoint` names, publishes and lists
checkpoints and picks a backend by name."""
from __future__ import annotations

import os
import tempfile
from typing import Any, Callable

from .serialization import FormatError, read_limited
from .jsonfile import sha256_hex

__all__ = ["Backend", "check_file_entry"]


class Backend:
    """How the arrays of a checkpoint are written into, and read from, its directory.

    ``checkpoint.py`` names, publishes, retains and lists checkpoints and writes the common manifest
    entries; a backend writes and reads the files inside one checkpoint. This class is the default
    backend, ``'npz'``: ``params.npz`` (``net.save_parameters``) and ``trainer.states``
    (``trainer.save_states``), written by this process alone.
    """

    name = "npz"
    #: whether ``save_checkpoint(..., asynchronous=True)`` is supported
    asynchronous = False
    #: manifest keys of this backend besides the common ones
    manifest_keys: frozenset = frozenset()
    _FILES = ("params.npz", "trainer.states")

    def temporary_directory(self, directory: str, step: int) -> str:
        """A new empty directory in ``directory`` to write the checkpoint into (the same one in every
        process that writes together)."""
        return tempfile.mkdtemp(prefix=f".tmp-ckpt-{step:08d}-", dir=directory)

    def is_publisher(self) -> bool:
        """Whether this process writes the manifest, publishes and removes checkpoints."""
        return True

    def start(self, tmp: str, net: Any, trainer: Any) -> Callable[[], dict]:
        """Start writing the arrays of ``net`` and ``trainer`` into ``tmp``; the values are taken now.
        Returns the function that waits until they are written and gives the backend's manifest
        entries (``files``: relative path -> ``{'bytes', 'sha256'}``, and ``manifest_keys``)."""
        net.save_parameters(os.path.join(tmp, "params.npz"))
        if trainer is not None:
            trainer.save_states(os.path.join(tmp, "trainer.states"))
        files = {}
        for name in sorted(os.listdir(tmp)):
            data = read_limited(os.path.join(tmp, name), "checkpoint file")
            files[name] = {"bytes": len(data), "sha256": sha256_hex(data)}
        return lambda: {"files": files}

    def published(self, directory: str, step: int, serial: str) -> None:
        """Called in every writing process once the publisher has published (or failed to)."""

    def loader(self, path: str, manifest: dict, net: Any, trainer: Any) -> list[Callable[[], None]]:
        """Read and verify the files of the checkpoint at ``path`` and check them against ``net`` and
        ``trainer`` (either may be None); return the changes that apply them (which cannot fail).
        Raises FormatError for a corrupted checkpoint, FileNotFoundError for a missing file,
        ValueError when it does not fit ``net`` or ``trainer``."""
        where = f"checkpoint {path!r}"
        files = manifest["files"]
        if not isinstance(files, dict) or "params.npz" not in files or not set(files) <= set(self._FILES):
            raise FormatError(f"{where}: the manifest must list params.npz (and optionally trainer.states)")
        contents = {}
        for name, info in files.items():
            check_file_entry(where, name, info)
            data = read_limited(os.path.join(path, name), "checkpoint file", max_bytes=max(info["bytes"], 0))
            if len(data) != info["bytes"] or sha256_hex(data) != info["sha256"]:
                raise FormatError(f"{where}: {name} does not match its checksum in the manifest (corrupted)")
            contents[name] = data
        changes = []
        if trainer is not None:
            if "trainer.states" not in contents:
                raise ValueError(f"load_checkpoint: {path!r} was saved without trainer states")
            changes.append(trainer.states_loader(os.path.join(path, "trainer.states"), contents["trainer.states"]))
        if net is not None:
            changes.append(net._parameter_loader(os.path.join(path, "params.npz"), contents["params.npz"]))
        return changes


def check_file_entry(where: str, name: Any, info: Any) -> None:
    """Raise FormatError unless ``info`` is a manifest file entry ``{'bytes': int, 'sha256': str}``."""
    if not isinstance(info, dict) or set(info) != {"bytes", "sha256"} or type(info["bytes"]) is not int or \
            not isinstance(info["sha256"], str):
        raise FormatError(f"{where}: invalid manifest entry for {name!r}")
