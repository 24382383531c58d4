"""The persistent compilation cache: compiled XLA programs kept on disk, so a second run starts warm.

``import hybrid`` turns on JAX's persistent compilation cache in the user's cache directory:

- ``$HYBRID_COMPILATION_CACHE`` when set (``0``, ``off``, ``false`` or ``no`` turn the cache off);
- otherwise ``$XDG_CACHE_HOME/hybrid/xla`` or ``~/.cache/hybrid/xla`` (Linux and other POSIX),
  ``~/Library/Caches/hybrid/xla`` (macOS), ``%LOCALAPPDATA%\\hybrid\\xla`` (Windows).

The directory is capped at ``DEFAULT_MAX_SIZE`` (1 GiB), least recently used entries go first (JAX does
this with the ``filelock`` package; without it, the oldest entries are removed when a process starts).
A user who configured JAX's cache (``JAX_COMPILATION_CACHE_DIR`` or
``jax.config.update('jax_compilation_cache_dir', ...)`` before ``import hybrid``, or
``jax_enable_compilation_cache`` off) keeps that configuration untouched.

Safety comes from JAX's cache: the key hashes the program, the jaxlib version, the backend's platform and
version, the XLA flags and the compile options, so another jaxlib or device never loads an entry made by
this one; an entry that cannot be read (truncated, corrupted) gives a warning and the program is compiled
again; with ``filelock`` reads and writes hold a lock, so processes compiling at once both succeed.
"""
from __future__ import annotations

import logging
import os
import sys
import tempfile
import threading
import warnings
from dataclasses import dataclass
from pathlib import Path

import jax
from jax import monitoring
from jax.experimental.compilation_cache import compilation_cache as _jax_cache

__all__ = ["CompilationCacheSetting", "set_compilation_cache", "get_compilation_cache", "default_cache_dir",
           "DEFAULT_MAX_SIZE", "ENV_VAR"]

ENV_VAR = "HYBRID_COMPILATION_CACHE"
DEFAULT_MAX_SIZE = 1 << 30
_OFF_WORDS = {"0", "off", "false", "no", "none", "disable", "disabled"}

# Every compiled program is saved. Measured on CPU (2 cores, jax 0.10.2): the smallest programs (one
# elementwise op) compile in 45-100 ms and load from the cache in 2-7 ms; a 1-16 layer MLP gradient
# compiles in 0.2-0.7 s and loads in 4-60 ms; writing an entry adds no measurable time to a compile.
# A read beats a compile at every size, so no program is too small to keep.
MIN_COMPILE_TIME_SECS = 0.0

log = logging.getLogger("hybrid.compile")


@dataclass(frozen=True)
class CompilationCacheSetting:
    """Where compiled programs are kept.

    path: the cache directory, or None when the cache is off.
    max_size: the directory's cap in bytes, or None when uncapped.
    source: who chose it: ``'default'``, ``'environment'`` (``$HYBRID_COMPILATION_CACHE``), ``'api'``
    (``set_compilation_cache``) or ``'jax'`` (the user configured JAX's cache themselves).
    hits: programs loaded from the cache in this process so far.
    """
    path: str | None
    max_size: int | None
    source: str
    hits: int = 0


_lock = threading.Lock()
_state: dict = {"path": None, "max_size": None, "source": "default", "announced": False, "hits": 0}


def default_cache_dir() -> str:
    """The platform's user cache directory with ``hybrid/xla`` appended (see the module docstring)."""
    if sys.platform == "win32":
        base = os.environ.get("LOCALAPPDATA") or os.path.join(os.path.expanduser("~"), "AppData", "Local")
    elif sys.platform == "darwin":
        base = os.path.join(os.path.expanduser("~"), "Library", "Caches")
    else:
        base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "hybrid", "xla")


def _filelock_available() -> bool:
    try:
        import filelock  # noqa: F401
    except ImportError:
        return False
    return True


def _unwritable_reason(path: str) -> str | None:
    """Why ``path`` cannot hold cache entries (created if missing), or None when it can."""
    try:
        os.makedirs(path, exist_ok=True)
        fd, probe = tempfile.mkstemp(dir=path, prefix=".probe-")
        os.close(fd)
        os.remove(probe)
    except OSError as exc:
        return f"{type(exc).__name__}: {exc}"
    return None


def _trim(path: str, max_size: int) -> None:
    """Delete the least recently written files of ``path`` until it holds at most ``max_size`` bytes."""
    entries = []
    try:
        with os.scandir(path) as listing:
            for entry in listing:
                if entry.is_file(follow_symlinks=False):
                    stat = entry.stat(follow_symlinks=False)
                    entries.append((stat.st_mtime, stat.st_size, entry.path))
    except OSError:
        return
    total = sum(size for _, size, _ in entries)
    for _, size, file in sorted(entries):
        if total <= max_size:
            break
        try:
            os.remove(file)
            total -= size
        except OSError:
            pass


def _apply(path: str | None, max_size: int | None, source: str) -> CompilationCacheSetting:
    """Point JAX's cache at ``path`` (None: off) and record the setting."""
    if path is not None:
        reason = _unwritable_reason(path)
        if reason is not None:
            warnings.warn(f"hybrid: the compilation cache directory {path!r} cannot be written ({reason}); "
                          f"compiled programs will not be saved across runs. Set {ENV_VAR} to a writable "
                          f"directory, or to 0 to turn the cache off.", RuntimeWarning, stacklevel=3)
            path = None
    if path is not None and max_size is not None and not _filelock_available():
        # JAX caps its cache only with filelock; without it, trim the directory once per process instead
        log.debug("compilation cache: the filelock package is missing; %s is trimmed to its cap at start", path)
        _trim(path, max_size)
        max_size = None
    with _lock:
        _jax_cache.reset_cache()  # JAX opens its cache once per process; the next compile reopens it here
        jax.config.update("jax_compilation_cache_dir", path)
        jax.config.update("jax_enable_compilation_cache", path is not None)
        if path is not None:
            jax.config.update("jax_compilation_cache_max_size", -1 if max_size is None else int(max_size))
            jax.config.update("jax_persistent_cache_min_compile_time_secs", MIN_COMPILE_TIME_SECS)
            jax.config.update("jax_persistent_cache_min_entry_size_bytes", -1)
        _state.update(path=path, max_size=max_size if path is not None else None, source=source,
                      announced=False)
    return get_compilation_cache()


def set_compilation_cache(path: str | os.PathLike | None, max_size: int | None = DEFAULT_MAX_SIZE
                          ) -> CompilationCacheSetting:
    """Keep compiled programs in the directory ``path`` (created if missing), or turn the cache off
    with ``None``; ``max_size`` caps the directory in bytes (None: no cap). Programs already compiled
    in this process stay in memory; the next compile reads and writes the new place.

    Returns the new setting. Raises TypeError for a path that is not a string or path, ValueError for a
    ``max_size`` that is not a positive integer or None. An unwritable directory warns and turns the
    cache off.
    """
    if path is not None and not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"set_compilation_cache: path must be a directory (str or os.PathLike) or None, "
                        f"got {type(path).__name__}")
    if max_size is not None and (isinstance(max_size, bool) or not isinstance(max_size, int) or max_size <= 0):
        raise ValueError(f"set_compilation_cache: max_size must be a positive number of bytes or None, "
                         f"got {max_size!r}")
    resolved = None if path is None else str(Path(os.fspath(path)).expanduser().resolve())
    return _apply(resolved, max_size, "api")


def get_compilation_cache() -> CompilationCacheSetting:
    """The current setting, read from JAX's configuration (so a directory set through JAX shows as
    ``source='jax'``)."""
    jax_path = jax.config.jax_compilation_cache_dir if jax.config.jax_enable_compilation_cache else None
    with _lock:
        if jax_path != _state["path"]:
            size = jax.config.jax_compilation_cache_max_size
            return CompilationCacheSetting(jax_path, None if size == -1 else size, "jax", _state["hits"])
        return CompilationCacheSetting(_state["path"], _state["max_size"], _state["source"], _state["hits"])


def _from_environment() -> None:
    """The setting at import: the user's JAX configuration if any, else ``$HYBRID_COMPILATION_CACHE``,
    else the default directory."""
    if jax.config.jax_compilation_cache_dir is not None or not jax.config.jax_enable_compilation_cache:
        size = jax.config.jax_compilation_cache_max_size
        with _lock:
            _state.update(path=jax.config.jax_compilation_cache_dir, max_size=None if size == -1 else size,
                          source="jax")
        return
    value = os.environ.get(ENV_VAR, "").strip()
    if value.lower() in _OFF_WORDS:
        _apply(None, None, "environment")
    elif value:
        _apply(str(Path(value).expanduser().resolve()), DEFAULT_MAX_SIZE, "environment")
    else:
        _apply(default_cache_dir(), DEFAULT_MAX_SIZE, "default")


def _on_event(event: str, **_: object) -> None:
    if not event.startswith("/jax/compilation_cache/"):
        return
    if event == "/jax/compilation_cache/cache_hits":
        with _lock:
            _state["hits"] += 1
    elif event == "/jax/compilation_cache/tasks_using_cache":
        with _lock:
            if _state["announced"]:
                return
            _state["announced"] = True
        setting = get_compilation_cache()
        cap = "no size limit" if setting.max_size is None else f"at most {setting.max_size / 2**30:.3g} GiB"
        log.info("compilation cache: compiled programs are kept in %s (%s); %s=0 turns it off, "
                 "%s=<dir> moves it", setting.path, cap, ENV_VAR, ENV_VAR)


monitoring.register_event_listener(_on_event)
_from_environment()
