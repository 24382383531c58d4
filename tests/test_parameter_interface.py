"""A Parameter's state is reached through its public interface only: no module but ``parameter.py`` reads
or writes its underscore attributes or calls its underscore methods (``is_initialized``, ``is_deferred``,
``own_data``, ``assign_data``, ``grad_state``, ``finish_deferred_init``... are the doors)."""
from __future__ import annotations

import ast
import pathlib

ROOT = pathlib.Path(__file__).resolve().parent.parent / "hybrid"


def _private_names() -> set[str]:
    """The underscore attributes and methods that Parameter and Constant define for themselves."""
    tree = ast.parse((ROOT / "parameter.py").read_text())
    names = set()
    for cls in (n for n in tree.body if isinstance(n, ast.ClassDef) and n.name in ("Parameter", "Constant")):
        for node in ast.walk(cls):
            if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self"
                    and node.attr.startswith("_") and not node.attr.startswith("__")):
                names.add(node.attr)
            if isinstance(node, ast.FunctionDef) and node.name.startswith("_") and not node.name.startswith("__"):
                names.add(node.name)
    return names


def test_the_private_names_are_found():
    assert {"_data", "_deferred", "_grad_req", "_shape", "_dtype", "_name"} <= _private_names()


def test_no_module_reaches_into_a_parameter():
    names = _private_names()
    reaching = []
    for path in sorted(ROOT.rglob("*.py")):
        if path == ROOT / "parameter.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if (isinstance(node, ast.Attribute) and node.attr in names
                    and not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"))
                    and not _is_super(node.value)):
                reaching.append(f"{path.relative_to(ROOT.parent)}:{node.lineno}: {ast.unparse(node)}")
    assert reaching == []


def _is_super(node: ast.AST) -> bool:
    """``super()``: a class's own methods reached through its bases (Block._changed calls Watched's)."""
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "super"
