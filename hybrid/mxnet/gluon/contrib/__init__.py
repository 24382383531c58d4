"""``mxnet.gluon.contrib``: the 1.x contrib layers (``contrib.nn``) and ``contrib.estimator``."""
from .... import estimator  # noqa: F401
from . import nn  # noqa: F401

__all__ = ["nn", "estimator"]
