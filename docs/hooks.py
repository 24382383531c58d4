"""MkDocs hooks for the documentation site (mkdocs.yml): docstrings rendered by mkdocstrings keep Sphinx
cross-reference roles such as ``:class:`~hybrid.nn.Dense```, shown as plain code; the benchmark suite's
chart (``images/suite.png``) is drawn at build time from the committed results, never kept in the tree."""
from __future__ import annotations

import io
import json
import pathlib
import re
import sys

from mkdocs.structure.files import File

_ROOT = pathlib.Path(__file__).resolve().parent.parent
_SUITE_RESULTS = _ROOT / "benchmarks" / "results" / "suite-cpu.json"

_ROLE = re.compile(r":(?:class|func|meth|mod|data|attr|exc|obj):<code>~?")


def on_page_content(html: str, **kwargs) -> str:
    """``:class:<code>~hybrid.nn.Dense</code>`` -> ``<code>hybrid.nn.Dense</code>``."""
    return _ROLE.sub("<code>", html)


def on_files(files, config, **kwargs):
    """Add ``images/suite.png``, drawn from ``benchmarks/results/suite-cpu.json`` (needs matplotlib)."""
    sys.path.insert(0, str(_ROOT))
    try:
        from benchmarks.suite.chart import draw
    finally:
        sys.path.remove(str(_ROOT))
    buffer = io.BytesIO()
    draw(json.loads(_SUITE_RESULTS.read_text()), buffer)
    files.append(File.generated(config, "images/suite.png", content=buffer.getvalue()))
    return files
