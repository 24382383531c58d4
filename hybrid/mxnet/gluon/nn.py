"""``mxnet.gluon.nn``: hybrid's layers (``hybrid.nn``) with Gluon 1.x's names, plus ``SymbolBlock``."""
from ...nn import *  # noqa: F401,F403
from ...nn import __all__ as _layers
from .block import SymbolBlock  # noqa: F401

__all__ = list(_layers) + ["SymbolBlock"]
