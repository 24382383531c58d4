"""Helpers shared by the benchmark scripts: interleaved runs and medians, tables, a compiled training step."""
from __future__ import annotations

import statistics
import time
from typing import Callable

import jax


def block(tree) -> None:
    """Wait for every array in ``tree``."""
    jax.block_until_ready(tree)


def interleaved_medians(fns: dict[str, Callable[[], object]], repeats: int = 30, warmup: int = 3,
                        inner: int = 1) -> dict[str, float]:
    """Median seconds per call of each function, measured round-robin so that load changes on a
    shared machine hit every variant alike. ``inner`` calls are timed together per sample."""
    for fn in fns.values():
        for _ in range(warmup):
            block(fn())
    samples: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(repeats):
        for name, fn in fns.items():
            start = time.perf_counter()
            for _ in range(inner):
                out = fn()
            block(out)
            samples[name].append((time.perf_counter() - start) / inner)
    return {name: statistics.median(values) for name, values in samples.items()}


def chained(step: Callable[[object], list], first: object) -> Callable[[], object]:
    """``run()`` calling ``step(result of the last call)`` (``first`` at the first call) and returning the
    last element of its result: a donating program fed its own outputs, as in a training loop."""
    state = {"last": first}

    def run():
        state["last"] = step(state["last"])
        return state["last"][-1]
    return run


def table(rows: list[dict], columns: list[tuple[str, str]]) -> str:
    """A plain-text table; ``columns`` are (key, header) pairs; floats get 3 significant decimals."""
    def fmt(value):
        if isinstance(value, float):
            return f"{value:.3f}" if abs(value) < 1000 else f"{value:.0f}"
        return str(value)
    cells = [[fmt(row.get(key, "")) for key, _ in columns] for row in rows]
    widths = [max(len(header), *(len(c[i]) for c in cells)) for i, (_, header) in enumerate(columns)]
    lines = ["  ".join(h.ljust(w) for (_, h), w in zip(columns, widths)),
             "  ".join("-" * w for w in widths)]
    lines += ["  ".join(c.ljust(w) for c, w in zip(row, widths)) for row in cells]
    return "\n".join(lines)


def sgd_step(net, compiled: bool = True, **placement) -> tuple[Callable, object]:
    """One training step of ``net`` (softmax cross-entropy, SGD with momentum 0.9, learning rate 0.01):
    ``hybrid.compile`` of it, or the Gluon loop's step as it is with ``compiled=False``; ``placement``
    goes to the Trainer (e.g. ``mesh=``). Returns (step, trainer); ``step(x, y)`` returns the loss."""
    import hybrid
    from hybrid import autograd, loss

    loss_fn = loss.SoftmaxCrossEntropyLoss()
    trainer = hybrid.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.01, "momentum": 0.9}, **placement)

    def step(x, y):
        with autograd.record():
            out = loss_fn(net(x), y)
        autograd.backward(out)
        trainer.step(x.shape[0])
        return out
    return (hybrid.compile(step) if compiled else step), trainer


def capture_recorded_program(run: Callable[[], object]) -> tuple[Callable, list, list]:
    """The recorded program that ``run()`` (one step of a recorded training loop) runs last, with copies
    of the arrays it donated and the arrays it kept: ``program(donated, kept)`` runs it again."""
    from hybrid._core import lazy as _lazy
    captured = {}
    original = _lazy.Tape._run

    def capture(tape, requested, write_cells, donate, *rest):
        chosen = set(donate)
        # copies: the originals are donated (a group slot's value is a list of arrays)
        captured["donated"] = jax.tree_util.tree_map(lambda a: a + 0, [tape.input_values[i] for i in donate])
        captured["kept"] = [v for i, v in enumerate(tape.input_values) if i not in chosen]
        original(tape, requested, write_cells, donate, *rest)
        captured["program"] = _lazy._LAST_RUN[0][0]
    _lazy.Tape._run = capture
    try:
        run()
    finally:
        _lazy.Tape._run = original
    return captured["program"], captured["donated"], captured["kept"]


def program_bytes(program: Callable, *args: object) -> int:
    """XLA's memory figure (``hybrid._core.memory_report.xla_bytes``: temporaries + arguments + outputs -
    aliased bytes) of the jitted ``program`` compiled for arguments shaped like ``args``."""
    import numpy as np
    from hybrid._core.memory_report import xla_bytes
    specs = jax.tree_util.tree_map(lambda a: jax.ShapeDtypeStruct(np.shape(a), jax.numpy.result_type(a)), args)
    return xla_bytes(program.lower(*specs).compile())


def recorded_step_bytes(run: Callable[[], object]) -> int:
    """:func:`program_bytes` of the recorded program that ``run()`` (one step of a recorded training loop)
    runs last."""
    program, donated, kept = capture_recorded_program(run)
    return program_bytes(program, donated, kept)
