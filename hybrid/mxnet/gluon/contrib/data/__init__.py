"""``mxnet.gluon.contrib.data``: ``IntervalSampler`` and the text datasets ``text.WikiText2``/``WikiText103``."""
from .....data.sampler import IntervalSampler
from . import text  # noqa: F401

__all__ = ["IntervalSampler", "text"]
