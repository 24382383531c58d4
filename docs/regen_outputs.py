"""Rewrite the printed outputs shown in the docs with what their code prints now.

    python docs/regen_outputs.py                  # every page with <!-- output --> blocks
    python docs/regen_outputs.py docs/passes.md   # these pages only

A ```text block after a python block marked ``<!-- output -->`` shows that block's output, and
tests/test_doc_snippets.py fails when they differ (the marker and its ``ignore=`` pattern are described
there). This script runs each page the way that test does (a fresh process in a temporary directory,
with the page's ``doc-test-env`` variables) and writes the outputs into the page. Review the diff
before committing: a changed figure may be a regression rather than stale text.
"""
from __future__ import annotations

import argparse
import importlib.util
import os
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _runner():
    spec = importlib.util.spec_from_file_location("test_doc_snippets",
                                                  os.path.join(ROOT, "tests", "test_doc_snippets.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def pages_with_outputs(runner) -> list[str]:
    """README.md and docs/*.md pages that have at least one output block."""
    found = []
    for page in runner._pages():
        with open(os.path.join(ROOT, page), encoding="utf-8") as f:
            if any(block.output for block in runner.parse_page(f.read())):
                found.append(page)
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("pages", nargs="*", help="Markdown pages (default: every page with output blocks)")
    args = parser.parse_args(argv)
    runner = _runner()
    pages = args.pages or [os.path.join(ROOT, p) for p in pages_with_outputs(runner)]
    failed = 0
    for page in pages:
        with tempfile.TemporaryDirectory() as tmp:
            proc = runner.run_in_process(os.path.abspath(page), write=True, cwd=tmp)
        if proc.returncode != 0:
            failed += 1
            print(f"{page}: failed, nothing rewritten\n{proc.stderr[-4000:]}", file=sys.stderr)
        else:
            print(proc.stderr.strip().splitlines()[-1])
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
