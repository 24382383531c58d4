"""Parametric and named activation layers (hybrid/nn/activations.py): LeakyReLU, ELU, SELU, GELU, SiLU,
Swish and PReLU. Forward against NumPy, hybridized against eager (outputs and gradients), and gradients
(of PReLU's alpha, or of the input) against finite differences of the NumPy reference."""
from hybrid import init, nn

import references_nn as refn
from helpers import LayerCase, layer_case_tests


CASES = [
    *[LayerCase(f"activation_{name}", make, (3, 7), (lambda a, f=refn.ACTIVATIONS[name]: f(a["x"])))
      for name, make in [("leaky_relu", lambda: nn.LeakyReLU(0.1)), ("elu", lambda: nn.ELU(0.7)),
                         ("selu", nn.SELU), ("gelu_erf", nn.GELU), ("gelu_tanh", lambda: nn.GELU("tanh")),
                         ("silu", nn.SiLU), ("swish", lambda: nn.Swish(1.5))]],
    LayerCase("prelu", lambda: nn.PReLU(), (3, 4), lambda a: refn.prelu(a["x"], a["alpha"])),
    LayerCase("prelu_channels", lambda: nn.PReLU(init.Normal(0.5), in_channels=3), (2, 3, 4),
              lambda a: refn.prelu(a["x"], a["alpha"])),
]
globals().update(layer_case_tests(CASES))
