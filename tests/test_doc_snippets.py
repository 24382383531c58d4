"""Every ```python block of README.md and docs/*.md runs.

One test per page: its python blocks run in order, in one shared namespace, in a temporary working
directory (files the snippets write land there). A block is skipped only when the line directly before
its opening fence is ``<!-- no-run -->``, for code that cannot run here (a GPU, several hosts, downloads).
Blocks in other languages (bash, text, json, ...) and indented code blocks are not run.

A page that needs a different JAX set-up (simulated devices) says so with a line
``<!-- doc-test-env: NAME=value ... -->``; it then runs in a fresh Python process with those
environment variables, since JAX reads them only once, at start-up.

Printed output shown on a page is checked too. A python block preceded by the line ``<!-- output -->`` must
be followed (blank lines between are allowed) by a fenced block whose info string is ``text``; that block
holds what the python block prints, stdout and stderr together as a terminal shows them (``hybrid:`` log
lines included). Trailing spaces and trailing blank lines are not compared. Where part of the output
changes from run to run (timings), the marker names it with a regular expression,
``<!-- output ignore=in [0-9.]+ s -->``: its matches count as equal whatever they hold. Use it sparingly;
print numbers rounded instead where that is enough. A page with such blocks runs in a fresh Python
process, so that names counted per process (``dense0``) and first-compile log lines match a clean start.
``python docs/regen_outputs.py [PAGE.md ...]`` re-runs the pages and rewrites their output blocks.

Tracebacks point into the Markdown file: each block is compiled with the page's path as its file name and
its own line numbers. To run one page by hand (its output goes to the terminal, files to the current
directory): ``python tests/test_doc_snippets.py docs/autograd.md``; ``--write`` rewrites the page's
output blocks with what its blocks printed.
"""
import difflib
import logging
import os
import re
import subprocess
import sys
import types
from typing import NamedTuple

import pytest

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir))
DOCS = os.path.join(ROOT, "docs")

NO_RUN = "<!-- no-run -->"
_OUTPUT = re.compile(r"^<!-- output(?: ignore=(?P<ignore>.+?))? -->$")
_ENV = re.compile(r"^<!-- doc-test-env:(?P<vars>(?:\s+[A-Za-z_][A-Za-z0-9_]*=\S+)+)\s+-->$")
_FENCE = re.compile(r"^(?P<indent> {0,3})(?P<fence>`{3,}|~{3,})\s*(?P<info>[^`\s]*)")
RUN_LANGUAGES = {"python", "py", "python3"}


class Output(NamedTuple):
    """The ```text block showing a python block's output: its body lines ``[first, end)`` (0-based, fences
    excluded), their text without the fence's indentation, the fence's indentation and the ignore pattern."""
    first: int
    end: int
    text: str
    indent: int
    ignore: str | None


class Block(NamedTuple):
    """A ```python block: the line number of its first code line, the code, whether it runs, its Output."""
    line: int
    code: str
    run: bool
    output: Output | None


def _fences(lines):
    """Every fenced block: (opening line index, closing line index, info string, indentation).

    Raises ValueError for an unclosed fence."""
    fences, i = [], 0
    while i < len(lines):
        match = _FENCE.match(lines[i])
        if not match:
            i += 1
            continue
        fence = match["fence"]
        closing = re.compile(rf"^ {{0,3}}{re.escape(fence[0])}{{{len(fence)},}}\s*$")
        j = i + 1
        while j < len(lines) and not closing.match(lines[j]):
            j += 1
        if j == len(lines):
            raise ValueError(f"line {i + 1}: code fence {fence} is never closed")
        fences.append((i, j, match["info"].lower(), len(match["indent"])))
        i = j + 1
    return fences


def _body(lines, indent):
    return [line[indent:] if not line[:indent].strip() else line for line in lines]


def parse_page(text):
    """The page's fenced python blocks, as Blocks.

    Raises ValueError for an unclosed fence, for a no-run or output marker that is not directly before a
    python fence (so that a marker cannot silently stop applying to anything), for an output marker on a
    block that does not run, and for an output marker with no ```text block after its python block."""
    lines = text.splitlines()
    fences = _fences(lines)
    blocks, markers_used = [], set()
    for k, (i, j, info, indent) in enumerate(fences):
        if info not in RUN_LANGUAGES:
            continue
        marker = lines[i - 1].strip() if i > 0 else ""
        output_marker = _OUTPUT.match(marker)
        if marker == NO_RUN or output_marker:
            markers_used.add(i - 1)
        output = None
        if output_marker:
            if output_marker["ignore"]:
                try:
                    re.compile(output_marker["ignore"])
                except re.error as e:
                    raise ValueError(f"line {i}: bad ignore= pattern {output_marker['ignore']!r}: {e}") from None
            nxt = fences[k + 1] if k + 1 < len(fences) else None
            if nxt is None or nxt[2] != "text" or any(line.strip() for line in lines[j + 1:nxt[0]]):
                raise ValueError(f"line {i}: {marker} must be followed by a ```text block after its python block")
            body = _body(lines[nxt[0] + 1:nxt[1]], nxt[3])
            output = Output(nxt[0] + 1, nxt[1], "\n".join(body) + "\n" if body else "", nxt[3],
                            output_marker["ignore"])
        body = _body(lines[i + 1:j], indent)
        blocks.append(Block(i + 2, "\n".join(body) + "\n", marker != NO_RUN, output))
    for n, line in enumerate(lines):
        stripped = line.strip()
        if (stripped == NO_RUN or _OUTPUT.match(stripped)) and n not in markers_used:
            raise ValueError(f"line {n + 1}: {stripped} is not directly before a ```python fence")
    return blocks


def python_blocks(text):
    """The page's fenced python blocks: a list of (line number of the first code line, code, run?).

    Raises ValueError as ``parse_page`` does."""
    return [(b.line, b.code, b.run) for b in parse_page(text)]


def page_env(text):
    """The environment variables a ``<!-- doc-test-env: ... -->`` line asks for (empty: run in-process)."""
    env = {}
    for line in text.splitlines():
        match = _ENV.match(line.strip())
        if match:
            env.update(item.split("=", 1) for item in match["vars"].split())
    return env


class _Terminal:
    """stdout and stderr of a page run: what is written goes to the current block's buffer, in order,
    and to the real stream too when ``echo``. Handlers created by a block (``logging.StreamHandler``)
    keep this object, so later blocks' log lines are captured as well."""

    def __init__(self, stream, echo):
        self.stream, self.echo, self.buffer = stream, echo, []

    def write(self, text):
        self.buffer.append(text)
        if self.echo:
            self.stream.write(text)
        return len(text)

    def flush(self):
        self.stream.flush()

    def isatty(self):
        return False

    @property
    def encoding(self):
        return self.stream.encoding


def run_page(path, echo=True):
    """Run the page's python blocks in order, in one namespace, in the current directory.

    Returns what each block with an output marker printed, as {block index: text}."""
    with open(path, encoding="utf-8") as f:
        blocks = parse_page(f.read())
    # a real module, so that classes and functions a snippet defines can be pickled (DataLoader workers)
    name = "doc_snippets_" + re.sub(r"\W", "_", os.path.relpath(path, ROOT))
    module = types.ModuleType(name)
    module.__file__ = path
    saved = sys.modules.get(name)
    sys.modules[name] = module
    captured = {}
    capturing = any(b.output for b in blocks)
    real = sys.stdout, sys.stderr
    terminal = _Terminal(sys.stdout, echo)
    if capturing:
        sys.stdout = sys.stderr = terminal
    try:
        for index, block in enumerate(blocks):
            if block.run:  # padded so that tracebacks give the Markdown file's own line numbers
                terminal.buffer = []
                exec(compile("\n" * (block.line - 1) + block.code, path, "exec"), module.__dict__)
                terminal.flush()
                if block.output:
                    captured[index] = "".join(terminal.buffer)
    finally:
        sys.stdout, sys.stderr = real
        if saved is None:
            sys.modules.pop(name, None)
        else:
            sys.modules[name] = saved
    return captured


def _normalised(text, ignore):
    lines = [line.rstrip() for line in text.splitlines()]
    while lines and not lines[-1]:
        lines.pop()
    text = "\n".join(lines)
    return re.sub(ignore, "<ignored>", text) if ignore else text


def output_mismatches(path, captured):
    """A message for each output block of the page that differs from what its block printed."""
    with open(path, encoding="utf-8") as f:
        blocks = parse_page(f.read())
    problems = []
    for index, printed in captured.items():
        shown = blocks[index].output
        if _normalised(printed, shown.ignore) != _normalised(shown.text, shown.ignore):
            diff = difflib.unified_diff(_normalised(shown.text, None).splitlines(),
                                        _normalised(printed, None).splitlines(), "shown", "printed", lineterm="")
            problems.append(f"{os.path.relpath(path, ROOT)}, line {shown.first}: the ```text block is not what "
                            f"the python block above it prints (python docs/regen_outputs.py rewrites it):\n" +
                            "\n".join(diff))
    return problems


def write_outputs(path, captured):
    """Rewrite the page's output blocks with what their blocks printed; return whether the file changed."""
    with open(path, encoding="utf-8") as f:
        text = f.read()
    blocks, lines = parse_page(text), text.splitlines()
    for index in sorted(captured, key=lambda i: -blocks[i].output.first):   # bottom up: line numbers stay valid
        shown = blocks[index].output
        body = [" " * shown.indent + line if line else "" for line in _normalised(captured[index], None).split("\n")]
        if "\n".join(body).strip().startswith("```") or any(_FENCE.match(line) for line in body):
            raise ValueError(f"{path}: the output of the block at line {blocks[index].line} contains a code fence")
        lines[shown.first:shown.end] = body if captured[index].strip() else []
    new = "\n".join(lines) + "\n"
    if new != text:
        with open(path + ".tmp", "w", encoding="utf-8") as f:
            f.write(new)
        os.replace(path + ".tmp", path)
    return new != text


def _pages():
    """README.md and docs/*.md with python blocks (pages that fail to parse too, so that the test reports it)."""
    pages = ["README.md"] + sorted(f"docs/{n}" for n in os.listdir(DOCS) if n.endswith(".md"))
    runnable = []
    for page in pages:
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


def run_in_process(path, write=False, cwd=None):
    """Run ``path`` by this file's command line in a fresh Python process, with the page's environment
    variables; return the CompletedProcess (its stdout holds what the blocks printed)."""
    with open(path, encoding="utf-8") as f:
        env = dict(os.environ, **page_env(f.read()))
    env["PYTHONPATH"] = os.pathsep.join([ROOT, os.environ.get("PYTHONPATH", "")])
    env.setdefault("MPLBACKEND", "Agg")
    command = [sys.executable, os.path.abspath(__file__)] + (["--write"] if write else []) + [path]
    return subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=600)


@pytest.mark.parametrize("page", _pages())
def test_page_snippets_run(page, tmp_path, monkeypatch, restore_logging):
    path = os.path.join(ROOT, page)
    with open(path, encoding="utf-8") as f:
        text = f.read()
    blocks = parse_page(text)
    if not any(b.run for b in blocks):
        pytest.skip(f"every python block of {page} is marked {NO_RUN}")
    monkeypatch.setenv("MPLBACKEND", "Agg")
    if page_env(text) or any(b.output for b in blocks):
        proc = run_in_process(path, cwd=tmp_path)
        assert proc.returncode == 0, f"{page} (run with {page_env(text)}):\n{proc.stderr[-6000:]}"
        return
    monkeypatch.chdir(tmp_path)
    try:
        run_page(path)
    finally:
        if "matplotlib.pyplot" in sys.modules:
            sys.modules["matplotlib.pyplot"].close("all")


def test_output_blocks_are_checked_and_rewritten(tmp_path, monkeypatch):
    page = ("# t\n<!-- output -->\n```python\nimport sys\nprint('a')\nprint('b', file=sys.stderr)\n```\n\n"
            "```text\na\nstale\n```\n<!-- output ignore=[0-9.]+ s -->\n```python\nprint('took 0.25 s')\n```\n"
            "```text\ntook 9.5 s\n```\n")
    path = tmp_path / "page.md"
    path.write_text(page)
    monkeypatch.chdir(tmp_path)
    blocks = parse_page(page)
    assert blocks[0].output.text == "a\nstale\n" and blocks[0].output.ignore is None
    assert blocks[1].output.ignore == "[0-9.]+ s"
    captured = run_page(str(path), echo=False)
    assert captured == {0: "a\nb\n", 1: "took 0.25 s\n"}
    problems = output_mismatches(str(path), captured)
    assert len(problems) == 1 and "line 9:" in problems[0] and "-stale" in problems[0] and "+b" in problems[0]
    assert write_outputs(str(path), captured)
    assert "```text\na\nb\n```" in path.read_text() and "took 0.25 s" in path.read_text()
    assert output_mismatches(str(path), run_page(str(path), echo=False)) == []
    assert not write_outputs(str(path), run_page(str(path), echo=False))
    for bad, message in [("<!-- output -->\n```python\npass\n```\ntext\n```text\n```\n", "followed by"),
                         ("<!-- output -->\n```python\npass\n```\n```\nx\n```\n", "followed by"),
                         ("<!-- output -->\n\n```python\npass\n```\n", "not directly before"),
                         ("<!-- output ignore=( -->\n```python\npass\n```\n```text\n```\n", "bad ignore")]:
        with pytest.raises(ValueError, match=message):
            parse_page(bad)


def main(argv):
    """``python tests/test_doc_snippets.py [--write] PAGE.md``: run the page here, print what its blocks
    print, then check its output blocks (exit status 1 on a difference) or, with --write, rewrite them."""
    write = argv[:1] == ["--write"]
    if len(argv) != 1 + write:
        print("usage: python tests/test_doc_snippets.py [--write] PAGE.md   "
              "(runs its python blocks in the current directory)", file=sys.stderr)
        return 2
    sys.path.insert(0, ROOT)
    os.environ.setdefault("MPLBACKEND", "Agg")
    path = os.path.abspath(argv[-1])
    captured = run_page(path)
    if write:
        print(f"{os.path.relpath(path, ROOT)}: " + ("output blocks rewritten" if write_outputs(path, captured)
                                                    else "output blocks unchanged"), file=sys.stderr)
        return 0
    problems = output_mismatches(path, captured)
    for problem in problems:
        print(problem, file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
