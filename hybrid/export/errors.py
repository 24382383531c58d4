"""Errors of the export package (defined in :mod:`hybrid.errors` with all of hybrid's errors)."""
from __future__ import annotations

from ..errors import ExportError, FormatError

__all__ = ["FormatError", "ExportError"]
