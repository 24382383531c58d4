"""``mxnet.autograd``: hybrid's ``record``/``pause``/``backward``/``grad`` (``hybrid.autograd``)."""
from ..autograd import *  # noqa: F401,F403
from ..autograd import __all__ as _names

__all__ = list(_names)


def mark_variables(*args, **kwargs):
    """Not available: JAX arrays hold no gradient buffers."""
    raise NotImplementedError("autograd.mark_variables: jax.Array holds no gradient buffer; differentiate with "
                              "g = autograd.grad(y, x) for arrays x used inside autograd.record(), or use Parameters")


def get_symbol(*args, **kwargs):
    """Not available: there is no Symbol API; ``hybrid.inspect(net, x)`` shows a hybridized graph."""
    raise NotImplementedError("autograd.get_symbol: hybrid records no Symbol; use hybrid.inspect(net, x) to see a "
                              "hybridized graph")
