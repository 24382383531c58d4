"""The benchmark suite: five models in every framework, built from one canonical specification.

``FRAMEWORKS`` maps each framework variant to ``(module, variant)``; ``build(framework, model, batch)``
imports the module and returns a :class:`spec.Case`. This file is imported by every worker, including the
MXNet one on Python 3.8, so it imports nothing but the standard library.
"""
from collections import OrderedDict
from importlib import import_module

FRAMEWORKS = OrderedDict([
    ("hybrid_eager", ("hybrid_models", "eager")),
    ("hybrid_hybridized", ("hybrid_models", "hybridized")),  # net and loss block hybridized
    ("hybrid_gluon_loop", ("hybrid_models", "gluon_loop")),  # net hybridized, loss block not
    ("hybrid_mean_head", ("hybrid_models", "mean_head")),  # as gluon_loop, backward on loss.mean(), step(1)
    ("hybrid_compiled", ("hybrid_models", "compiled")),
    ("jax_handwritten", ("jax_handwritten", None)),
    ("jax_handwritten_oihw", ("jax_handwritten", "oihw")),  # convolution kernels stored OIHW, as in Gluon
    ("flax_nnx", ("flax_nnx", None)),
    ("equinox", ("equinox_models", None)),
    ("torch_eager", ("torch_models", "eager")),
    ("torch_compile", ("torch_models", "compile")),
    ("mxnet_gluon_eager", ("mxnet_models", "eager")),
    ("mxnet_gluon_hybridized", ("mxnet_models", "hybridized")),
])
LIMIT = "jax_handwritten"


def build(framework, model, batch):
    """Build ``model`` at ``batch`` in ``framework``; ImportError when the framework is not installed,
    ``spec.Unavailable`` when the variant cannot run here."""
    module_name, variant = FRAMEWORKS[framework]
    module = import_module(__name__ + "." + module_name)
    return module.build(model, batch, variant)
