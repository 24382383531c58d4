"""The layering of the hybrid package, as a test: floors, no cycles, and imports that must never exist.

The import graph is read from the source with ``ast``: an edge ``a -> b`` for every ``from . import b``,
``from .b import x``, ``import hybrid.b`` ... in module ``a``, at module level or inside a function.
An import of a package's names is an edge to its ``__init__``, also from a module inside that package
(a registry that a package's ``__init__`` defines and its submodules import is a cycle); importing a
submodule does not count as an import of the enclosing packages, nor does anything taken from the root
package ``hybrid`` (its ``__version__``).

A *room* is a top-level entry of ``hybrid/``: a folder (all its modules) or a single module. Each room
stands on one floor of :data:`FLOORS`; a room imports only rooms of its own floor or below, and no two
rooms (and no two modules) import each other, directly or round a loop.
"""
from __future__ import annotations

import ast
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent / "hybrid"

# From the ground up. A new top-level module or folder of hybrid/ gets a floor here.
FLOORS: list[tuple[str, set[str]]] = [
    ("vocabulary: errors, the compile log, process settings", {"errors", "compile_log", "compilation_cache"}),
    ("the symbolic half: IR, ops, passes, memory planning, lowering", {"graph/"}),
    ("file formats of names, arrays and graphs", {"formats/", "serialization", "recordio"}),
    ("the runtime below Parameter: context, modes, recorder, backward engine", {"_core/"}),
    ("randomness and initialisers", {"random", "init"}),
    ("parameters", {"parameter"}),
    ("autograd's public face", {"autograd"}),
    ("what blocks are made of: compiled forwards, the Gluon 1.x library", {"_compiled/", "gluon1/"}),
    ("blocks", {"block"}),
    ("layers and networks", {"nn/", "rnn/", "loss", "model_zoo/", "symbol_block"}),
    ("training and files that know blocks",
     {"trainer", "optimizer/", "lr_scheduler", "metric", "data/", "export/", "distributed/", "utils"}),
    ("on top of training", {"amp", "estimator/", "interop/"}),
    ("the MXNet alias", {"mxnet/"}),
]

# (importer, imported): why this import runs up a floor. Keep it to a handful.
ALLOWED_UPWARD: dict[tuple[str, str], str] = {}

# (importer prefix, imported prefix, why): never reached, directly or through other modules, at any level
NEVER: list[tuple[str, str, str]] = [
    ("hybrid._core", "hybrid.parameter", "the runtime serves Parameter through its doors and Protocols"),
    ("hybrid._core", "hybrid.block", "the runtime never knows the layer API"),
    ("hybrid._core", "hybrid.autograd", "autograd is the public face above the engine"),
    ("hybrid._core", "hybrid.random", "the random stream is hybrid._core.stream"),
    ("hybrid._core", "hybrid.export", "files are above the runtime"),
    ("hybrid._core", "hybrid.mxnet", "the alias is the top floor"),
    ("hybrid.graph", "hybrid._core", "graph/ is usable on any JAX function; the policy is handed in"),
    ("hybrid.formats", "hybrid.parameter", "file formats take names and arrays"),
    ("hybrid.formats", "hybrid.block", "file formats take names and arrays"),
    ("hybrid.gluon1", "hybrid.mxnet", "the Gluon 1.x library serves the alias, not the other way round"),
    ("hybrid.formats.checkpoint_backend", "hybrid.export.checkpoint", "a backend is looked up by the registry"),
    ("hybrid.export.orbax_checkpoint", "hybrid.export.checkpoint", "a backend is looked up by the registry"),
]

# (importer, imported prefix, why): never imported by the importer's own code (it may reach it through others)
NEVER_DIRECTLY: list[tuple[str, str, str]] = [
    ("hybrid.trainer", "hybrid._core.lazy", "the trainer asks for an update (Tape.stage_update through the "
     "gradients it holds); it never sees tape slots"),
]


def _module_name(path: pathlib.Path) -> str:
    parts = ("hybrid",) + path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module_name(p): p for p in ROOT.rglob("*.py")}
PACKAGES = {_module_name(p) for p in ROOT.rglob("__init__.py")}


def _targets(node: ast.Import | ast.ImportFrom, module: str, is_package: bool) -> tuple[list[str], set[str]]:
    """The hybrid modules and packages one import statement loads, and among them the packages whose own
    names (not submodules) it takes."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names if alias.name in MODULES], set()
    if node.level:
        base = module.split(".") if is_package else module.split(".")[:-1]
        base = base[:len(base) - (node.level - 1)]
        prefix = ".".join(base + ([node.module] if node.module else []))
    else:
        prefix = node.module or ""
    names = [prefix] + [f"{prefix}.{alias.name}" for alias in node.names]
    takes_names = {prefix} if any(f"{prefix}.{a.name}" not in MODULES for a in node.names) else set()
    return [n for n in names if n in MODULES], takes_names


def _edges(module_level_only: bool) -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {name: set() for name in MODULES}
    for name, path in MODULES.items():
        tree = ast.parse(path.read_text(), str(path))
        is_package = path.name == "__init__.py"
        parts = name.split(".")
        enclosing = {".".join(parts[:i]) for i in range(1, len(parts))} | {name}
        stack: list[ast.AST] = [tree]
        while stack:
            node = stack.pop()
            for child in ast.iter_child_nodes(node):
                if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)) and module_level_only:
                    continue
                if isinstance(child, (ast.Import, ast.ImportFrom)):
                    targets, takes_names = _targets(child, name, is_package)
                    graph[name].update(t for t in targets if t not in enclosing or t in takes_names and t != "hybrid")
                stack.append(child)
    return graph


def _room(module: str) -> str:
    top = module.split(".")[1]
    return top + "/" if (ROOT / top).is_dir() else top


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected parts of ``graph`` with more than one node (Tarjan, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for start in graph:
        if start in index:
            continue
        work = [(start, iter(sorted(graph.get(start, ()))))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                part = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    part.append(member)
                    if member == node:
                        break
                if len(part) > 1:
                    found.append(sorted(part))
    return found


def _reaches(graph: dict[str, set[str]], start: str, goal_prefix: str) -> list[str] | None:
    """A chain of imports from ``start`` to a module named ``goal_prefix`` or inside it, or None."""
    came_from: dict[str, str | None] = {start: None}
    todo = [start]
    while todo:
        current = todo.pop()
        for nxt in sorted(graph[current]):
            if nxt in came_from:
                continue
            came_from[nxt] = current
            if nxt == goal_prefix or nxt.startswith(goal_prefix + "."):
                chain, at = [], nxt
                while at is not None:
                    chain.append(at)
                    at = came_from[at]
                return chain[::-1]
            todo.append(nxt)
    return None


ALL_LEVELS = _edges(module_level_only=False)
MODULE_LEVEL = _edges(module_level_only=True)
FLOOR_OF = {room: i for i, (_, rooms) in enumerate(FLOORS) for room in rooms}


def _room_graph() -> dict[str, set[str]]:
    rooms: dict[str, set[str]] = {}
    for a, targets in ALL_LEVELS.items():
        if a == "hybrid":
            continue
        for b in targets:
            if b != "hybrid" and _room(a) != _room(b):
                rooms.setdefault(_room(a), set()).add(_room(b))
    return rooms


def test_graph_is_read():
    # the graph sees imports these modules are known to make, at module level and inside functions
    assert "hybrid.formats.serialization" in MODULE_LEVEL["hybrid.formats.params_file"]
    assert "hybrid._core.lazy" in MODULE_LEVEL["hybrid._core.gradients"]
    assert "hybrid.export.orbax_checkpoint" in ALL_LEVELS["hybrid.export.checkpoint"]
    assert "hybrid.export.orbax_checkpoint" not in MODULE_LEVEL["hybrid.export.checkpoint"]
    assert "hybrid._compiled.symbol_export" in ALL_LEVELS["hybrid.block"]
    assert "hybrid._compiled.symbol_export" not in MODULE_LEVEL["hybrid.block"]


def test_the_cycle_finder_finds_cycles():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []
    injected = {name: set(targets) for name, targets in ALL_LEVELS.items()}
    injected["hybrid._core.lazy.trace"].add("hybrid.autograd")
    assert any("hybrid.autograd" in part and "hybrid._core.lazy.trace" in part for part in _cycles(injected))


def test_no_module_cycle_at_any_level():
    assert _cycles(ALL_LEVELS) == []


def test_no_folder_cycle():
    assert _cycles(_room_graph()) == []


def test_every_room_has_a_floor():
    rooms = {_room(m) for m in MODULES if m != "hybrid"}
    assert rooms - set(FLOOR_OF) == set(), "give these top-level modules or folders a floor in FLOORS"
    assert set(FLOOR_OF) - rooms == set(), "these rooms of FLOORS no longer exist"


def test_imports_run_down_the_floors():
    upward = {}
    for a, targets in ALL_LEVELS.items():
        for b in targets:
            if a != "hybrid" and b != "hybrid" and FLOOR_OF[_room(a)] < FLOOR_OF[_room(b)]:
                upward[(a, b)] = f"{FLOORS[FLOOR_OF[_room(a)]][0]} -> {FLOORS[FLOOR_OF[_room(b)]][0]}"
    unexplained = {edge: floors for edge, floors in upward.items() if edge not in ALLOWED_UPWARD}
    assert unexplained == {}, "imports up a floor: move the code, or list the import in ALLOWED_UPWARD with a reason"
    assert set(ALLOWED_UPWARD) <= set(upward), "ALLOWED_UPWARD lists imports that no longer exist"


@pytest.mark.parametrize("importer,imported,why", NEVER, ids=[f"{a} -/-> {b}" for a, b, _ in NEVER])
def test_never_imports(importer, imported, why):
    starts = [m for m in MODULES if m == importer or m.startswith(importer + ".")]
    assert starts, f"{importer} no longer exists; update this table"
    for start in starts:
        chain = _reaches(ALL_LEVELS, start, imported)
        assert chain is None, f"{' -> '.join(chain)} ({why})"


@pytest.mark.parametrize("importer,imported,why", NEVER_DIRECTLY, ids=[f"{a} -/-> {b}" for a, b, _ in NEVER_DIRECTLY])
def test_never_imports_directly(importer, imported, why):
    direct = [m for m in ALL_LEVELS[importer] if m == imported or m.startswith(imported + ".")]
    assert direct == [], why


def test_random_steps_out_of_frames_without_importing_them():
    assert _reaches(MODULE_LEVEL, "hybrid.random", "hybrid._core.functional") is None
    assert _reaches(MODULE_LEVEL, "hybrid._core.scopes", "hybrid._core.functional") is None


def test_jax_internals_are_imported_by_the_recorder_only():
    importers = sorted(name for name, path in MODULES.items()
                       if "jax._src" in path.read_text() and not name.startswith("hybrid._core.lazy"))
    assert importers == [], f"modules importing jax._src outside hybrid._core.lazy: {importers}"
