"""Concatenate, HybridConcatenate and Identity (hybrid/nn/basic_layers.py): branches run on the same
input, forward against NumPy, hybridized against eager (outputs and gradients), and gradients against
finite differences of the NumPy reference."""
import numpy as np

from hybrid import init, nn

import references as ref
from conftest import assert_close
from helpers import LayerCase, layer_case_tests, run_with_grads


def _concatenated_branches():
    net = nn.HybridConcatenate(axis=1)
    net.add(nn.Dense(3), nn.Identity(), nn.HybridLambda("tanh"))
    return net


CASES = [
    LayerCase("identity", nn.Identity, (2, 3), lambda a: a["x"]),
    LayerCase("hybrid_concatenate", _concatenated_branches, (2, 4),
              lambda a: np.concatenate([ref.dense(a["x"], a["0.weight"], a["0.bias"]), a["x"], np.tanh(a["x"])], 1)),
]
globals().update(layer_case_tests(CASES, first_training=True))


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
