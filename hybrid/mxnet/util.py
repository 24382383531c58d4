"""``mxnet.util``: the NumPy-semantics switches of ``mx.npx`` under the module name Gluon 1.x code imports
them from (``from mxnet.util import is_np_array``)."""
from .numpy_extension import (is_np_array, is_np_shape, reset_np, set_np, set_np_shape, use_np, use_np_array,
                              use_np_shape)

__all__ = ["is_np_array", "is_np_shape", "reset_np", "set_np", "set_np_shape", "use_np", "use_np_array",
           "use_np_shape"]
