"""Write docs/api-reference.md from the docstrings of hybrid's public API.

    python docs/gen_api_reference.py           # rewrite docs/api-reference.md
    python docs/gen_api_reference.py --check   # exit status 1 when the file is out of date

Public modules are found by walking ``__all__`` from ``hybrid`` (modules without ``__all__`` list the
public names they define). Each public class and function gets its signature and the first paragraph of
its docstring; a class also lists the public methods and properties it defines. An object exported by
several modules is described once, under the first module that exports it (breadth-first from ``hybrid``),
and named elsewhere.
"""
from __future__ import annotations

import argparse
import importlib
import inspect
import os
import re
import sys
import types
from typing import Any

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUTPUT = os.path.join(ROOT, "docs", "api-reference.md")
_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")
_OBJECT = re.compile(r"<([\w.]+) object>")
_ROLE = re.compile(r":(?:class|func|meth|mod|data|attr|exc):`~?([\w.]+)`")


class _Text:
    """Shown by ``inspect.Signature`` exactly as given (annotations and default values)."""

    def __init__(self, text: str):
        self.text = text

    def __repr__(self) -> str:
        return self.text


def _clean(text: str) -> str:
    """``repr`` of a default value without memory addresses: ``<hybrid.init.Uniform object>`` -> ``Uniform()``."""
    text = _ADDRESS.sub("", text)
    text = _OBJECT.sub(lambda m: m.group(1).rsplit(".", 1)[-1] + "()", text)
    return re.sub(r"<(?:function|built-in function|PjitFunction of <function) ([\w.]+)>+", r"\1", text)


def signature(obj: Any) -> str:
    """``(arg: type = default, ...)`` with annotations as written and defaults free of addresses."""
    try:
        sig = inspect.signature(obj)
    except (TypeError, ValueError):
        return "(...)"
    empty = inspect.Parameter.empty

    def annotation(value: Any) -> Any:
        if value is empty:
            return empty
        text = value if isinstance(value, str) else inspect.formatannotation(value)
        return _Text(re.sub(r"['\"]([\w.]+)['\"]", r"\1", text))   # forward references without quotes

    params = [p.replace(annotation=annotation(p.annotation),
                        default=empty if p.default is empty else _Text(_clean(repr(p.default))))
              for p in sig.parameters.values()]
    return str(sig.replace(parameters=params, return_annotation=annotation(sig.return_annotation)))


def summary(obj: Any) -> str:
    """The first paragraph of ``obj``'s own docstring, on one line ('' when there is none)."""
    doc = obj.__doc__ if isinstance(getattr(obj, "__doc__", None), str) else None
    if not doc:
        return ""
    paragraph = inspect.cleandoc(doc).split("\n\n", 1)[0]
    paragraph = _ROLE.sub(r"``\1``", paragraph)   # Sphinx cross-references as plain code
    return " ".join(line.strip() for line in paragraph.splitlines())


def public_names(module: types.ModuleType) -> list[str]:
    names = getattr(module, "__all__", None)
    if names is None:
        names = [n for n, v in vars(module).items() if not n.startswith("_") and
                 getattr(v, "__module__", None) == module.__name__ and (inspect.isclass(v) or inspect.isfunction(v))]
    return sorted(names, key=lambda n: (n.lower(), n))


def walk_modules(root: str = "hybrid") -> list[types.ModuleType]:
    """Public modules, breadth-first from ``root`` through ``__all__``."""
    queue, seen = [importlib.import_module(root)], []
    while queue:
        module = queue.pop(0)
        if module in seen:
            continue
        seen.append(module)
        for name in getattr(module, "__all__", []):
            value = getattr(module, name)
            if isinstance(value, types.ModuleType) and value.__name__.startswith(root + "."):
                queue.append(value)
    return seen


def anchor(title: str) -> str:
    """GitHub's anchor for a heading."""
    return re.sub(r"[^\w\- ]", "", title.lower()).replace(" ", "-")


def _members(cls: type) -> list[str]:
    lines = []
    for name, value in vars(cls).items():
        if name.startswith("_"):
            continue
        if isinstance(value, property):
            lines.append(f"- `{name}` (property){': ' + summary(value) if summary(value) else ''}")
        elif isinstance(value, (staticmethod, classmethod)) or inspect.isfunction(value):
            function = value.__func__ if isinstance(value, (staticmethod, classmethod)) else value
            sig = signature(function)
            if not isinstance(value, staticmethod):
                sig = re.sub(r"^\((?:self|cls)(?:, )?", "(", sig)
            text = summary(function)
            lines.append(f"- `{name}{sig}`{': ' + text if text else ''}")
    return lines


def _entry(qualified: str, name: str, value: Any) -> list[str]:
    lines = [f"### `{qualified}`", ""]
    if inspect.isclass(value):
        lines += ["```python", f"class {name}{signature(value)}", "```", ""]
    elif callable(value):
        lines += ["```python", f"{name}{signature(value)}", "```", ""]
    else:
        lines += [f"A `{type(value).__name__}`: `{_clean(repr(value))}`" if len(repr(value)) < 120
                  else f"A `{type(value).__name__}`.", ""]
    text = summary(value) if _is_api(value) else ""
    if text:
        lines += [text, ""]
    if inspect.isclass(value):
        members = _members(value)
        if members:
            lines += members + [""]
    return lines


def _is_api(value: Any) -> bool:
    return inspect.isclass(value) or callable(value)


def canonical_names(modules: list[types.ModuleType]) -> dict[int, str]:
    """Where each class and function is described: the first module exporting it, under its own
    ``__name__`` when that module also exports it by an alias."""
    found: dict[int, str] = {}
    for module in modules:
        names = [n for n in public_names(module) if _is_api(getattr(module, n))
                 and not isinstance(getattr(module, n), types.ModuleType)]
        for name in sorted(names, key=lambda n: getattr(getattr(module, n), "__name__", None) != n):
            found.setdefault(id(getattr(module, name)), f"{module.__name__}.{name}")
    return found


def render() -> str:
    """The whole reference as Markdown."""
    modules = walk_modules()
    canonical = canonical_names(modules)
    lines = ["# API reference", "",
             "Generated from the docstrings by `docs/gen_api_reference.py`; do not edit by hand. After changing "
             "the public API, run `python docs/gen_api_reference.py` (a test checks that this file is up to "
             "date). Each entry gives the signature and the first paragraph of the docstring; the topic pages "
             "([layers](api-layers.md), [training](api-training.md), [data](api-data.md), "
             "[porting from Gluon](porting-from-gluon.md)) explain more.", "", "## Modules", ""]
    lines += [f"- [`{m.__name__}`](#{anchor(m.__name__)}): {summary(m)}" for m in modules] + [""]
    for module in modules:
        lines += [f"## {module.__name__}", ""]
        if summary(module):
            lines += [summary(module), ""]
        elsewhere = []
        for name in public_names(module):
            value = getattr(module, name)
            if isinstance(value, types.ModuleType):
                continue
            qualified = f"{module.__name__}.{name}"
            if _is_api(value) and canonical[id(value)] != qualified:
                elsewhere.append(f"`{name}` (see `{canonical[id(value)]}`)")
                continue
            lines += _entry(qualified, name, value)
        if elsewhere:
            lines += ["Also exported here: " + ", ".join(elsewhere) + ".", ""]
    return "\n".join(lines).rstrip() + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true", help="only compare with the committed file")
    args = parser.parse_args(argv)
    text = render()
    if args.check:
        with open(OUTPUT, encoding="utf-8") as f:
            current = f.read()
        if current != text:
            print(f"{OUTPUT} is out of date: run python docs/gen_api_reference.py", file=sys.stderr)
            return 1
        return 0
    with open(OUTPUT, "w", encoding="utf-8") as f:
        f.write(text)
    print(f"wrote {OUTPUT}")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, ROOT)
    sys.exit(main())
