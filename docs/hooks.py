"""MkDocs hooks for the documentation site (mkdocs.yml): docstrings rendered by mkdocstrings keep Sphinx
cross-reference roles such as ``:class:`~hybrid.nn.Dense```, shown as plain code; the pictures the pages
show are drawn at build time and never kept in the tree: the benchmark suite's chart (``images/suite.png``)
from the committed results, the curves of ``fit.md`` (``images/fit-curves.png``) by that page's own code."""
from __future__ import annotations

import hashlib
import io
import json
import os
import pathlib
import re
import subprocess
import sys
import tempfile

from mkdocs.structure.files import File

_ROOT = pathlib.Path(__file__).resolve().parent.parent
_SUITE_RESULTS = _ROOT / "benchmarks" / "results" / "suite-cpu.json"
_FIT_PAGE = _ROOT / "docs" / "fit.md"
_PYTHON_BLOCK = re.compile(r"^```python\n(.*?)^```", re.S | re.M)

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
    files.append(File.generated(config, "images/fit-curves.png", content=_fit_curves()))
    return files


def _fit_curves() -> bytes:
    """``fit-curves.png`` as the first code block of ``fit.md`` writes it (run once per version of the
    block; the picture is kept in the temporary directory between builds)."""
    code = _PYTHON_BLOCK.search(_FIT_PAGE.read_text()).group(1)
    work = pathlib.Path(tempfile.gettempdir()) / f"hybrid-docs-{hashlib.sha256(code.encode()).hexdigest()[:16]}"
    picture = work / "fit-curves.png"
    if not picture.exists():
        work.mkdir(exist_ok=True)
        env = dict(os.environ, PYTHONPATH=str(_ROOT), MPLBACKEND="Agg")
        subprocess.run([sys.executable, "-c", code], cwd=work, env=env, check=True, capture_output=True, timeout=600)
    return picture.read_bytes()
