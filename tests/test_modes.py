"""Modes interpret; consumers do not switch.

The current context carries one mode object (eager, recording, a frame) that answers how parameters
are read and written, blocks called, keys drawn and state written. These tests pin that down: the
sites outside the mode modules that still read which mode is active are a short, named list; the
mode follows the scopes; JAX's trace follows the recording; the precision policy is part of the
context; cells have one named type.
"""
from __future__ import annotations

import ast
import pathlib
import threading

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import hybrid
from hybrid._core import cells as _cells, context as _context, lazy as _lazy, modes as _modes
from hybrid import autograd, nn
from hybrid.graph import precision

ROOT = pathlib.Path(hybrid.__file__).resolve().parent

# the modules that define the modes and the scopes that switch them
MODE_MODULES = {"_core/modes.py", "_core/context.py", "_core/functional.py", "_core/scopes.py"}
MODE_ATTRIBUTES = {"recording", "frame", "tape", "compile_frame", "whole_step", "inline_hybridized"}

# what may still read the mode, and why
ALLOWED = {
    ("autograd.py", "is_recording"),          # the public question itself
    ("_compiled/compile.py", "CompiledStep.__call__"),  # recording is part of a compiled step's cache key
    ("block.py", "Block._run_forward"),       # a traced block names its scope in the graph
    ("block.py", "Block._located_error"),     # errors of Python control flow, while tracing
    ("symbol_block.py", "draw_rng"),   # the key inputs of an imported graph
}


def _is_context_read(node: ast.AST) -> bool:
    """``_context.current()``, ``_functional.current()``, ``ctx``, ``frame`` or ``<x>.mode``."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "current":
        return True
    if isinstance(node, ast.Name) and node.id in ("ctx", "frame"):
        return True
    return isinstance(node, ast.Attribute) and node.attr == "mode"


def mode_reading_sites(root: pathlib.Path) -> set[tuple[str, str]]:
    """(module, function) of every read of which mode is active, outside the mode modules and the tape."""
    sites = set()
    for path in root.rglob("*.py"):
        rel = path.relative_to(root).as_posix()
        if rel in MODE_MODULES or rel.startswith("_core/lazy/"):
            continue
        tree = ast.parse(path.read_text(), rel)

        def visit(node: ast.AST, scope: list[str]) -> None:
            for child in ast.iter_child_nodes(node):
                inner = scope
                if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                    inner = scope + [child.name]
                hit = False
                if isinstance(child, ast.Attribute) and child.attr in MODE_ATTRIBUTES and _is_context_read(child.value):
                    hit = True
                elif isinstance(child, ast.Call) and isinstance(child.func, ast.Attribute) and \
                        isinstance(child.func.value, ast.Name) and child.func.value.id == "_functional" and \
                        child.func.attr in ("current", "compile_frame"):
                    hit = True
                elif isinstance(child, ast.Call) and isinstance(child.func, ast.Name) and child.func.id == "isinstance" \
                        and len(child.args) == 2 and any(n.endswith(("Frame", "Mode")) for n in _names(child.args[1])):
                    hit = True
                if hit:
                    sites.add((rel, ".".join(s for s in scope if not s.startswith("<")) or "<module>"))
                visit(child, inner)

        visit(tree, [])
    return sites


def _names(node: ast.AST) -> list[str]:
    return [n.attr if isinstance(n, ast.Attribute) else n.id for n in ast.walk(node)
            if isinstance(n, (ast.Attribute, ast.Name))]


def test_consumers_ask_the_mode_instead_of_testing_it():
    sites = mode_reading_sites(ROOT)
    assert sites == ALLOWED, (f"new sites reading the mode: {sorted(sites - ALLOWED)}; "
                              f"gone (remove from ALLOWED): {sorted(ALLOWED - sites)}")


def test_the_scanner_finds_the_patterns_it_counts(tmp_path):
    (tmp_path / "consumer.py").write_text(
        "def a(ctx):\n    return ctx.recording\n"
        "def b():\n    return _context.current().frame\n"
        "def c():\n    return _functional.compile_frame()\n"
        "class K:\n    def d(self, f):\n        return isinstance(f, _functional.CompileFrame)\n"
        "def e(p):\n    return _context.current().mode.read_param(p)\n")  # asking the mode: not a read
    assert mode_reading_sites(tmp_path) == {("consumer.py", "a"), ("consumer.py", "b"), ("consumer.py", "c"),
                                            ("consumer.py", "K.d")}


def test_the_mode_follows_the_scopes():
    assert _context.current().mode is _modes.EAGER
    with autograd.record():
        mode = _context.current().mode
        assert isinstance(mode, _modes.RecordingMode) and mode.recording
        assert mode.tape is _context.current().tape
        assert _lazy.current_trace() is mode.tape.trace  # JAX's trace follows the recording
        with autograd.pause():
            assert _context.current().mode is _modes.EAGER
            assert _lazy.current_trace() is mode.tape.parent
        with autograd.record():  # nested: the same recording
            assert _context.current().mode.tape is mode.tape
        assert _lazy.current_trace() is mode.tape.trace
    assert _context.current().mode is _modes.EAGER
    assert not autograd.is_recording()


def test_set_recording_moves_the_trace_with_the_context():
    outside = _lazy.current_trace()
    assert autograd.set_recording(True) is False
    try:
        tape = _context.current().tape
        assert autograd.is_recording() and _lazy.current_trace() is tape.trace
    finally:
        assert autograd.set_recording(False) is True
    assert not autograd.is_recording() and _lazy.current_trace() is outside
    assert _context.current().mode is _modes.EAGER


def test_a_frame_is_the_mode_and_records_over_it():
    net = nn.Dense(3, in_units=2)
    net.initialize()
    seen = {}

    @hybrid.compile
    def step(x):
        seen["step"] = _context.current().mode
        with autograd.record():
            seen["recording"] = _context.current().mode
            out = net(x).sum()
        return out

    x = jnp.ones((4, 2))
    w, b = np.asarray(net.weight.data()), np.asarray(net.bias.data())
    expected = float((np.ones((4, 2)) @ w.T + b).sum())
    assert float(step(x)) == pytest.approx(expected, rel=1e-5)
    assert seen["step"].whole_step
    assert isinstance(seen["recording"], _modes.FrameRecordingMode) and seen["recording"].parent is seen["step"]


def test_cells_have_one_named_type():
    assert _lazy.Cell is _cells.Cell
    cell = _cells.Cell(_cells.GRAD, "p")
    assert cell == _cells.Cell("grad", "p", None) and cell.kind == "grad" and cell.owner == "p" and cell.part is None
    assert len({cell, _cells.Cell(_cells.GRAD, "p"), _cells.Cell(_cells.DATA, "p")}) == 2


def test_a_compiled_step_keys_its_state_by_cells():
    net = nn.Dense(2, in_units=3)
    net.initialize()
    trainer = hybrid.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.1, "momentum": 0.9})

    @hybrid.compile
    def step(x):
        with autograd.record():
            l = net(x).sum()
        l.backward()
        trainer.step(1)
        return l

    step(jnp.ones((4, 3)))
    frame = next(iter(step._programs.values())).info["frame"]
    kinds = {(key.kind, key.owner is trainer or key.part is trainer) for key in frame.setters}
    assert all(isinstance(key, _cells.Cell) for key in frame.setters)
    assert (_cells.DATA, False) in kinds and (_cells.OPTIMIZER_STATE, True) in kinds
    assert _cells.Cell(_cells.LR, trainer) in frame.host_inputs


def test_the_precision_policy_is_scoped_per_thread_and_kept_by_scopes():
    # graph/precision.py holds the policy itself (graph/ never reads the execution context)
    policy = precision.Policy("bfloat16")
    assert precision.current() is None
    with precision.use(policy):
        assert precision.current() is policy and not hasattr(_context.current(), "precision")
        with autograd.record():  # a scope keeps it
            assert precision.current() is policy
        seen = []
        thread = threading.Thread(target=lambda: seen.append(precision.current()))
        thread.start()
        thread.join()
        assert seen == [None]  # per thread, as before
        with precision.use(None):  # full precision inside, whatever the global policy
            assert precision.current() is None
    assert precision.current() is None
    precision.set_global(policy)
    try:
        assert precision.current() is policy
        with precision.use(None):
            assert precision.current() is None
    finally:
        precision.set_global(None)
