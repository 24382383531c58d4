"""``mxnet.gluon.parameter``: ``Parameter``, ``Constant``, ``ParameterDict`` and the deferred-init error."""
from ...errors import DeferredInitializationError
from ...parameter import Constant, Parameter, ParameterDict

__all__ = ["Parameter", "Constant", "ParameterDict", "DeferredInitializationError"]
