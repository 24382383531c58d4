"""One table of MXNet operators with MXNet's attribute semantics.

It serves as ``F`` in Gluon 1.x ``hybrid_forward`` (MXNet's ``nd`` and ``sym`` faces at once: the same
calls work on concrete arrays and under tracing) and as the MXNet symbol importer
(:mod:`hybrid.gluon1.symbol_graph`). ``OPERATORS`` maps every MXNet name and alias to its :class:`Op`.
"""
from __future__ import annotations

from . import (contrib, custom, detection, elementwise, image, index, nn, random, reduce, rnn,  # noqa: F401
               signatures, tensor)
from ._namespace import F, Namespace
from .control_flow import attach as _attach_control_flow
from ._registry import OPERATORS, Attrs, Op, OpContext, UnsupportedOperatorError, call_op, get_op, register
from .tensor import mxnet_reshape

signatures.apply(OPERATORS)
_attach_control_flow(F.contrib)

__all__ = ["F", "Attrs", "OpContext", "Op", "OPERATORS", "get_op", "call_op", "register", "Namespace",
           "UnsupportedOperatorError", "mxnet_reshape"]
