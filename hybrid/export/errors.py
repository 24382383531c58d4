"""Errors of the export package."""
from __future__ import annotations

from ..serialization import FormatError

__all__ = ["FormatError", "ExportError"]


class ExportError(ValueError):
    """A block or graph cannot be written in the requested format (the message says why and what to use)."""
