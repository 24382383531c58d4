"""``mxnet.gluon.contrib``: the 1.x contrib layers (``contrib.nn``), cells (``contrib.rnn``),
``contrib.estimator`` and ``contrib.data`` (``IntervalSampler``, the WikiText datasets)."""
from .... import estimator  # noqa: F401
from . import data, nn, rnn  # noqa: F401

__all__ = ["nn", "rnn", "estimator", "data"]
