"""``mxnet.gluon.rnn``: hybrid's recurrent layers and cells (``hybrid.rnn``)."""
from ...rnn import *  # noqa: F401,F403
from ...rnn import __all__  # noqa: F401
