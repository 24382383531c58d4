"""``mxnet.contrib``: ``amp``, MXNet 1.x's automatic mixed precision (:mod:`hybrid.amp`), ``io``'s
``DataLoaderIter`` and ``contrib.text`` (token counting and ``Vocabulary``)."""
from ... import amp
from . import io, text  # noqa: F401

__all__ = ["amp", "io", "text"]
