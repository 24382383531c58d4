"""MkDocs hook for the documentation site (mkdocs.yml): docstrings rendered by mkdocstrings keep Sphinx
cross-reference roles such as ``:class:`~hybrid.nn.Dense```; show them as plain code."""
from __future__ import annotations

import re

_ROLE = re.compile(r":(?:class|func|meth|mod|data|attr|exc|obj):<code>~?")


def on_page_content(html: str, **kwargs) -> str:
    """``:class:<code>~hybrid.nn.Dense</code>`` -> ``<code>hybrid.nn.Dense</code>``."""
    return _ROLE.sub("<code>", html)
