import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from hybrid import HybridBlock, Parameter, autograd, init, utils

from conftest import assert_close


def np_clip_global_norm(arrays, max_norm):
    """Reference: total L2 norm over all arrays; scale down only when it exceeds max_norm."""
    total = np.sqrt(sum(float(np.sum(np.square(np.asarray(a, np.float64)))) for a in arrays))
    scale = min(1.0, max_norm / (total + 1e-8))
    return [np.asarray(a, np.float64) * scale for a in arrays], total


def test_split_data_even_and_uneven():
    x = np.arange(20).reshape(10, 2)
    parts = utils.split_data(x, 5)
    assert len(parts) == 5 and all(p.shape == (2, 2) for p in parts)
    np.testing.assert_array_equal(np.concatenate(parts), x)
    uneven = utils.split_data(x, 3, even_split=False)
    assert [len(p) for p in uneven] == [4, 3, 3]  # np.array_split sizes, as MXNet
    np.testing.assert_array_equal(np.concatenate(uneven), x)
    cols = utils.split_data(jnp.asarray(x), 2, batch_axis=1)
    assert isinstance(cols[0], jax.Array) and cols[1].tolist() == x[:, 1:].tolist()
    assert [len(p) for p in utils.split_data(np.arange(2), 4, even_split=False)] == [1, 1, 0, 0]  # as MXNet
    with pytest.raises(ValueError, match=r"shape \(10, 2\) cannot be split evenly into 3 slices.*even_split=False"):
        utils.split_data(x, 3)


def test_split_and_load_places_slices_on_devices():
    device = jax.devices()[0]
    x = np.arange(12, dtype=np.float32).reshape(6, 2)
    whole = utils.split_and_load(x, [device])
    assert len(whole) == 1 and isinstance(whole[0], jax.Array) and whole[0].shape == (6, 2)
    parts = utils.split_and_load(x, devices=[device, device, device])
    assert [p.devices() for p in parts] == [{device}] * 3
    np.testing.assert_array_equal(np.concatenate([np.asarray(p) for p in parts]), x)
    with pytest.raises(ValueError, match="cannot be split evenly into 4 slices"):
        utils.split_and_load(x, [device] * 4)
    with pytest.raises(ValueError, match="non-empty list of jax.Device"):
        utils.split_and_load(x, [])


def test_clip_global_norm_of_arrays_matches_numpy(rng):
    arrays = [rng.standard_normal((3, 4)).astype(np.float32), rng.standard_normal(5).astype(np.float32)]
    clipped, norm = utils.clip_global_norm(arrays, 1.0)
    expected, expected_norm = np_clip_global_norm(arrays, 1.0)
    assert isinstance(norm, float)
    assert_close(norm, expected_norm)
    for got, want in zip(clipped, expected):
        assert_close(got, want)
    assert_close(np.sqrt(sum(np.sum(np.square(np.asarray(c))) for c in clipped)), 1.0)
    untouched, _ = utils.clip_global_norm(arrays, 100.0)
    for got, original in zip(untouched, arrays):
        assert_close(got, original)


class WeightedSum(HybridBlock):
    """out = sum(w * x) + sum(b * y), so the gradients are x and y."""

    def __init__(self):
        super().__init__()
        self.w = Parameter("w", shape=(2, 3), init=init.Zero())
        self.b = Parameter("b", shape=(3,), init=init.Zero())
        self.frozen = Parameter("frozen", shape=(2,), grad_req="null", init=init.Zero())

    def forward(self, x, y):
        return jnp.sum(self.w.data() * x) + jnp.sum(self.b.data() * y)


def test_clip_global_norm_rescales_parameter_grads_in_place(rng):
    net = WeightedSum()
    net.initialize()
    grads = [rng.standard_normal((2, 3)).astype(np.float32), rng.standard_normal(3).astype(np.float32)]
    with autograd.record():
        out = net(*grads)
    autograd.backward(out)
    norm = utils.clip_global_norm(net.collect_params(), 0.5)  # 'frozen' has no gradient and is skipped
    expected, expected_norm = np_clip_global_norm(grads, 0.5)
    assert_close(norm, expected_norm)
    assert_close(net.w.grad(), expected[0])
    assert_close(net.b.grad(), expected[1])


def test_clip_global_norm_warnings_and_errors():
    with pytest.warns(UserWarning, match="NaN or infinite"):
        utils.clip_global_norm([np.array([np.nan, 1.0], np.float32)], 1.0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _, norm = utils.clip_global_norm([np.array([3.0, 4.0], np.float32)], 1.0, check_isfinite=False)
    assert isinstance(norm, jax.Array) and float(norm) == pytest.approx(5.0)
    with pytest.raises(TypeError, match="mix of Parameters and arrays"):
        utils.clip_global_norm([np.zeros(2), Parameter("p", shape=(2,))], 1.0)
    with pytest.raises(ValueError, match="max_norm must be a positive number"):
        utils.clip_global_norm([np.ones(2)], 0.0)
    with pytest.raises(TypeError, match="expects a list"):
        utils.clip_global_norm(np.ones(2), 1.0)
