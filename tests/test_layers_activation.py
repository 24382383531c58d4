"""Parametric and named activation layers (hybrid/nn/activations.py): LeakyReLU, ELU, SELU, GELU, SiLU,
Swish and PReLU. Forward against NumPy, hybridized against eager (outputs and gradients), and gradients
(of PReLU's alpha, or of the input) against finite differences of the NumPy reference."""
import pytest

from hybrid import init, nn

import references_nn as refn
from helpers import (LayerCase, alternating_modes, check_forward_matches_numpy,
                     check_gradients_match_finite_differences, check_hybridized_equals_eager,
                     check_input_gradients_of_parameter_free_layer)


CASES = [
    *[LayerCase(f"activation_{name}", make, (3, 7), (lambda a, f=refn.ACTIVATIONS[name]: f(a["x"])))
      for name, make in [("leaky_relu", lambda: nn.LeakyReLU(0.1)), ("elu", lambda: nn.ELU(0.7)),
                         ("selu", nn.SELU), ("gelu_erf", nn.GELU), ("gelu_tanh", lambda: nn.GELU("tanh")),
                         ("silu", nn.SiLU), ("swish", lambda: nn.Swish(1.5))]],
    LayerCase("prelu", lambda: nn.PReLU(), (3, 4), lambda a: refn.prelu(a["x"], a["alpha"])),
    LayerCase("prelu_channels", lambda: nn.PReLU(init.Normal(0.5), in_channels=3), (2, 3, 4),
              lambda a: refn.prelu(a["x"], a["alpha"])),
]
IDS = [c.name for c in CASES]
WITH_PARAMS = [c for c in CASES if c.make().collect_params()]
PARAM_FREE = [c for c in CASES if c not in WITH_PARAMS]


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_forward_matches_numpy(case, rng):
    check_forward_matches_numpy(case, rng)


@pytest.mark.parametrize("case, training", alternating_modes(CASES, first_training=False))
def test_hybridized_equals_eager(case, training, rng):
    check_hybridized_equals_eager(case, training, rng, param_free=case in PARAM_FREE)


@pytest.mark.parametrize("case", WITH_PARAMS, ids=[c.name for c in WITH_PARAMS])
def test_gradients_match_finite_differences(case, rng):
    check_gradients_match_finite_differences(case, rng)


@pytest.mark.parametrize("case", PARAM_FREE, ids=[c.name for c in PARAM_FREE])
def test_input_gradients_of_parameter_free_layers(case, rng):
    check_input_gradients_of_parameter_free_layer(case, False, rng)  # hybridized: compared above
