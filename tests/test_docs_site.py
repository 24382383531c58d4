"""The documentation site (mkdocs.yml) builds with ``mkdocs build --strict``: no broken link or anchor, no
page left out of the nav, no docstring mkdocstrings cannot render; its API pages document every public
name; README.md links every page."""
import importlib
import inspect
import os
import re
import subprocess
import sys
import types

import pytest
import yaml

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir))
DOCS = os.path.join(ROOT, "docs")


def public_modules(root: str = "hybrid") -> list[types.ModuleType]:
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


def public_names(module: types.ModuleType) -> list[str]:
    """``__all__``, or the classes and functions a module defines under public names."""
    names = getattr(module, "__all__", None)
    if names is None:
        names = [n for n, v in vars(module).items() if not n.startswith("_") and
                 getattr(v, "__module__", None) == module.__name__ and (inspect.isclass(v) or inspect.isfunction(v))]
    return sorted(names)


def _nav_pages(nav):
    for entry in nav:
        value = next(iter(entry.values())) if isinstance(entry, dict) else entry
        if isinstance(value, list):
            yield from _nav_pages(value)
        else:
            yield value


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """The site built into a temporary directory; the build's log must hold no warning."""
    out = tmp_path_factory.mktemp("site")
    env = dict(os.environ, NO_MKDOCS_2_WARNING="1")
    proc = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    log = proc.stdout + proc.stderr
    warnings = [line for line in log.splitlines() if line.startswith(("WARNING", "ERROR"))]
    assert proc.returncode == 0 and not warnings, "mkdocs build --strict failed:\n" + "\n".join(warnings or [log[-4000:]])
    return out


def test_site_builds_strict(site):
    for page in ["index.html", "tutorial/index.html", "faq/index.html", "why-hybrid/index.html",
                 "interop/index.html", "passes/index.html", "api/core/index.html"]:
        assert os.path.exists(os.path.join(site, page)), page


def test_api_pages_document_every_public_name(site):
    ids = set()
    for name in os.listdir(os.path.join(site, "api")):
        with open(os.path.join(site, "api", name, "index.html"), encoding="utf-8") as f:
            ids |= set(re.findall(r'id="(hybrid[\w.]*)"', f.read()))
    missing = []
    for module in public_modules():
        assert module.__name__ in ids, f"add '::: {module.__name__}' to a page of docs/api/"
        for name in public_names(module):
            value = getattr(module, name)
            if isinstance(value, types.ModuleType):
                continue
            # a function that shadows its own module (hybrid.compile) is documented under that module
            if {f"{module.__name__}.{name}", f"{getattr(value, '__module__', None)}.{name}"}.isdisjoint(ids):
                missing.append(f"{module.__name__}.{name}")
    assert not missing, f"not in the API pages of the site: {missing}"
    # rendered docstrings: Google-style sections are parsed, Sphinx roles shown as plain code
    with open(os.path.join(site, "api", "core", "index.html"), encoding="utf-8") as f:
        core = f.read()
    assert ":class:<code>" not in core and ":func:<code>" not in core
    assert 'id="hybrid.autograd.backward"' in core and 'doc-section-title">Raises:</span>' in core


def test_nav_lists_every_page_and_readme_links_them():
    with open(os.path.join(ROOT, "mkdocs.yml"), encoding="utf-8") as f:
        config = yaml.safe_load(f)
    nav = list(_nav_pages(config["nav"]))
    pages = sorted(os.path.relpath(os.path.join(d, n), DOCS).replace(os.sep, "/")
                   for d, _, names in os.walk(DOCS) for n in names if n.endswith(".md"))
    assert sorted(nav) == pages and len(set(nav)) == len(nav)
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as f:
        readme = f.read()
    unlisted = [p for p in pages if "/" not in p and p != "index.md" and f"(docs/{p})" not in readme]
    assert not unlisted, f"add {unlisted} to README.md's documentation list"


def test_why_hybrid_quotes_only_measured_figures():
    """Every figure given to three decimals on docs/why-hybrid.md is in a file of benchmarks/results/."""
    results = os.path.join(ROOT, "benchmarks", "results")
    measured = ""
    for name in os.listdir(results):
        if name.endswith(".txt"):
            with open(os.path.join(results, name), encoding="utf-8") as f:
                measured += f.read()
    with open(os.path.join(DOCS, "why-hybrid.md"), encoding="utf-8") as f:
        page = f.read()
    figures = set(re.findall(r"(?<![\d.])\d+\.\d{3}(?!\d)", page))
    assert len(figures) > 100
    assert not [x for x in figures if not re.search(rf"(?<![\d.]){re.escape(x)}(?!\d)", measured)]


@pytest.mark.parametrize("picture", ["suite.png", "fit-curves.png"])
def test_pictures_are_drawn_at_build_time_not_kept(site, picture):
    chart = site / "images" / picture
    assert chart.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and chart.stat().st_size > 10_000
    tracked = subprocess.run(["git", "ls-files", "*.png"], cwd=ROOT, capture_output=True, text=True).stdout.split()
    assert not [p for p in tracked if p.startswith(("benchmarks/", "docs/"))], tracked
