"""Every ```python block of README.md and docs/*.md runs.

One test per page: its python blocks run in order, in one shared namespace, in a temporary working
directory (files the snippets write land there). A block is skipped only when the line directly before
its opening fence is ``<!-- no-run -->``, for code that cannot run here (a GPU, several hosts, downloads).
Blocks in other languages (bash, text, json, ...) and indented code blocks are not run.

A page that needs a different JAX set-up (simulated devices) says so with a line
``<!-- doc-test-env: NAME=value ... -->``; it then runs in a fresh Python process with those
environment variables, since JAX reads them only once, at start-up.

Tracebacks point into the Markdown file: each block is compiled with the page's path as its file name and
its own line numbers. To run one page by hand (its output goes to the terminal, files to the current
directory): ``python tests/test_doc_snippets.py docs/autograd.md``.
"""
import logging
import os
import re
import subprocess
import sys
import types

import pytest

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir))
DOCS = os.path.join(ROOT, "docs")

# docs/api-reference.md is generated from the docstrings (tests/test_api_docs.py checks that it is up to
# date); its ```python blocks are signatures such as `class Block()`, not code to run.
GENERATED = {"docs/api-reference.md"}

NO_RUN = "<!-- no-run -->"
_ENV = re.compile(r"^<!-- doc-test-env:(?P<vars>(?:\s+[A-Za-z_][A-Za-z0-9_]*=\S+)+)\s+-->$")
_FENCE = re.compile(r"^(?P<indent> {0,3})(?P<fence>`{3,}|~{3,})\s*(?P<info>[^`\s]*)")
RUN_LANGUAGES = {"python", "py", "python3"}


def python_blocks(text):
    """The page's fenced python blocks: a list of (line number of the first code line, code, run?).

    Raises ValueError for an unclosed fence, or for a no-run marker that is not directly before a python
    fence (so that a marker cannot silently stop applying to anything)."""
    lines = text.splitlines()
    blocks, markers_used, i = [], set(), 0
    while i < len(lines):
        match = _FENCE.match(lines[i])
        if not match:
            i += 1
            continue
        fence, info, indent = match["fence"], match["info"].lower(), len(match["indent"])
        closing = re.compile(rf"^ {{0,3}}{re.escape(fence[0])}{{{len(fence)},}}\s*$")
        j = i + 1
        while j < len(lines) and not closing.match(lines[j]):
            j += 1
        if j == len(lines):
            raise ValueError(f"line {i + 1}: code fence {fence} is never closed")
        if info in RUN_LANGUAGES:
            body = [line[indent:] if not line[:indent].strip() else line for line in lines[i + 1:j]]
            marked = i > 0 and lines[i - 1].strip() == NO_RUN
            if marked:
                markers_used.add(i - 1)
            blocks.append((i + 2, "\n".join(body) + "\n", not marked))
        i = j + 1
    for n, line in enumerate(lines):
        if line.strip() == NO_RUN and n not in markers_used:
            raise ValueError(f"line {n + 1}: {NO_RUN} is not directly before a ```python fence")
    return blocks


def page_env(text):
    """The environment variables a ``<!-- doc-test-env: ... -->`` line asks for (empty: run in-process)."""
    env = {}
    for line in text.splitlines():
        match = _ENV.match(line.strip())
        if match:
            env.update(item.split("=", 1) for item in match["vars"].split())
    return env


def run_page(path):
    """Run the page's python blocks in order, in one namespace, in the current directory."""
    with open(path, encoding="utf-8") as f:
        blocks = python_blocks(f.read())
    # a real module, so that classes and functions a snippet defines can be pickled (DataLoader workers)
    name = "doc_snippets_" + re.sub(r"\W", "_", os.path.relpath(path, ROOT))
    module = types.ModuleType(name)
    module.__file__ = path
    saved = sys.modules.get(name)
    sys.modules[name] = module
    try:
        for line, code, run in blocks:
            if run:  # padded so that tracebacks give the Markdown file's own line numbers
                exec(compile("\n" * (line - 1) + code, path, "exec"), module.__dict__)
    finally:
        if saved is None:
            sys.modules.pop(name, None)
        else:
            sys.modules[name] = saved


def _pages():
    """README.md and docs/*.md with python blocks (pages that fail to parse too, so that the test reports it)."""
    pages = ["README.md"] + sorted(f"docs/{n}" for n in os.listdir(DOCS) if n.endswith(".md"))
    runnable = []
    for page in pages:
        if page in GENERATED:
            continue
        with open(os.path.join(ROOT, page), encoding="utf-8") as f:
            try:
                if python_blocks(f.read()):
                    runnable.append(page)
            except ValueError:
                runnable.append(page)
    return runnable


def test_block_extraction():
    page = ("text\n```python\na = 1\n```\n```bash\nexit 1\n```\n<!-- no-run -->\n```python\nraise SystemExit\n```\n"
            "    indented = 'not run'\n````python\nb = '```'\n````\n")
    assert python_blocks(page) == [(3, "a = 1\n", True), (10, "raise SystemExit\n", False),
                                   (14, "b = '```'\n", True)]
    with pytest.raises(ValueError, match="not directly before"):
        python_blocks("<!-- no-run -->\n\n```python\npass\n```\n")
    with pytest.raises(ValueError, match="never closed"):
        python_blocks("```python\npass\n")
    assert page_env("x\n<!-- doc-test-env: A=1 B=two -->\n") == {"A": "1", "B": "two"}
    assert page_env("no directive\n") == {}


@pytest.fixture
def restore_logging():
    """Snippets may configure loggers (levels, handlers); undo that for the tests that follow."""
    loggers = [logging.getLogger()] + [logging.getLogger(name) for name in list(logging.root.manager.loggerDict)]
    saved = [(lg, lg.level, list(lg.handlers), lg.propagate) for lg in loggers]
    yield
    for lg, level, handlers, propagate in saved:
        lg.setLevel(level)
        lg.handlers[:] = handlers
        lg.propagate = propagate


@pytest.mark.parametrize("page", _pages())
def test_page_snippets_run(page, tmp_path, monkeypatch, restore_logging):
    path = os.path.join(ROOT, page)
    with open(path, encoding="utf-8") as f:
        text = f.read()
    if not any(run for _, _, run in python_blocks(text)):
        pytest.skip(f"every python block of {page} is marked {NO_RUN}")
    monkeypatch.setenv("MPLBACKEND", "Agg")
    env = page_env(text)
    if env:
        full = dict(os.environ, **env)
        full["PYTHONPATH"] = os.pathsep.join([ROOT, os.environ.get("PYTHONPATH", "")])
        proc = subprocess.run([sys.executable, os.path.abspath(__file__), path], cwd=tmp_path, env=full,
                              capture_output=True, text=True, timeout=600)
        assert proc.returncode == 0, f"{page} (run with {env}):\n{proc.stderr[-6000:]}"
        return
    monkeypatch.chdir(tmp_path)
    try:
        run_page(path)
    finally:
        if "matplotlib.pyplot" in sys.modules:
            sys.modules["matplotlib.pyplot"].close("all")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python tests/test_doc_snippets.py PAGE.md   (runs its python blocks in the current directory)")
    sys.path.insert(0, ROOT)
    os.environ.setdefault("MPLBACKEND", "Agg")
    run_page(os.path.abspath(sys.argv[1]))
