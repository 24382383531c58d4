"""Modes and state stores interpret; consumers do not switch.

The current context carries one mode object (eager, recording, a frame) that answers how parameters
are read and written, blocks called and keys drawn, and one state store (eager, or the compiled step
being traced) that answers how state is read and written. These tests pin that down: the sites outside
the mode modules that still read which mode or store is active are a short, named list; state verbs are
asked of the store and nothing else of it; the mode and the store follow the scopes; JAX's trace follows
the recording; the precision policy is part of the context; cells have one named type.
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
from hybrid._core import cells as _cells, context as _context, functional as _functional, lazy as _lazy
from hybrid._core import modes as _modes, protocols
from hybrid import autograd, nn
from hybrid.graph import precision

ROOT = pathlib.Path(hybrid.__file__).resolve().parent

# the modules that define the modes, the stores and the scopes that switch them
MODE_MODULES = {"_core/modes.py", "_core/context.py", "_core/functional.py", "_core/scopes.py", "_core/protocols.py"}
MODE_ATTRIBUTES = {"recording", "frame", "tape", "compile_frame", "whole_step", "inline_hybridized", "state_store"}
# what the state store answers, and nothing else does
STORE_VERBS = {"read_cell", "write_cell", "fresh_grads", "set_grad_fresh", "store_grads", "apply_update", "host_call",
               "depends_on"}

# what may still read the mode, and why
ALLOWED = {
    ("autograd.py", "is_recording"),          # the public question itself
    ("_compiled/compile.py", "CompiledStep.__call__"),  # recording is part of a compiled step's cache key
    ("block.py", "Block._run_forward"),       # a traced block names its scope in the graph
    ("block.py", "Block._located_error"),     # errors of Python control flow, while tracing
    ("symbol_block.py", "draw_rng"),   # the key inputs of an imported graph
}


def _is_context_read(node: ast.AST) -> bool:
    """``_context.current()``, ``_functional.current()``, ``ctx``, ``frame``, ``<x>.mode`` or ``<x>.store``."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "current":
        return True
    if isinstance(node, ast.Name) and node.id in ("ctx", "frame"):
        return True
    return isinstance(node, ast.Attribute) and node.attr in ("mode", "store")


def _is_mode_or_store(node: ast.AST) -> bool:
    """The context's mode or store (``_context.current().mode``, ``ctx.store``, ``stack.top.mode``...),
    ``EAGER`` or ``EAGER_STORE``: what a comparison tests."""
    if isinstance(node, ast.Attribute) and node.attr in ("mode", "store"):
        base = node.value
        return _is_context_read(base) or isinstance(base, ast.Attribute) and base.attr == "top"
    return (isinstance(node, ast.Attribute) and node.attr in ("EAGER", "EAGER_STORE")) or \
        (isinstance(node, ast.Name) and node.id in ("EAGER", "EAGER_STORE"))


def _modules(root: pathlib.Path):
    """(relative path, syntax tree) of every module outside the mode modules and the tape."""
    for path in root.rglob("*.py"):
        rel = path.relative_to(root).as_posix()
        if rel not in MODE_MODULES and not rel.startswith("_core/lazy/"):
            yield rel, ast.parse(path.read_text(), rel)


def mode_reading_sites(root: pathlib.Path) -> set[tuple[str, str]]:
    """(module, function) of every read of which mode or store is active, outside the mode modules and the tape."""
    sites = set()
    for rel, tree in _modules(root):

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
                        and len(child.args) == 2 and any(n.endswith(("Frame", "Mode", "Store")) for n in _names(child.args[1])):
                    hit = True
                elif isinstance(child, ast.Compare) and any(_is_mode_or_store(n) for n in [child.left, *child.comparators]):
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
        "def e(p):\n    return _context.current().mode.read_param(p)\n"  # asking the mode: not a read
        "def f():\n    return _context.current().store is _modes.EAGER_STORE\n"
        "def g(s):\n    return isinstance(s, _modes.EagerStore)\n"
        "def h(p):\n    return _context.current().store.fresh_grads([p])\n"  # asking the store: not a read
        "def i():\n    return _context.current().frame.state_store\n"
        "def j(ctx):\n    return ctx.mode == _modes.EAGER\n"
        "def k(self):\n    return self.mode == 'max'\n")  # not the context's mode
    assert mode_reading_sites(tmp_path) == {("consumer.py", n) for n in ("a", "b", "c", "K.d", "f", "g", "i", "j")}


def asked(root: pathlib.Path) -> dict[str, set[str]]:
    """The methods asked of the mode and of the store, ``{"mode": names, "store": names}``: called on
    ``<x>.mode``/``<x>.store`` or on a local name bound to one."""
    found: dict[str, set[str]] = {"mode": set(), "store": set()}
    for _, tree in _modules(root):
        for function in ast.walk(tree):
            if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Module)):
                continue
            bound = {}
            for node in ast.walk(function):
                if isinstance(node, ast.Assign) and isinstance(node.value, ast.Attribute) and \
                        node.value.attr in found:
                    bound.update({t.id: node.value.attr for t in node.targets if isinstance(t, ast.Name)})
            for node in ast.walk(function):
                if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
                    receiver = node.func.value
                    if isinstance(receiver, ast.Attribute) and receiver.attr in found:
                        found[receiver.attr].add(node.func.attr)
                    elif isinstance(receiver, ast.Name) and receiver.id in bound:
                        found[bound[receiver.id]].add(node.func.attr)
    return found


def test_state_verbs_are_asked_of_the_store_and_nothing_else_is():
    verbs = asked(ROOT)
    assert verbs["store"] and verbs["store"] <= STORE_VERBS, sorted(verbs["store"] - STORE_VERBS)
    assert verbs["mode"] and not verbs["mode"] & STORE_VERBS, sorted(verbs["mode"] & STORE_VERBS)
    assert {n for n in dir(protocols.StateStore) if not n.startswith("_")} == STORE_VERBS
    for mode in (_modes.Mode, _modes.RecordingMode, _modes.FrameRecordingMode, _functional.Frame,
                 _functional.TraceFrame, _functional.ApplyFrame, _functional.TransformFrame):
        assert not STORE_VERBS & set(dir(mode)), mode  # a mode forwards no state verb
    for store in (_modes.EAGER_STORE, _functional.CompileFrame({}, {})):
        assert isinstance(store, protocols.StateStore)


def test_the_scanner_finds_what_is_asked(tmp_path):
    (tmp_path / "consumer.py").write_text(
        "def a(p):\n    store = _context.current().store\n    store.set_grad_fresh(p, True)\n"
        "    return _context.current().mode.read_param(p)\n"
        "def b(p):\n    mode = _context.stack.top.mode\n    return mode.fresh_grads([p])\n")
    assert asked(tmp_path) == {"mode": {"read_param", "fresh_grads"}, "store": {"set_grad_fresh"}}


def test_the_mode_modules_import_no_consumer():
    banned = {"hybrid.trainer", "hybrid.block", "hybrid.parameter", "hybrid.autograd"}
    for name in ("modes", "context", "functional", "scopes", "protocols"):
        for node in ast.walk(ast.parse((ROOT / "_core" / f"{name}.py").read_text())):
            if isinstance(node, ast.Import):
                imported = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                package = {0: "", 1: "hybrid._core", 2: "hybrid"}[node.level]
                base = ".".join(p for p in (package, node.module) if p)
                imported = [base] + [f"{base}.{alias.name}" for alias in node.names]
            else:
                continue
            assert not banned & {".".join(m.split(".")[:2]) for m in imported}, (name, imported)


def test_the_objects_the_modes_act_on_have_the_protocols_methods(monkeypatch):
    net = nn.Dense(2, in_units=3)
    net.initialize()
    net.hybridize()
    trainer = hybrid.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.1})
    assert isinstance(net.weight, protocols.StoredParam) and isinstance(net.weight, protocols.GradParam)
    assert isinstance(net, protocols.BlockCall)
    assert isinstance(net._compiled_op(), protocols.CompiledCall)
    assert isinstance(trainer, protocols.UpdateTarget)
    assert isinstance(_functional.CompileFrame({}, {}), protocols.StepStore)
    seen = []
    original = _modes.EagerStore.store_grads
    monkeypatch.setattr(_modes.EagerStore, "store_grads", lambda self, write: (seen.append(write), original(self, write)))
    with autograd.record():
        l = net(jnp.ones((1, 3))).sum()
    l.backward()
    assert len(seen) == 1 and isinstance(seen[0], protocols.GradWrite)


def test_the_mode_follows_the_scopes():
    assert _context.current().mode is _modes.EAGER
    assert _context.current().store is _modes.EAGER_STORE
    with autograd.record():
        mode = _context.current().mode
        assert isinstance(mode, _modes.RecordingMode) and mode.recording
        assert mode.tape is _context.current().tape
        assert _lazy.current_trace() is mode.tape.trace  # JAX's trace follows the recording
        assert _context.current().store is _modes.EAGER_STORE
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
        seen["store"] = _context.current().store
        with autograd.record():
            seen["recording"] = _context.current().mode
            seen["recording store"] = _context.current().store
            out = net(x).sum()
            with _functional.frame({}) as inner:  # a frame inside the step: the step's state
                seen["inner store"] = _context.current().store
                assert _context.current().mode is inner
        with _functional.no_frame():  # outside the frames: the eager state
            seen["no frame store"] = _context.current().store
        return out

    x = jnp.ones((4, 2))
    w, b = np.asarray(net.weight.data()), np.asarray(net.bias.data())
    expected = float((np.ones((4, 2)) @ w.T + b).sum())
    assert float(step(x)) == pytest.approx(expected, rel=1e-5)
    assert seen["step"].whole_step
    assert isinstance(seen["recording"], _modes.FrameRecordingMode) and seen["recording"].parent is seen["step"]
    assert seen["store"] is seen["step"] and seen["recording store"] is seen["step"]
    assert seen["inner store"] is seen["step"] and seen["no frame store"] is _modes.EAGER_STORE
    with _functional.frame({}):  # a frame outside any step: the eager state
        assert _context.current().store is _modes.EAGER_STORE


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
