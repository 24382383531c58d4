"""A Parameter's and a Trainer's state is reached through their public interfaces only: no module but
``parameter.py`` reads or writes a Parameter's underscore attributes or calls its underscore methods
(``is_initialized``, ``is_deferred``, ``own_data``, ``assign_data``, ``grad_state``, ``data_of``,
``grad_reqs``, ``finish_deferred_init``... are the doors), and no module but ``trainer.py`` a Trainer's
(``state_entries``, ``states_restorer``, ``loss_scaler``, ``placement``, ``update_now``... are its doors).
Attribute syntax counts, and so do ``getattr``/``setattr``/``hasattr``/``delattr`` and ``attrgetter`` with
the name as a string literal."""
from __future__ import annotations

import ast
import pathlib

ROOT = pathlib.Path(__file__).resolve().parent.parent / "hybrid"

_BY_NAME = ("getattr", "setattr", "hasattr", "delattr")


def _private_names(module: str, classes: tuple[str, ...]) -> set[str]:
    """The underscore attributes and methods that ``classes`` of ``module`` define for themselves."""
    tree = ast.parse((ROOT / module).read_text())
    names = set()
    for cls in (n for n in tree.body if isinstance(n, ast.ClassDef) and n.name in classes):
        for node in ast.walk(cls):
            if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self"
                    and node.attr.startswith("_") and not node.attr.startswith("__")):
                names.add(node.attr)
            if isinstance(node, ast.FunctionDef) and node.name.startswith("_") and not node.name.startswith("__"):
                names.add(node.name)
    return names


def _is_own(node: ast.AST) -> bool:
    """``self``, ``cls`` or ``super()``: an object's own attributes (Block._changed calls Watched's)."""
    if isinstance(node, ast.Name):
        return node.id in ("self", "cls")
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "super"


def _reaching(tree: ast.AST, names: set[str]) -> list[tuple[int, str]]:
    """(line, code) of each access in ``tree`` to one of ``names`` on an object other than its own."""
    found = []
    for node in ast.walk(tree):
        if (isinstance(node, ast.Attribute) and node.attr in names and not _is_own(node.value)
                or isinstance(node, ast.Call) and _named_by_string(node) & names):
            found.append((node.lineno, ast.unparse(node)))
    return found


def _named_by_string(call: ast.Call) -> set[str]:
    """The attribute names ``call`` takes as string literals: the name given to ``getattr``/``setattr``/
    ``hasattr``/``delattr`` for an object other than its own, and each dotted part of ``attrgetter``'s."""
    func, args = call.func, call.args
    if isinstance(func, ast.Name) and func.id in _BY_NAME:
        if len(args) >= 2 and _is_string(args[1]) and not _is_own(args[0]):
            return {args[1].value}
    elif (func.id if isinstance(func, ast.Name) else getattr(func, "attr", None)) == "attrgetter":
        return {part for arg in args if _is_string(arg) for part in arg.value.split(".")}
    return set()


def _is_string(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and isinstance(node.value, str)


def _modules_reaching(names: set[str], own: str) -> list[str]:
    return [f"{path.relative_to(ROOT.parent)}:{line}: {code}"
            for path in sorted(ROOT.rglob("*.py")) if path != ROOT / own
            for line, code in _reaching(ast.parse(path.read_text()), names)]


def _parameter_names() -> set[str]:
    return _private_names("parameter.py", ("Parameter", "Constant"))


def _trainer_names() -> set[str]:
    return _private_names("trainer.py", ("Trainer",))


def test_the_private_names_are_found():
    assert {"_data", "_deferred", "_grad_req", "_shape", "_dtype", "_name"} <= _parameter_names()
    assert {"_params", "_names", "_states", "_placement", "_loss_scaler", "_trainable", "_states_of",
            "_optimizer"} <= _trainer_names()


def test_no_module_reaches_into_a_parameter():
    assert _modules_reaching(_parameter_names(), "parameter.py") == []


def test_no_module_reaches_into_a_trainer():
    assert _modules_reaching(_trainer_names(), "trainer.py") == []


def test_each_form_of_access_is_caught():
    names = {"_data", "_states"}
    reaching = [
        "p._data", "p._data = x", "trainer._states.clear()", "del p._data",
        "getattr(p, '_data')", "getattr(trainer, '_states', None)", "setattr(p, '_data', x)",
        "hasattr(p, '_data')", "delattr(p, '_data')",
        "operator.attrgetter('_data')", "attrgetter('_data')", "attrgetter('name', '_data')",
        "attrgetter('trainer._states')",
    ]
    for code in reaching:
        assert len(_reaching(ast.parse(code), names)) == 1, code
    own = ["self._data", "cls._states", "super()._data", "getattr(self, '_data')", "p.data",
           "getattr(p, 'data')", "attrgetter('grad_req')", "getattr(p, name)", "d['_data']"]
    for code in own:
        assert _reaching(ast.parse(code), names) == [], code
