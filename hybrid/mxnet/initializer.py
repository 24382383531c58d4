"""``mxnet.initializer`` (``mx.init``): hybrid's initializers (``hybrid.init``) under MXNet's names."""
from ..init import *  # noqa: F401,F403
from ..init import __all__ as _names

__all__ = list(_names)


def __getattr__(name: str):
    if name in ("Orthogonal", "Bilinear", "Mixed", "Load", "InitDesc", "FusedRNN"):
        raise AttributeError(f"mx.init.{name} is not available in hybrid: any function (shape, dtype) -> array "
                             "serves as an initializer (weight_initializer=, Parameter(init=)); "
                             "see docs/porting-from-gluon.md")
    raise AttributeError(f"module 'mx.init' has no attribute {name!r}")
