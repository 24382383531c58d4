"""``mxnet.profiler``: MXNet's profiler API over JAX's profiler (``jax.profiler.start_trace``/``stop_trace``).

    mx.profiler.set_config(profile_all=True, aggregate_stats=True, filename="profile.json")
    mx.profiler.set_state("run")
    ...                                   # the code to profile
    mx.profiler.set_state("stop")
    mx.profiler.dump()                    # writes profile.json
    print(mx.profiler.dumps())            # a table of aggregate statistics

**Where the trace lands.** Each stretch between ``set_state('run')`` (or ``resume()``) and
``set_state('stop')`` (or ``pause()``, ``dump()``) is one JAX trace session, written when it stops into
``<filename without .json>_trace/plugins/profile/<session>/`` (``profile_trace/...`` by default):

- ``*.xplane.pb``: XLA's trace, for TensorBoard's profile tab (``tensorboard --logdir profile_trace``; viewing
  needs the optional package ``tensorboard-plugin-profile``, or ``xprof``; writing needs nothing extra);
- ``perfetto_trace.json.gz`` (and ``*.trace.json.gz``): the same events as a Chrome trace, for
  https://ui.perfetto.dev or ``chrome://tracing``;
- ``memory.prof`` with ``profile_memory=True``: JAX's device memory profile (pprof) when the session stops.

``dump()`` also writes ``filename`` itself: the Chrome-trace JSON (``{"traceEvents": [...]}``) of every session
since the last dump, as MXNet writes ``profile.json``, so ``chrome://tracing`` opens it as before.

**How it differs from MXNet's trace.** MXNet records its own operators, engine and C API calls; JAX records
what XLA runs (compiled programs and their ops, on the host and on each device) and JAX's runtime (dispatch,
compilation: ``profile_symbolic``/``imperative``/``api``/``all`` turn on its detailed host tracing); Python
calls only with hybrid's ``set_config(profile_python=True)``, which slows the program many times over.
Operator names are XLA's (``fusion.3``, ``dot.1``), not MXNet's (``FullyConnected``). ``scope(name)`` is a
named time range and, used inside a function JAX traces (a HybridBlock's ``forward``, a ``jax.jit``
function), names the ops traced in it (``jax.named_scope``). Tasks, Frames and Events are time ranges
(``jax.profiler.TraceAnnotation``; a Frame is a ``StepTraceAnnotation``, which TensorBoard shows as steps);
Counter values and Markers are zero-length ranges carrying the value; all are named ``<domain>:<name>`` (the
Chrome trace shows ``<name>``, with ``long_name`` the full one). Chrome counter tracks, ``continuous_dump``
(the trace is written when a session stops) and a ``'server'`` process do not exist here. ``dumps()``
aggregates the time ranges above (measured in Python) and, after a session stops, the events of its trace by
name (Python calls left out); it needs ``aggregate_stats=True``, as in MXNet. ``start()``, ``stop()`` and
``scope()`` are Gluon 2.0's names, kept here as well.
"""
from __future__ import annotations

import contextlib
import gzip
import json
import math
import os
import threading
import time
import warnings
from typing import Any, Iterator

import jax

from ..formats import serialization
from .base import MXNetError

__all__ = ["set_config", "set_state", "start", "stop", "pause", "resume", "dump", "dumps", "scope", "get_state",
           "trace_directory", "Domain", "Task", "Frame", "Event", "Counter", "Marker", "profiler_set_config",
           "profiler_set_state", "dump_profile"]

_DEFAULTS = {"profile_all": False, "profile_symbolic": True, "profile_imperative": True, "profile_memory": True,
             "profile_api": True, "filename": "profile.json", "continuous_dump": True, "dump_period": 1.0,
             "aggregate_stats": False, "profile_process": "worker", "profile_python": False}
_BOOLEAN = {k for k, v in _DEFAULTS.items() if isinstance(v, bool)}
_SORT_KEYS = ("total", "avg", "min", "max", "count")


class _Stat:
    """Count, total, min and max of the durations (ms) recorded under one name."""

    __slots__ = ("count", "total", "min", "max", "last")

    def __init__(self) -> None:
        self.count, self.total, self.min, self.max, self.last = 0, 0.0, math.inf, 0.0, None

    def add(self, ms: float, last: Any = None) -> None:
        self.count += 1
        self.total += ms
        self.min, self.max = min(self.min, ms), max(self.max, ms)
        self.last = last

    def key(self, sort_by: str) -> float:
        return {"total": self.total, "avg": self.total / max(self.count, 1), "min": self.min, "max": self.max,
                "count": self.count}[sort_by]


class _Profiler:
    """The process's profiler: its configuration, the JAX trace session in progress and the statistics."""

    def __init__(self) -> None:
        self.config = dict(_DEFAULTS)
        self.session: str | None = None  # the JAX trace session in progress
        self.paused = False
        self.undumped: list[str] = []  # session folders written since the last dump
        self.stats: dict[str, dict[str, _Stat]] = {}
        self.lock = threading.Lock()
        self.count = 0

    @property
    def running(self) -> bool:
        return self.session is not None or self.paused

    def trace_directory(self) -> str:
        return os.path.splitext(os.fspath(self.config["filename"]))[0] + "_trace"

    def start_session(self) -> None:
        options = jax.profiler.ProfileOptions()
        self.count += 1
        session = f"{time.strftime('%Y_%m_%d_%H_%M_%S')}_{os.getpid()}_{self.count}"
        options.session_id = session
        config = self.config
        options.python_tracer_level = 1 if config["profile_python"] else 0
        everything = any(config[k] for k in ("profile_all", "profile_symbolic", "profile_imperative", "profile_api"))
        options.host_tracer_level = 2 if everything else 1
        try:
            jax.profiler.start_trace(self.trace_directory(), create_perfetto_trace=True, profiler_options=options)
        except RuntimeError as exc:
            raise MXNetError(f"profiler.set_state('run'): JAX's profiler did not start ({exc}); is a "
                             "jax.profiler trace already running in this process?") from None
        self.session = session

    def stop_session(self) -> None:
        session, self.session = self.session, None
        if session is None:
            return
        jax.effects_barrier()  # the work dispatched inside the session is in its trace
        jax.profiler.stop_trace()
        folder = os.path.join(self.trace_directory(), "plugins", "profile", session)
        if self.config["profile_memory"] or self.config["profile_all"]:
            os.makedirs(folder, exist_ok=True)
            jax.profiler.save_device_memory_profile(os.path.join(folder, "memory.prof"))
        self.undumped.append(folder)
        if self.config["aggregate_stats"]:
            self.aggregate_trace(folder)

    def record(self, section: str, name: str, ms: float, last: Any = None) -> None:
        """Add one duration to the statistics (kept only while running, with ``aggregate_stats``)."""
        if self.running and self.config["aggregate_stats"]:
            with self.lock:
                self.stats.setdefault(section, {}).setdefault(name, _Stat()).add(ms, last)

    def aggregate_trace(self, folder: str) -> None:
        """Add the XLA and runtime events of a stopped session (all but Python calls) to the statistics."""
        for path in _files(folder, ".xplane.pb"):
            data = jax.profiler.ProfileData.from_file(path)
            for plane in data.planes:
                section = f"trace {plane.name}"
                with self.lock:
                    table = self.stats.setdefault(section, {})
                    for line in plane.lines:
                        for event in line.events:
                            name = event.name
                            if not name.startswith("$"):  # "$file.py:12 fn": the Python tracer's calls
                                table.setdefault(name, _Stat()).add(event.duration_ns / 1e6)
                if not table:
                    del self.stats[section]


_profiler = _Profiler()


def _files(folder: str, suffix: str) -> list[str]:
    try:
        return sorted(os.path.join(folder, n) for n in os.listdir(folder) if n.endswith(suffix))
    except FileNotFoundError:
        return []


# -- configuration and state --------------------------------------------------------------------------------
def set_config(**kwargs: Any) -> None:
    """Configure the profiler (keyword arguments only): ``profile_all``, ``profile_symbolic``,
    ``profile_imperative``, ``profile_memory``, ``profile_api``, ``filename``, ``continuous_dump``,
    ``dump_period``, ``aggregate_stats``, ``profile_process``, and hybrid's ``profile_python`` (trace every
    Python call too: many times slower). A running session keeps its settings; the next one uses the new ones."""
    unknown = sorted(set(kwargs) - set(_DEFAULTS))
    if unknown:
        raise ValueError(f"profiler.set_config: unknown argument(s) {unknown}; possible arguments: "
                         f"{', '.join(_DEFAULTS)}")
    for name, value in kwargs.items():
        if name in _BOOLEAN:
            if isinstance(value, str) and value.lower() in ("true", "false", "1", "0"):
                value = value.lower() in ("true", "1")
            elif not isinstance(value, (bool, int)):
                raise TypeError(f"profiler.set_config: {name} must be a boolean, got {value!r}")
            kwargs[name] = bool(value)
        elif name == "filename" and (not isinstance(value, (str, os.PathLike)) or not os.fspath(value)):
            raise TypeError(f"profiler.set_config: filename must be a non-empty path, got {value!r}")
        elif name == "profile_process":
            _check_process(value, "set_config")
        elif name == "dump_period" and not (isinstance(value, (int, float)) and value > 0):
            raise ValueError(f"profiler.set_config: dump_period must be a positive number of seconds, got {value!r}")
    if "filename" in kwargs and _profiler.running and os.fspath(kwargs["filename"]) != _profiler.config["filename"]:
        raise MXNetError("profiler.set_config: the filename cannot change while the profiler runs; "
                         "set_state('stop') and dump() first")
    _profiler.config.update(kwargs)


def _check_process(profile_process: str, where: str) -> None:
    if profile_process != "worker":
        if profile_process == "server":
            raise MXNetError(f"profiler.{where}: profile_process='server' profiles a distributed kvstore's server "
                             "processes, which hybrid does not have; use 'worker'")
        raise ValueError(f"profiler.{where}: profile_process must be 'worker' or 'server', got {profile_process!r}")


def set_state(state: str = "stop", profile_process: str = "worker") -> None:
    """``'run'`` starts a JAX trace session; ``'stop'`` ends it and writes its files (see the module
    docstring). Setting the state it is in does nothing."""
    _check_process(profile_process, "set_state")
    if state == "run":
        if not _profiler.running:
            _profiler.start_session()
    elif state == "stop":
        _profiler.stop_session()
        _profiler.paused = False
    else:
        raise ValueError(f"profiler.set_state: state must be 'run' or 'stop', got {state!r}")


def get_state() -> str:
    """``'run'`` while the profiler runs (also when paused), else ``'stop'``."""
    return "run" if _profiler.running else "stop"


def start(profile_process: str = "worker") -> None:
    """``set_state('run')``."""
    set_state("run", profile_process)


def stop(profile_process: str = "worker") -> None:
    """``set_state('stop')``."""
    set_state("stop", profile_process)


def pause(profile_process: str = "worker") -> None:
    """Stop recording until :func:`resume` (the session so far is written, as at ``stop``)."""
    _check_process(profile_process, "pause")
    if _profiler.session is not None:
        _profiler.stop_session()
        _profiler.paused = True


def resume(profile_process: str = "worker") -> None:
    """Record again after :func:`pause` (a new trace session)."""
    _check_process(profile_process, "resume")
    if _profiler.paused:
        _profiler.paused = False
        _profiler.start_session()


def trace_directory() -> str:
    """The folder the trace sessions are written to: ``filename`` without ``.json``, plus ``_trace``."""
    return _profiler.trace_directory()


def dump(finished: bool = True, profile_process: str = "worker") -> None:
    """Write ``filename``: the Chrome-trace JSON of the sessions since the last dump. A running session is
    stopped first (its files written); with ``finished=False`` a new one starts after the dump."""
    _check_process(profile_process, "dump")
    was_running = _profiler.session is not None
    if was_running:
        _profiler.stop_session()
    events: list = []
    for folder in _profiler.undumped:
        for path in _files(folder, "perfetto_trace.json.gz"):
            with gzip.open(path, "rt", encoding="utf-8") as f:
                events.extend(json.load(f).get("traceEvents", []))
    data = json.dumps({"traceEvents": events, "displayTimeUnit": "ms"}).encode()
    filename = os.fspath(_profiler.config["filename"])
    folder = os.path.dirname(os.path.abspath(filename))
    os.makedirs(folder, exist_ok=True)
    serialization.atomic_write(filename, lambda handle: handle.write(data))
    _profiler.undumped = []
    if was_running and not finished:
        _profiler.start_session()
    elif was_running:
        _profiler.paused = False


def dumps(reset: bool = False, format: str = "table", sort_by: str = "total", ascending: bool = False) -> str:
    """The aggregate statistics (``set_config(aggregate_stats=True)``) as a table or JSON text: the time
    ranges of Tasks, Frames, Events and scopes, Counter updates, and XLA's events of the stopped sessions.
    ``reset`` clears them afterwards."""
    if format not in ("table", "json"):
        raise ValueError(f"profiler.dumps: format must be 'table' or 'json', got {format!r}")
    if sort_by not in _SORT_KEYS:
        raise ValueError(f"profiler.dumps: sort_by must be one of {', '.join(_SORT_KEYS)}, got {sort_by!r}")
    if not isinstance(ascending, bool) or not isinstance(reset, bool):
        raise TypeError("profiler.dumps: ascending and reset must be booleans")
    with _profiler.lock:
        sections = {s: sorted(t.items(), key=lambda kv: kv[1].key(sort_by), reverse=not ascending)
                    for s, t in sorted(_profiler.stats.items())}
        if reset:
            _profiler.stats = {}
    if format == "json":
        return json.dumps({s: {n: {"count": st.count, "total_ms": st.total, "min_ms": st.min, "max_ms": st.max,
                                   "avg_ms": st.total / max(st.count, 1)} for n, st in rows}
                           for s, rows in sections.items()}, indent=1)
    lines = ["", "Profile Statistics:", "\tNote the difference in units for different entries."]
    if not _profiler.config["aggregate_stats"] and not sections:
        lines.append("(no statistics: profiler.set_config(aggregate_stats=True) collects them)")
    for section, rows in sections.items():
        lines += [section, "=" * 17, f"{'Name':<40}{'Total Count':>12}{'Time (ms)':>14}{'Min Time (ms)':>16}"
                  f"{'Max Time (ms)':>16}{'Avg Time (ms)':>16}", f"{'----':<40}{'-----------':>12}{'---------':>14}"
                  f"{'-------------':>16}{'-------------':>16}{'-------------':>16}"]
        for name, st in rows:
            label = name if len(name) <= 39 else name[:36] + "..."
            lines.append(f"{label:<40}{st.count:>12}{st.total:>14.4f}{st.min:>16.4f}{st.max:>16.4f}"
                         f"{st.total / max(st.count, 1):>16.4f}")
        lines.append("")
    return "\n".join(lines) + "\n"


# -- deprecated MXNet 1.x names ---------------------------------------------------------------------------
def profiler_set_config(mode: str = "symbolic", filename: str = "profile.json") -> None:
    """Deprecated: ``set_config(profile_<mode>=True, filename=filename)``."""
    warnings.warn("profiler.profiler_set_config() is deprecated. Please use profiler.set_config() instead",
                  stacklevel=2)
    set_config(**{f"profile_{mode}": True, "filename": filename})


def profiler_set_state(state: str = "stop") -> None:
    """Deprecated: ``set_state(state)``."""
    warnings.warn("profiler.profiler_set_state() is deprecated. Please use profiler.set_state() instead",
                  stacklevel=2)
    set_state(state)


def dump_profile() -> None:
    """Deprecated: ``dump(True)``."""
    warnings.warn("profiler.dump_profile() is deprecated. Please use profiler.dump() instead", stacklevel=2)
    dump(True)


# -- annotations --------------------------------------------------------------------------------------------
@contextlib.contextmanager
def scope(name: str = "<unk>:", append_mode: bool = False) -> Iterator[None]:
    """A named time range in the trace (``TraceAnnotation``); inside a function JAX traces (a HybridBlock's
    ``forward``, a ``jax.jit`` function) the ops traced in it also carry ``name`` (``jax.named_scope``)."""
    if not isinstance(name, str) or not name:
        raise TypeError(f"profiler.scope: name must be a non-empty string, got {name!r}")
    began = time.perf_counter()
    with jax.named_scope(name.rstrip(":") or name), jax.profiler.TraceAnnotation(name):
        yield
    _profiler.record("scope", name, (time.perf_counter() - began) * 1e3)


def _name_of(name: Any, what: str) -> str:
    if not isinstance(name, str) or not name:
        raise TypeError(f"profiler.{what}: name must be a non-empty string, got {name!r}")
    return name


class Domain:
    """A category grouping Tasks, Frames, Counters and Markers (``<domain>:<name>`` in the trace)."""

    def __init__(self, name: str):
        self.name = _name_of(name, "Domain")

    def __str__(self) -> str:
        return self.name

    def __repr__(self) -> str:
        return f"Domain({self.name!r})"

    def new_task(self, name: str) -> "Task":
        """A Task of this domain."""
        return Task(self, name)

    def new_frame(self, name: str) -> "Frame":
        """A Frame of this domain."""
        return Frame(self, name)

    def new_counter(self, name: str, value: int | None = None) -> "Counter":
        """A Counter of this domain, starting at ``value`` when given."""
        return Counter(self, name, value)

    def new_marker(self, name: str) -> "Marker":
        """A Marker of this domain."""
        return Marker(self, name)


def _domain_of(domain: Any, what: str) -> Domain:
    if not isinstance(domain, Domain):
        raise TypeError(f"profiler.{what}: domain must be a profiler.Domain, got {type(domain).__name__}")
    return domain


class _Range:
    """A time range between ``start()`` and ``stop()`` (also a context manager), in the trace and in the
    statistics under ``section``."""

    def __init__(self, name: str, label: str, section: str):
        self.name, self._label, self._section = name, label, section
        self._annotation: Any = None
        self._began = 0.0

    def _annotate(self) -> Any:
        return jax.profiler.TraceAnnotation(self._label)

    def start(self) -> None:
        """Begin the range."""
        if self._annotation is not None:
            raise MXNetError(f"profiler.{type(self).__name__} {self._label!r}: start() again before stop()")
        self._annotation = self._annotate()
        self._annotation.__enter__()
        self._began = time.perf_counter()

    def stop(self) -> None:
        """End the range."""
        if self._annotation is None:
            raise MXNetError(f"profiler.{type(self).__name__} {self._label!r}: stop() without start()")
        ms = (time.perf_counter() - self._began) * 1e3
        annotation, self._annotation = self._annotation, None
        annotation.__exit__(None, None, None)
        _profiler.record(self._section, self.name, ms)

    def __enter__(self) -> "_Range":
        self.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    def __str__(self) -> str:
        return self.name


class Task(_Range):
    """A unit of work of a domain: the passes between ``start()`` and ``stop()`` are aggregated together."""

    def __init__(self, domain: Domain, name: str):
        domain = _domain_of(domain, "Task")
        super().__init__(_name_of(name, "Task"), f"{domain.name}:{name}", domain.name)


class Frame(_Range):
    """A numbered period of a domain (a step: ``jax.profiler.StepTraceAnnotation``, with the pass number)."""

    def __init__(self, domain: Domain, name: str):
        domain = _domain_of(domain, "Frame")
        super().__init__(_name_of(name, "Frame"), f"{domain.name}:{name}", domain.name)
        self._steps = 0

    def _annotate(self) -> Any:
        self._steps += 1
        return jax.profiler.StepTraceAnnotation(self._label, step_num=self._steps)


class Event(_Range):
    """A named time range outside any domain."""

    def __init__(self, name: str):
        super().__init__(_name_of(name, "Event"), _name_of(name, "Event"), "Events")


def _instant(label: str, **stats: Any) -> None:
    """A zero-length range in the trace, carrying ``stats``."""
    with jax.profiler.TraceAnnotation(label, **stats):
        pass


class Counter:
    """A value of a domain that changes over time; every change is an instant in the trace with the value."""

    def __init__(self, domain: Domain, name: str, value: int | None = None):
        self.domain = _domain_of(domain, "Counter")
        self.name = _name_of(name, "Counter")
        self.value = 0
        if value is not None:
            self.set_value(value)

    def set_value(self, value: int) -> None:
        """Set the counter to ``value``."""
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise TypeError(f"profiler.Counter {self.name!r}: value must be a number, got {value!r}")
        began = time.perf_counter()
        self.value = int(value)
        _instant(f"{self.domain.name}:{self.name}", value=self.value)
        _profiler.record(self.domain.name, self.name, (time.perf_counter() - began) * 1e3, self.value)

    def increment(self, delta: int = 1) -> None:
        """Add ``delta``."""
        self.set_value(self.value + int(delta))

    def decrement(self, delta: int = 1) -> None:
        """Subtract ``delta``."""
        self.set_value(self.value - int(delta))

    def __iadd__(self, delta: int) -> "Counter":
        self.increment(delta)
        return self

    def __isub__(self, delta: int) -> "Counter":
        self.decrement(delta)
        return self

    def __str__(self) -> str:
        return self.name


class Marker:
    """An instant of a domain (``mark()``), in the trace with its scope."""

    _SCOPES = ("global", "process", "thread", "task", "marker")

    def __init__(self, domain: Domain, name: str):
        self.domain = _domain_of(domain, "Marker")
        self.name = _name_of(name, "Marker")

    def mark(self, scope: str = "process") -> None:
        """Put the instant in the trace; ``scope`` is one of 'global', 'process', 'thread', 'task', 'marker'."""
        if scope not in self._SCOPES:
            raise ValueError(f"profiler.Marker {self.name!r}: scope must be one of {', '.join(self._SCOPES)}, got "
                             f"{scope!r}")
        _instant(f"{self.domain.name}:{self.name}", scope=scope)
        _profiler.record(self.domain.name, self.name, 0.0)
