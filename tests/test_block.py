import os

import jax.numpy as jnp
import numpy as np
import pytest

import hybrid
from hybrid import Block, HybridBlock, Parameter, autograd, init, nn, serialization
from hybrid.errors import ShapeError

from conftest import assert_close


class Net(HybridBlock):
    def __init__(self):
        super().__init__()
        self.features = nn.HybridSequential()
        self.features.add(nn.Dense(8, activation="relu"), nn.Dense(4))
        self.output = nn.Dense(2)
        self.temperature = Parameter("temperature", shape=(1,), init=init.One())

    def forward(self, x):
        return self.output(self.features(x)) / self.temperature.data()


def built(seed=0):
    hybrid.random.seed(seed)
    net = Net()
    net.initialize()
    net(np.ones((1, 3), np.float32))
    return net


def test_structural_names_and_select():
    net = built()
    assert list(net.collect_params()) == ["temperature", "features.0.weight", "features.0.bias",
                                          "features.1.weight", "features.1.bias", "output.weight", "output.bias"]
    assert list(net.collect_params(".*weight")) == ["features.0.weight", "features.1.weight", "output.weight"]
    assert list(net.collect_params("features")) == ["features.0.weight", "features.0.bias",
                                                     "features.1.weight", "features.1.bias"]
    assert set(net.params) == {"temperature"}


def test_reassigning_and_removing_children():
    net = Net()
    net.output = nn.Dense(5)
    assert "output.weight" in net.collect_params()
    net.output = None
    assert not any(n.startswith("output") for n in net.collect_params())
    with pytest.raises(TypeError, match="Net.features: cannot replace a HybridSequential with a int"):
        net.features = 3


def test_initialize_apply_zero_grad_cast():
    net = built()
    with pytest.warns(UserWarning, match="already initialized"):
        net.initialize()
    net.initialize(init.Zero(), force_reinit=True)
    params = net.collect_params()
    assert all(float(jnp.abs(p.data()).sum()) == 0 for n, p in params.items() if n != "temperature")
    assert float(params["temperature"].data()[0]) == 1.0  # a parameter's own init wins over the block's
    visited = []
    net.apply(lambda b: visited.append(type(b).__name__))
    assert visited[-1] == "Net" and visited.count("Dense") == 3
    net.cast("float16")
    assert all(p.dtype == np.float16 for p in net.collect_params().values())
    assert net(np.ones((2, 3), np.float16)).dtype == jnp.float16
    bn = nn.BatchNorm(in_channels=2)
    bn.initialize()
    bn.cast("float16")
    assert bn.gamma.dtype == np.float32  # statistics stay in float32, like Gluon


def test_share_parameters():
    a, b = built(0), built(1)
    b.share_parameters(a.collect_params(".*weight"))
    assert b.features[0].weight is a.features[0].weight
    assert b.features[0].bias is not a.features[0].bias
    x = np.ones((2, 3), np.float32)
    b.share_parameters(a.collect_params())
    assert_close(b(x), a(x))


def test_hooks_run_and_detach():
    net = built()
    calls = []
    pre = net.features.register_forward_pre_hook(lambda blk, args: calls.append(("pre", args[0].shape)))
    post = net.features.register_forward_hook(lambda blk, args, out: calls.append(("post", out.shape)))
    net(np.ones((2, 3), np.float32))
    assert calls == [("pre", (2, 3)), ("post", (2, 4))]
    pre.detach()
    post.detach()
    net(np.ones((2, 3), np.float32))
    assert len(calls) == 2


def test_a_hook_or_child_added_after_a_call_is_seen_by_a_tree_run_as_one_call():
    # an un-hybridized tree of hybrid's layers runs as one compiled call while no block has hooks
    net = nn.HybridSequential()
    net.add(nn.Dense(4, in_units=3), nn.Dense(2, in_units=4))
    net.initialize()
    x = np.ones((2, 3), np.float32)
    net(x)
    assert "_recorded_op" in net.__dict__
    calls = []
    handle = net[1].register_forward_hook(lambda blk, args, out: calls.append(out.shape))
    net(x)
    assert calls == [(2, 2)]
    handle.detach()
    net(x)
    assert calls == [(2, 2)]
    net.add(nn.Dense(5, in_units=2))
    net.initialize()
    assert net(x).shape == (2, 5)
    net[2].register_forward_pre_hook(lambda blk, args: calls.append(args[0].shape))
    net(x)
    assert calls == [(2, 2), (2, 2)]


def test_repr_shows_the_tree():
    text = repr(built())
    assert "Net(\n  (features): HybridSequential(\n    (0): Dense(3 -> 8, Activation(relu))" in text
    assert "(output): Dense(4 -> 2, linear)" in text
    assert repr(nn.Dense(3)) == "Dense(None -> 3, linear)"


def test_summary_table(capsys):
    net = built()
    net.hybridize()
    net.summary(np.ones((5, 3), np.float32))
    out = capsys.readouterr().out
    assert "Dense-2" in out and "(5, 8)" in out and "(5, 2)" in out
    assert "Total params: 79" in out  # (3*8+8) + (8*4+4) + (4*2+2) + 1
    assert "Trainable params: 79" in out


def test_sequential_indexing():
    seq = nn.HybridSequential()
    seq.add(nn.Dense(2), nn.Dense(3), nn.Dense(4))
    assert len(seq) == 3 and isinstance(seq[1], nn.Dense)
    sub = seq[1:]
    assert isinstance(sub, nn.HybridSequential) and len(sub) == 2 and sub[0] is seq[1]
    plain = nn.Sequential()
    plain.add(nn.Dense(2, in_units=3), nn.Lambda(lambda x: x * 2))
    plain.initialize()
    assert plain(np.ones((1, 3), np.float32)).shape == (1, 2)


def test_save_load_roundtrip(tmp_path):
    a, b = built(0), built(1)
    path = str(tmp_path / "net.params")
    a.save_parameters(path)
    b.load_parameters(path)
    for p, q in zip(a.collect_params().values(), b.collect_params().values()):
        np.testing.assert_array_equal(np.asarray(p.data()), np.asarray(q.data()))
    fresh = Net()  # deferred shapes are filled in by loading
    fresh.load_parameters(path)
    assert_close(fresh(np.ones((2, 3), np.float32)), a(np.ones((2, 3), np.float32)))


def test_load_errors_and_nothing_half_loaded(tmp_path):
    a = built(0)
    path = str(tmp_path / "net.params")
    a.save_parameters(path)
    small = nn.Dense(2)
    with pytest.raises(ValueError, match="not in the file"):
        small.load_parameters(path)
    with pytest.raises(ValueError, match="does not have"):
        small.load_parameters(path, allow_missing=True)
    arrays = serialization.load_arrays(path)
    arrays["output.weight"] = np.zeros((3, 4), np.float32)
    arrays["features.0.weight"] = np.full((8, 3), 7.0, np.float32)
    serialization.save_arrays(path, arrays)
    b = built(1)
    before = np.asarray(b.features[0].weight.data()).copy()
    with pytest.raises(ShapeError, match=r"'output.weight' has shape \(3, 4\) in the file.*expects \(2, 4\)"):
        b.load_parameters(path)
    np.testing.assert_array_equal(np.asarray(b.features[0].weight.data()), before)
    arrays["output.weight"] = np.zeros((2, 4), np.float64)
    serialization.save_arrays(path, arrays)
    with pytest.raises(TypeError, match="cast_dtype=True"):
        b.load_parameters(path)
    b.load_parameters(path, cast_dtype=True)
    assert b.output.weight.dtype == np.float32
    with pytest.raises(FileNotFoundError, match="does not exist"):
        b.load_parameters(str(tmp_path / "missing.params"))


def test_arrays_named_like_savez_arguments_round_trip(tmp_path):
    path = str(tmp_path / "named.params")
    arrays = {"file": np.ones(2, np.float32), "allow_pickle": np.zeros(3, np.float32)}
    serialization.save_arrays(path, arrays)
    loaded = serialization.load_arrays(path)
    assert sorted(loaded) == ["allow_pickle", "file"]
    for name, array in arrays.items():
        np.testing.assert_array_equal(loaded[name], array)
    assert sorted(np.load(path)) == ["allow_pickle", "file"]


def test_loading_rejects_corrupt_and_pickled_files(tmp_path):
    net = built()
    path = str(tmp_path / "net.params")
    net.save_parameters(path)
    data = open(path, "rb").read()
    open(path, "wb").write(data[: len(data) // 2])
    with pytest.raises(ValueError, match="corrupted or truncated"):
        net.load_parameters(path)
    np.save(str(tmp_path / "obj.npy"), np.array([{"a": 1}], dtype=object), allow_pickle=True)
    import zipfile
    with zipfile.ZipFile(path, "w") as archive:
        archive.write(str(tmp_path / "obj.npy"), "temperature.npy")
    with pytest.raises(ValueError, match="pickled objects; they are never loaded"):
        net.load_parameters(path, allow_missing=True)
    open(path, "wb").write(b"not a params file")
    with pytest.raises(ValueError, match="not a hybrid parameter file"):
        net.load_parameters(path)


def test_save_is_atomic_when_interrupted(tmp_path, monkeypatch):
    net = built()
    path = str(tmp_path / "net.params")
    net.save_parameters(path)
    original = open(path, "rb").read()

    def crash(handle, array, **kwargs):
        handle.write(b"partial")
        raise KeyboardInterrupt("simulated crash mid-save")

    monkeypatch.setattr(np.lib.format, "write_array", crash)
    with pytest.raises(KeyboardInterrupt):
        built(1).save_parameters(path)
    assert open(path, "rb").read() == original
    assert os.listdir(tmp_path) == ["net.params"]  # no temporary file left behind


def test_uninitialized_block_error_names_the_layer():
    net = nn.HybridSequential()
    net.add(nn.Dense(2, in_units=3))
    with pytest.raises(hybrid.errors.UninitializedParameterError, match=r"Dense '0'.*Call .initialize\(\)"):
        net(np.ones((1, 3), np.float32))
