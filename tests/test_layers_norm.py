"""Group and instance normalisation (hybrid/nn/norm_layers.py): forward against NumPy, hybridized
against eager (outputs and gradients), and gradients against finite differences of the NumPy reference."""
import pytest

from hybrid import init, nn

import references_nn as refn
from helpers import (LayerCase, alternating_modes, check_forward_matches_numpy,
                     check_gradients_match_finite_differences, check_hybridized_equals_eager)

NORMAL = dict(gamma_initializer=init.Normal(1.0), beta_initializer=init.Normal(1.0))

CASES = [
    LayerCase("groupnorm", lambda: nn.GroupNorm(2, **NORMAL), (2, 4, 3, 2),
              lambda a: refn.group_norm(a["x"], a["gamma"], a["beta"], 2, 1e-5)),
    LayerCase("groupnorm_1d_eps", lambda: nn.GroupNorm(3, epsilon=0.1, in_channels=6, **NORMAL), (2, 6, 4),
              lambda a: refn.group_norm(a["x"], a["gamma"], a["beta"], 3, 0.1)),
    LayerCase("instancenorm_scaled", lambda: nn.InstanceNorm(scale=True, **NORMAL), (2, 3, 4, 2),
              lambda a: refn.instance_norm(a["x"], a["gamma"], a["beta"], 1e-5)),
    LayerCase("instancenorm_channels_last", lambda: nn.InstanceNorm(axis=-1, beta_initializer=init.Normal(1.0)),
              (2, 5, 3), lambda a: refn.instance_norm(a["x"], a["gamma"], a["beta"], 1e-5, axis=-1)),
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
