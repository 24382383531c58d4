"""Concatenate, HybridConcatenate and Identity (hybrid/nn/basic_layers.py): branches run on the same
input, forward against NumPy, hybridized against eager (outputs and gradients), and gradients against
finite differences of the NumPy reference."""
import numpy as np
import pytest

from hybrid import init, nn

import references as ref
from conftest import assert_close
from helpers import (LayerCase, alternating_modes, check_forward_matches_numpy,
                     check_gradients_match_finite_differences, check_hybridized_equals_eager,
                     check_input_gradients_of_parameter_free_layer, run_with_grads)


def _concatenated_branches():
    net = nn.HybridConcatenate(axis=1)
    net.add(nn.Dense(3), nn.Identity(), nn.HybridLambda("tanh"))
    return net


CASES = [
    LayerCase("identity", nn.Identity, (2, 3), lambda a: a["x"]),
    LayerCase("hybrid_concatenate", _concatenated_branches, (2, 4),
              lambda a: np.concatenate([ref.dense(a["x"], a["0.weight"], a["0.bias"]), a["x"], np.tanh(a["x"])], 1)),
]
IDS = [c.name for c in CASES]
WITH_PARAMS = [c for c in CASES if c.make().collect_params()]
PARAM_FREE = [c for c in CASES if c not in WITH_PARAMS]


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_forward_matches_numpy(case, rng):
    check_forward_matches_numpy(case, rng)


@pytest.mark.parametrize("case, training", alternating_modes(CASES, first_training=True))
def test_hybridized_equals_eager(case, training, rng):
    check_hybridized_equals_eager(case, training, rng, param_free=case in PARAM_FREE)


@pytest.mark.parametrize("case", WITH_PARAMS, ids=[c.name for c in WITH_PARAMS])
def test_gradients_match_finite_differences(case, rng):
    check_gradients_match_finite_differences(case, rng)


@pytest.mark.parametrize("case", PARAM_FREE, ids=[c.name for c in PARAM_FREE])
def test_input_gradients_of_parameter_free_layers(case, rng):
    check_input_gradients_of_parameter_free_layer(case, False, rng)  # hybridized: compared above


def test_concatenate_runs_children_on_the_same_input(rng):
    net = nn.Concatenate(axis=1)
    dense = nn.Dense(3, in_units=4)
    net.add(dense, nn.Identity())
    net.initialize(init.Normal(0.5))
    dense.hybridize()  # hybridized children inside a plain Block
    x = rng.standard_normal((2, 4)).astype(np.float32)
    w, b = np.asarray(dense.weight.data(), np.float64), np.asarray(dense.bias.data(), np.float64)
    out, grads = run_with_grads(net, (x,), training=True)
    assert_close(out, np.concatenate([ref.dense(x, w, b), x], axis=1))
    head = np.random.default_rng(0).standard_normal(out.shape)
    assert_close(grads["0.weight"], head[:, :3].T @ x, rtol=1e-4)
    assert_close(grads["0.bias"], head[:, :3].sum(0), rtol=1e-4)
    assert isinstance(net[1], nn.Identity) and len(net) == 2
