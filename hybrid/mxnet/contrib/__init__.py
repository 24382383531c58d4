"""``mxnet.contrib``: ``amp``, MXNet 1.x's automatic mixed precision (:mod:`hybrid.amp`), and ``io``'s
``DataLoaderIter``."""
from ... import amp
from . import io

__all__ = ["amp", "io"]
