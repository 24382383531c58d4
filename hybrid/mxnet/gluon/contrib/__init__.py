"""``mxnet.gluon.contrib``: the 1.x contrib layers (``contrib.nn``), cells (``contrib.rnn``) and
``contrib.estimator``."""
from .... import estimator  # noqa: F401
from . import nn, rnn  # noqa: F401

__all__ = ["nn", "rnn", "estimator"]
