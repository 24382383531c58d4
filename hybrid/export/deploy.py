"""Deployment export through ``jax.export``: serialised StableHLO that runs with only ``jax`` installed.

``export_deployment(net, "net.jaxexport", x)`` writes the predict-mode forward,
parameters embedded as constants, to ``net.jaxexport`` and its SHA-256 to
``net.jaxexport.sha256`` (``sha256sum -c`` format). Anywhere with jax::

    exported = jax.export.deserialize(bytearray(open("net.jaxexport", "rb").read()))
    y = exported.call(x)
"""
from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from typing import Any, Callable, Sequence

import jax

from .._core import functional as _functional
from .. import autograd
from ..formats.serialization import FormatError, atomic_write, read_limited
from ..formats.jsonfile import sha256_hex

__all__ = ["export_deployment", "load_deployment"]


def export_deployment(block: Any, path: str | os.PathLike, *example_inputs: Any, dynamic_batch: bool = False,
                      platforms: Sequence[str] | None = None) -> str:
    """Serialise ``block``'s predict-mode forward for inputs shaped like ``example_inputs``.

    With ``dynamic_batch`` the leading axis of every input is the symbolic dimension
    ``b`` (any batch size at run time). ``platforms`` (e.g. ``('cpu', 'cuda')``)
    defaults to the current backend. Returns ``path``. Raises RuntimeError for
    uninitialised parameters; JAX's errors for code that cannot take a symbolic batch.
    """
    params = block._unique_params()
    uninitialised = [p.name for p in params if not p.is_initialized]
    if uninitialised:
        raise RuntimeError(f"export_deployment: parameters {uninitialised[:5]} are not initialised; initialise the "
                           "block and call it once first")
    values = {p: p.own_data for p in params}

    def forward(*inputs: Any) -> Any:
        with _functional.frame(values, frame_type=_functional.TraceFrame):
            return block(*inputs)

    batch = jax.export.symbolic_shape("b") if dynamic_batch else None
    specs = []
    for x in example_inputs:
        shape = tuple(x.shape)
        if batch is not None:
            if not shape:
                raise ValueError("export_deployment: dynamic_batch needs inputs with a leading batch axis")
            shape = batch + shape[1:]
        specs.append(jax.ShapeDtypeStruct(shape, x.dtype))
    with autograd.pause():
        exported = jax.export.export(jax.jit(forward), platforms=platforms)(*specs)
    try:
        data = bytes(exported.serialize())
    except ImportError as exc:
        raise ImportError(f"export_deployment needs the 'flatbuffers' package (pip install 'hybrid[deploy]'): "
                          f"{exc}") from exc
    path = os.fspath(path)
    name, checksums = os.path.basename(path), path + ".sha256"
    line = f"{sha256_hex(data)}  {name}\n"
    # Every moment leaves a loadable deployment: the checksum file first lists the new digest and the
    # old one, then the new file replaces the old, then the checksum file lists the new digest only.
    previous = []
    if os.path.exists(path):
        try:
            previous = _recorded_digests(read_limited(checksums, "checksum file", max_bytes=4096), name)
        except (OSError, FormatError):
            pass  # no usable checksum file: the old deployment was not loadable anyway
    if previous:
        transition = line + "".join(f"{digest}  {name}\n" for digest in previous)
        atomic_write(checksums, lambda handle: handle.write(transition.encode()))
    atomic_write(path, lambda handle: handle.write(data))
    atomic_write(checksums, lambda handle: handle.write(line.encode()))
    return path


def _recorded_digests(text: bytes, name: str) -> list[str]:
    """The SHA-256 digests that a checksum file's ``text`` (``sha256sum`` format) lists for the file ``name``."""
    digests = []
    for entry in text.decode("ascii", "replace").splitlines():
        parts = entry.split()
        if len(parts) == 2 and parts[1].lstrip("*") == name and len(parts[0]) == 64:
            digests.append(parts[0].lower())
    return digests


def load_deployment(path: str | os.PathLike, check_compile: bool = True) -> Callable:
    """The exported function (``jax.export.Exported.call``) after checking the ``.sha256`` file.

    A damaged or crafted module can crash XLA's compiler (a segmentation fault) even when its
    checksum matches, so with ``check_compile`` (the default) the module is first deserialised
    and compiled in a child process (a second or two); one that crashes or fails there is refused.

    Raises FileNotFoundError, or FormatError when the checksum does not match, the file is not a
    serialised export, or its module does not compile.
    """
    path = os.fspath(path)
    data = read_limited(path, "deployment file")
    checksums = read_limited(path + ".sha256", "checksum file", max_bytes=4096)
    if sha256_hex(data) not in _recorded_digests(checksums, os.path.basename(path)):
        raise FormatError(f"deployment file {path!r} does not match its checksum in {path + '.sha256'!r}")
    if check_compile:
        _compile_in_child(data, path)
    try:
        exported = jax.export.deserialize(bytearray(data))
    except Exception as exc:  # the checksum matched, so this is a file from another tool or version
        raise FormatError(f"deployment file {path!r} is not a serialised jax.export: {exc}") from None
    return exported.call


# The checking child dies with the process that started it (no orphan keeps compiling after its parent
# is killed) and is bounded in CPU time as well as in wall time.
_GUARD = """
import os, sys
parent, cpu_seconds = int(sys.argv[1]), int(sys.argv[2])
try:
    import resource
    resource.setrlimit(resource.RLIMIT_CPU, (cpu_seconds, cpu_seconds + 5))
except (ImportError, ValueError, OSError):
    pass
try:
    import ctypes
    ctypes.CDLL(None).prctl(1, 9)  # PR_SET_PDEATHSIG = 1, SIGKILL = 9 (Linux)
except (OSError, AttributeError):
    import threading, time
    def _watch_parent():
        while os.getppid() == parent:
            time.sleep(0.5)
        os._exit(1)
    threading.Thread(target=_watch_parent, daemon=True).start()
if os.getppid() != parent:
    os._exit(1)
"""

_CHILD = """
import sys
import jax
exported = jax.export.deserialize(bytearray(sys.stdin.buffer.read()))
shapes = [jax.ShapeDtypeStruct(tuple(d if isinstance(d, int) else 2 for d in a.shape), a.dtype)
          for a in exported.in_avals]
jax.jit(exported.call).lower(*shapes).compile()
"""

CHECK_BASE_SECONDS = 20.0
CHECK_SECONDS_PER_MIB = 10.0


def check_timeout(nbytes: int) -> float:
    """Seconds the compile check of a ``nbytes`` module may take: a start-up allowance plus a time
    proportional to the module's size (a healthy module compiles in a few seconds per MiB of
    constants), capped at 600 s."""
    return min(600.0, CHECK_BASE_SECONDS + CHECK_SECONDS_PER_MIB * nbytes / 2 ** 20)


def _compile_in_child(data: bytes, path: str) -> None:
    """Deserialise and compile ``data`` in a child process; FormatError if that crashes, fails, or
    outlasts :func:`check_timeout`."""
    env = dict(os.environ, JAX_PLATFORMS=os.environ.get("JAX_PLATFORMS", "cpu"))
    timeout = check_timeout(len(data))
    command = [sys.executable, "-c", _GUARD + _CHILD, str(os.getpid()), str(int(2 * timeout) + 1)]
    try:
        child = subprocess.run(command, input=data, capture_output=True, env=env, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise FormatError(f"deployment file {path!r}: compiling its module did not finish in {timeout:.0f} s (the "
                          "limit for its size); the module is damaged or forged") from None
    if hasattr(signal, "SIGXCPU") and child.returncode == -signal.SIGXCPU:
        raise FormatError(f"deployment file {path!r}: compiling its module ran past its CPU-time limit; the module "
                          "is damaged or forged")
    if child.returncode < 0:
        name = signal.Signals(-child.returncode).name if -child.returncode in signal.Signals._value2member_map_ \
            else str(-child.returncode)
        raise FormatError(f"deployment file {path!r} crashed the compiler ({name}) in a checking process: the "
                          "module is damaged or forged")
    if child.returncode != 0:
        lines = child.stderr.decode("utf-8", "replace").strip().splitlines() or ["no message"]
        errors = [line for line in lines if re.match(r"^[\w.]+(Error|Exception)\b", line)]
        raise FormatError(f"deployment file {path!r} is not a loadable jax.export module: "
                          f"{(errors or lines)[-1][:300]}")
