"""MXNet's operator table, ``F`` of Gluon 1.x ``hybrid_forward``: implemented in :mod:`hybrid.gluon1.ops`."""
from ...gluon1.ops import *  # noqa: F401,F403
from ...gluon1.ops import __all__  # noqa: F401
from ...gluon1.ops import contrib, custom, detection, elementwise, image, index, nn, random, reduce, signatures, tensor  # noqa: F401
