"""``mxnet.contrib.text``: ``utils.count_tokens_from_str`` and ``vocab.Vocabulary`` (no embeddings)."""
from . import utils, vocab  # noqa: F401

__all__ = ["utils", "vocab"]
