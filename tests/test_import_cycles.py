"""The hybrid package's import graph has none of the cycles that were removed.

The graph is read from the source with ``ast``: an edge ``a -> b`` for every ``from . import b``,
``from .b import x``, ``import hybrid.b`` ... in module ``a``, at module level or inside a function.
Edges to packages (their ``__init__``) are left out: importing ``hybrid.x`` runs ``hybrid/__init__``
in any case.
"""
from __future__ import annotations

import ast
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent / "hybrid"


def _module_name(path: pathlib.Path) -> str:
    parts = ("hybrid",) + path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module_name(p): p for p in ROOT.rglob("*.py")}
PACKAGES = {_module_name(p) for p in ROOT.rglob("__init__.py")}


def _targets(node: ast.AST, module: str, is_package: bool) -> list[str]:
    """The hybrid modules (not packages) one import statement loads."""
    if isinstance(node, ast.Import):
        names = [alias.name for alias in node.names]
    else:
        if node.level:
            base = module.split(".") if is_package else module.split(".")[:-1]
            base = base[:len(base) - (node.level - 1)]
            prefix = ".".join(base + ([node.module] if node.module else []))
        else:
            prefix = node.module or ""
        names = [prefix] + [f"{prefix}.{alias.name}" for alias in node.names]
    return [n for n in names if n in MODULES and n not in PACKAGES]


def _edges(module_level_only: bool) -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {name: set() for name in MODULES}
    for name, path in MODULES.items():
        tree = ast.parse(path.read_text(), str(path))
        is_package = path.name == "__init__.py"
        stack: list[ast.AST] = [tree]
        while stack:
            node = stack.pop()
            for child in ast.iter_child_nodes(node):
                if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)) and module_level_only:
                    continue
                if isinstance(child, (ast.Import, ast.ImportFrom)):
                    graph[name].update(_targets(child, name, is_package))
                stack.append(child)
    return graph


def _reaches(graph: dict[str, set[str]], start: str, goal: str) -> bool:
    seen, todo = {start}, [start]
    while todo:
        for nxt in graph[todo.pop()]:
            if nxt == goal:
                return True
            if nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    return False


MODULE_LEVEL = _edges(module_level_only=True)
ALL_LEVELS = _edges(module_level_only=False)

# each removed cycle, as the chain of imports that closed it
REMOVED = [
    ("hybrid._core.functional", "hybrid.random"),
    ("hybrid.export.checkpoint", "hybrid.export.orbax_checkpoint"),
    ("hybrid.parameter", "hybrid.export.params_file", "hybrid.export.mxnet_params"),
]


def test_graph_is_read():
    # the graph sees the imports these modules are known to make
    assert "hybrid.export.orbax_checkpoint" in ALL_LEVELS["hybrid.export.checkpoint"]
    assert "hybrid.export.orbax_checkpoint" not in MODULE_LEVEL["hybrid.export.checkpoint"]
    assert "hybrid.export.params_file" in ALL_LEVELS["hybrid.parameter"]
    assert "hybrid.export.mxnet_params" in MODULE_LEVEL["hybrid.export.params_file"]
    assert "hybrid._core.context" in MODULE_LEVEL["hybrid.parameter"]
    assert "hybrid.random" in ALL_LEVELS["hybrid._core.functional"]


@pytest.mark.parametrize("chain", REMOVED, ids=lambda c: " -> ".join(m.rsplit(".", 1)[-1] for m in c))
def test_removed_cycle_stays_removed(chain):
    for module in chain:
        assert module in MODULES, f"{module} no longer exists; update this test"
    closing = [(a, b) for a, b in zip(chain, chain[1:] + chain[:1])]
    direct = [f"{a} -> {b}" for a, b in closing if b in ALL_LEVELS[a]]
    assert len(direct) < len(closing), f"the import cycle {' -> '.join(chain)} is back: {direct}"
    for a in chain:
        for b in chain:
            if a != b:
                assert not (_reaches(MODULE_LEVEL, a, b) and _reaches(MODULE_LEVEL, b, a)), \
                    f"module-level imports make a cycle through {a} and {b}"


def test_file_formats_and_backends_do_not_import_what_uses_them():
    # file formats take names and arrays: they never reach Parameter, at module level or in a function
    for module in ("hybrid.export.params_file", "hybrid.export.mxnet_params", "hybrid.export.safetensors_file"):
        assert not _reaches(ALL_LEVELS, module, "hybrid.parameter"), f"{module} reaches hybrid.parameter"
    # a checkpoint backend is looked up by the registry, never the other way round
    assert not _reaches(ALL_LEVELS, "hybrid.export.orbax_checkpoint", "hybrid.export.checkpoint")
    assert not _reaches(ALL_LEVELS, "hybrid.export.checkpoint_backend", "hybrid.export.checkpoint")


def test_random_steps_out_of_frames_without_importing_them():
    assert not _reaches(MODULE_LEVEL, "hybrid.random", "hybrid._core.functional")
    assert not _reaches(MODULE_LEVEL, "hybrid._core.scopes", "hybrid._core.functional")


def test_trainer_never_sees_the_recorder():
    # the trainer asks the recording for an update (Tape.stage_update) through the gradients it holds;
    # it imports nothing from hybrid._core.lazy, at module level or in a function
    assert not any(m == "hybrid._core.lazy" or m.startswith("hybrid._core.lazy.") for m in ALL_LEVELS["hybrid.trainer"])
    tree = ast.parse((ROOT / "trainer.py").read_text())
    imported = [n for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) for n in
                [node.module or ""] + [a.name for a in node.names]]
    assert not any(name == "lazy" or ".lazy" in name or name.startswith("lazy.") for name in imported)


def test_jax_internals_are_imported_by_the_recorder_only():
    importers = sorted(name for name, path in MODULES.items()
                       if "jax._src" in path.read_text() and not name.startswith("hybrid._core.lazy"))
    assert importers == [], f"modules importing jax._src outside hybrid._core.lazy: {importers}"
