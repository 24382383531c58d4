"""``mxnet.lr_scheduler``: hybrid's learning-rate schedules (``hybrid.lr_scheduler``)."""
from ..lr_scheduler import *  # noqa: F401,F403
from ..lr_scheduler import __all__  # noqa: F401
