"""How much memory training takes: XLA's figures for the programs a step runs.

Every program hybrid compiles (a recorded step, a ``hybrid.compile`` step, a hybridized block's
inference program) is noted when it first runs, and noted again at each later run. The figures come
from XLA's compiled executable (``compiled.memory_analysis()``), read when a report is asked for::

    hybrid.reset_memory_report()
    train_one_step()
    report = hybrid.memory_report()
    print(report)                 # one row per program: arguments, outputs, aliased, temporaries, total
    report.peak_bytes             # the largest total among them

A program's total is what it needs while it runs: arguments + outputs + temporaries - the outputs
written over donated arguments. Programs of one step run one after another, so the step's peak is the
largest total; on accelerators the device's own peak (``device_peak_bytes``) is reported too.
"""
from __future__ import annotations

import itertools
import weakref
from dataclasses import dataclass
from typing import Any

import jax

__all__ = ["ProgramMemory", "MemoryReport", "memory_report", "reset_memory_report", "xla_bytes", "track"]


def xla_bytes(compiled: Any) -> int:
    """XLA's memory figure of a compiled program: temporaries + arguments + outputs - aliased bytes."""
    m = compiled.memory_analysis()
    return int(m.temp_size_in_bytes + m.argument_size_in_bytes + m.output_size_in_bytes - m.alias_size_in_bytes)


@dataclass(frozen=True)
class ProgramMemory:
    """XLA's figures, in bytes, for one compiled program; ``runs``: how often it ran since the last reset."""

    name: str
    arguments: int
    outputs: int
    aliased: int
    temporaries: int
    runs: int

    @property
    def total(self) -> int:
        """Bytes the program needs while it runs: arguments + outputs + temporaries - aliased."""
        return self.arguments + self.outputs + self.temporaries - self.aliased


def _mb(n: int | None) -> str:
    return "-" if n is None else f"{n / 2**20:.1f}"


@dataclass(frozen=True)
class MemoryReport:
    """The programs run since the last :func:`reset_memory_report`, largest total first.

    ``peak_bytes``: the largest program total (programs run one at a time, so this is the step's
    peak); ``device_peak_bytes``: the peak the device itself reports (None on XLA:CPU, which does not
    keep one; it counts since the process started)."""

    programs: tuple[ProgramMemory, ...]
    device_peak_bytes: int | None

    @property
    def peak_bytes(self) -> int:
        return max((p.total for p in self.programs), default=0)

    def summary(self) -> str:
        """A table in MiB, one row per program."""
        rows = [("program", "runs", "arguments", "outputs", "aliased", "temporaries", "total")]
        rows += [(p.name, str(p.runs), _mb(p.arguments), _mb(p.outputs), _mb(p.aliased), _mb(p.temporaries),
                  _mb(p.total)) for p in self.programs]
        widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
        lines = ["  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths)))
                 for r in rows]
        lines.insert(1, "  ".join("-" * w for w in widths))
        lines.append(f"peak: {_mb(self.peak_bytes)} MiB (XLA's figures)"
                     + ("" if self.device_peak_bytes is None else f"; device peak {_mb(self.device_peak_bytes)} MiB"))
        return "\n".join(lines)

    __str__ = summary


class _Program:
    """A compiled program: how to read its figures again (its jitted function and argument types)."""

    __slots__ = ("name", "jitted", "avals", "figures", "runs", "__weakref__")

    def __init__(self, name: str, jitted: jax.stages.Wrapped, args: tuple):
        self.name = name
        self.jitted = jitted
        self.avals = jax.tree_util.tree_map(_abstract, args)
        self.figures: ProgramMemory | None = None
        self.runs = 0

    def note_run(self) -> None:
        """Count one run (the first since a reset puts the program in the report)."""
        if not self.runs:
            _RAN.add(self)
        self.runs += 1

    def memory(self) -> ProgramMemory:
        if self.figures is None:
            m = self.jitted.lower(*self.avals).compile().memory_analysis()
            if m is None:
                raise NotImplementedError(f"{self.name}: XLA reports no memory figures on this backend")
            self.figures = ProgramMemory(self.name, int(m.argument_size_in_bytes), int(m.output_size_in_bytes),
                                         int(m.alias_size_in_bytes), int(m.temp_size_in_bytes), 0)
        f = self.figures
        return ProgramMemory(f.name, f.arguments, f.outputs, f.aliased, f.temporaries, self.runs)


def _abstract(leaf: Any) -> Any:
    """The argument type a later ``lower`` finds the same program with (committed arrays keep their
    sharding, as in the call)."""
    if isinstance(leaf, jax.Array):
        return jax.ShapeDtypeStruct(leaf.shape, leaf.dtype, sharding=leaf.sharding if leaf.committed else None)
    if hasattr(leaf, "shape") and hasattr(leaf, "dtype"):
        return jax.ShapeDtypeStruct(leaf.shape, leaf.dtype)
    return leaf


_NAMES = itertools.count(1)
_RAN: "weakref.WeakSet[_Program]" = weakref.WeakSet()


def track(name: str, jitted: jax.stages.Wrapped, args: tuple, records: list) -> None:
    """Note a program about to run for the first time with ``args`` (read before any is donated), and
    append its record to ``records``; call ``note_run()`` on the record at each later run. Nothing is
    noted when ``args`` are traced (the program is then part of another program being traced)."""
    leaves = jax.tree_util.tree_leaves(args)
    if any(isinstance(leaf, jax.core.Tracer) for leaf in leaves):
        return
    program = _Program(f"{name} #{next(_NAMES)}", jitted, args)
    program.note_run()
    records.append(program)


def reset_memory_report() -> None:
    """Forget the programs run so far."""
    for program in list(_RAN):
        program.runs = 0
    _RAN.clear()


def memory_report() -> MemoryReport:
    """XLA's figures for every program run since the last :func:`reset_memory_report`.

    Reading a program's figures compiles nothing new: it finds the executable the run used."""
    programs = sorted((p.memory() for p in list(_RAN)), key=lambda p: -p.total)
    stats = None
    try:
        stats = jax.devices()[0].memory_stats()
    except Exception:  # backends without memory statistics
        pass
    peak = stats.get("peak_bytes_in_use") if stats else None
    return MemoryReport(tuple(programs), peak)
