"""``mxnet.contrib``: ``amp``, MXNet 1.x's automatic mixed precision (:mod:`hybrid.amp`)."""
from ... import amp

__all__ = ["amp"]
