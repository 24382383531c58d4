"""``.safetensors`` parameter and state files, checked with the safetensors package itself."""

import jax.numpy as jnp
import numpy as np
import pytest
import safetensors.numpy
from safetensors import safe_open

from hybrid import autograd, init, nn
from hybrid.errors import ShapeError
from hybrid.serialization import FormatError


def make_net():
    net = nn.HybridSequential()
    net.add(nn.Conv2D(4, 3, in_channels=2), nn.BatchNorm(in_channels=4), nn.Flatten(), nn.Dense(3, in_units=16))
    net.initialize(init.Xavier())
    with autograd.train_mode():  # running statistics away from their initial values
        net(jnp.asarray(np.random.default_rng(0).standard_normal((2, 2, 4, 4)), jnp.float32))
    return net


def test_parameters_file_is_read_by_safetensors_under_structural_names(tmp_path):
    net = make_net()
    path = str(tmp_path / "net.safetensors")
    net.save_parameters(path)
    loaded = safetensors.numpy.load_file(path)
    assert sorted(loaded) == sorted(net.collect_params())
    for name, param in net.collect_params().items():
        np.testing.assert_array_equal(loaded[name], np.asarray(param.data()), err_msg=name)

    other = make_net()
    other.load_parameters(path)
    for name, param in other.collect_params().items():
        np.testing.assert_array_equal(param.data(), loaded[name], err_msg=name)


def test_a_file_written_by_safetensors_loads_and_is_checked(tmp_path):
    net = make_net()
    arrays = {name: np.full(p.shape, 0.5, np.float32) for name, p in net.collect_params().items()}
    path = str(tmp_path / "from_library.safetensors")
    safetensors.numpy.save_file(arrays, path)
    net.load_parameters(path)
    np.testing.assert_array_equal(net[3].weight.data(), 0.5)

    arrays["3.weight"] = np.zeros((3, 5), np.float32)
    safetensors.numpy.save_file(arrays, path)
    before = np.asarray(net[0].weight.data())
    with pytest.raises(ShapeError, match="3.weight"):
        net.load_parameters(path)
    np.testing.assert_array_equal(net[0].weight.data(), before)  # nothing changed


def test_bfloat16_round_trip(tmp_path):
    net = nn.Dense(3, in_units=2, dtype="bfloat16")
    net.initialize()
    path = str(tmp_path / "bf16.safetensors")
    net.save_parameters(path)
    with safe_open(path, framework="numpy") as f:
        assert f.get_tensor("weight").dtype == jnp.bfloat16
    other = nn.Dense(3, in_units=2, dtype="bfloat16")
    other.initialize(init.Zero())
    other.load_parameters(path)
    np.testing.assert_array_equal(np.asarray(other.weight.data(), np.float32),
                                  np.asarray(net.weight.data(), np.float32))


def test_corrupted_files_name_the_file_and_change_nothing(tmp_path):
    net = make_net()
    path = tmp_path / "net.safetensors"
    net.save_parameters(str(path))
    data = path.read_bytes()
    before = {k: np.asarray(v) for k, v in net.state().items()}
    for bad in (data[:-7], data[:8] + b"{" + b"\x00" * 40 + data[49:]):
        path.write_bytes(bad)
        with pytest.raises(FormatError, match="net.safetensors"):
            net.load_parameters(str(path))
        with pytest.raises(FormatError, match="net.safetensors"):
            net.load_state(str(path))
    for name, value in net.state().items():
        np.testing.assert_array_equal(value, before[name])


def test_state_files_hold_running_statistics(tmp_path):
    net = make_net()
    for suffix in (".safetensors", ".npz"):
        path = str(tmp_path / f"state{suffix}")
        net.save_state(path)
        other = make_net()
        other.load_state(path)
        for name, value in net.state().items():
            np.testing.assert_array_equal(other.state()[name], value, err_msg=name)
    assert "1.running_mean" in safetensors.numpy.load_file(str(tmp_path / "state.safetensors"))
    small = nn.Dense(2, in_units=16)
    small.initialize()
    with pytest.raises(ValueError, match="state.safetensors.*missing"):
        small.load_state(str(tmp_path / "state.safetensors"))
