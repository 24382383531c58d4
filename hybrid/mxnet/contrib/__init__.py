"""``mxnet.contrib``: ``contrib.text`` (token counting and ``Vocabulary``)."""
from . import text  # noqa: F401

__all__ = ["text"]
