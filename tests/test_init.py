import math

import numpy as np
import pytest

import hybrid
from hybrid import init


def sample(initializer, shape):
    return np.asarray(initializer(shape, "float32"), dtype=np.float64)


def test_uniform_and_normal_statistics():
    u = sample(init.Uniform(0.5), (200, 200))
    assert u.min() >= -0.5 and u.max() <= 0.5
    assert abs(u.std() - 0.5 / math.sqrt(3)) < 0.01
    n = sample(init.Normal(0.2), (200, 200))
    assert abs(n.mean()) < 0.01 and abs(n.std() - 0.2) < 0.01


def test_xavier_uniform_bound_matches_fan_formula():
    # weight (out=64, in=32, 3, 3): fan_in = 32*9, fan_out = 64*9, avg = 432; bound = sqrt(3/432)
    w = sample(init.Xavier(), (64, 32, 3, 3))
    bound = math.sqrt(3.0 / 432.0)
    assert w.max() <= bound and w.min() >= -bound
    assert w.max() > 0.95 * bound
    g = sample(init.Xavier("gaussian", "in", 2.0), (300, 200))
    assert abs(g.std() - math.sqrt(2.0 / 200)) < 0.003


def test_msra_prelu_is_he_normal():
    w = sample(init.MSRAPrelu(factor_type="in", slope=0.0), (400, 100))
    assert abs(w.std() - math.sqrt(2.0 / 100)) < 0.003


def test_constant_zero_one():
    np.testing.assert_array_equal(sample(init.Constant(3.5), (2, 3)), np.full((2, 3), 3.5))
    np.testing.assert_array_equal(sample(init.Zero(), (4,)), np.zeros(4))
    np.testing.assert_array_equal(sample(init.One(), (4,)), np.ones(4))


def test_seed_makes_initialisation_reproducible():
    hybrid.random.seed(7)
    a = sample(init.Normal(1.0), (5, 5))
    hybrid.random.seed(7)
    b = sample(init.Normal(1.0), (5, 5))
    c = sample(init.Normal(1.0), (5, 5))
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(b, c)


def test_create_by_name_and_errors():
    assert isinstance(init.create("xavier"), init.Xavier)
    assert isinstance(init.create("zeros"), init.Zero)
    with pytest.raises(ValueError, match="unknown initializer"):
        init.create("nonsense")
    with pytest.raises(ValueError, match="rank >= 2"):
        init.Xavier()((5,), "float32")


def test_mxnet_style_initializer_fills_its_array_in_place():
    """MXNet 1.x initializers implement _init_weight(name, arr) and write into arr (GluonCV's bilinear
    up-sampling kernel); hybrid calls it on a zero array of the parameter's shape."""
    class Ramp(hybrid.init.Initializer):
        def _init_weight(self, _, arr):
            for i in range(arr.shape[-1]):
                arr[..., i] = i

    param = hybrid.Parameter("w", shape=(2, 3), init=Ramp())
    param.initialize()
    np.testing.assert_array_equal(np.asarray(param.data()), [[0, 1, 2], [0, 1, 2]])
    with pytest.raises(NotImplementedError, match="Bare: an Initializer subclass implements"):
        type("Bare", (hybrid.init.Initializer,), {})()((2,))
