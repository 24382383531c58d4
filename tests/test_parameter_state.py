"""Parameter.is_initialized / is_deferred through a parameter's life."""
import numpy as np

import hybrid
from hybrid import nn


def test_deferred_until_first_call_then_initialized():
    net = nn.Dense(3)
    assert not net.weight.is_initialized and not net.weight.is_deferred
    net.initialize()
    assert net.weight.is_deferred and not net.weight.is_initialized
    net(np.ones((2, 5), np.float32))
    assert net.weight.is_initialized and not net.weight.is_deferred
    assert net.weight.shape == (3, 5)


def test_known_shape_initializes_at_once_and_set_data_clears_deferral():
    p = hybrid.Parameter("w", shape=(2, 4))
    p.initialize()
    assert p.is_initialized and not p.is_deferred
    q = hybrid.Parameter("v", shape=(0, 4), allow_deferred_init=True)
    q.initialize()
    assert q.is_deferred
    q.set_data(np.zeros((3, 4), np.float32))
    assert q.is_initialized and not q.is_deferred
