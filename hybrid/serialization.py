"""Array files: atomic writes and verified, pickle-free loading (implemented in
:mod:`hybrid.formats.serialization`)."""
from .formats.serialization import *  # noqa: F401,F403
from .formats.serialization import __all__  # noqa: F401
