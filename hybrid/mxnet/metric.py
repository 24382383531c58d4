"""``mxnet.metric``: hybrid's evaluation metrics (``hybrid.metric``)."""
from ..metric import *  # noqa: F401,F403
from ..metric import __all__  # noqa: F401
