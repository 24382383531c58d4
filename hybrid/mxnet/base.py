"""``mxnet.base``: the error type and the type tuples model code checks against."""
from __future__ import annotations

import numpy as np

from ..errors import HybridError

__all__ = ["MXNetError", "string_types", "numeric_types", "integer_types", "py_str"]

# MXNet raises MXNetError for operator and shape failures; hybrid's own errors (ShapeError, HybridizeError,
# ...) all derive from HybridError, so ``except mx.base.MXNetError`` catches them.
MXNetError = HybridError

string_types = (str,)
numeric_types = (float, int, np.generic)
integer_types = (int, np.integer)


def py_str(value: bytes | str) -> str:
    """``value`` as ``str`` (bytes are decoded as UTF-8)."""
    return value.decode("utf-8") if isinstance(value, bytes) else value
