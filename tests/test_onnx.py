"""ONNX export (hybrid.export.to_onnx through jax2onnx), checked by running the files with onnxruntime."""
import os

import jax.numpy as jnp
import numpy as np
import onnx
import onnxruntime
import pytest
from jax.extend import core as jcore

import hybrid
from hybrid import nn
from hybrid.export import ExportError, to_onnx
from hybrid.model_zoo import get_model, transformer_classifier

from conftest import assert_close


def run_onnx(path, *inputs):
    """The outputs of the ONNX file at ``path`` on ``inputs``, run by onnxruntime."""
    session = onnxruntime.InferenceSession(os.fspath(path), providers=["CPUExecutionProvider"])
    names = [i.name for i in session.get_inputs()]
    return session.run(None, {name: np.asarray(x) for name, x in zip(names, inputs)})


def io_shapes(path):
    graph = onnx.load(os.fspath(path)).graph
    def shape(value):
        return [d.dim_param or d.dim_value for d in value.type.tensor_type.shape.dim]
    return ({v.name: shape(v) for v in graph.input}, {v.name: shape(v) for v in graph.output})


def exported_matches(net, tmp_path, example, bigger, hybridize, rtol=1e-4):
    """Export ``net`` on ``example`` (a tuple of inputs), hybridized or not, and compare onnxruntime on
    ``bigger`` (another batch size) with hybrid's eager forward; returns the path."""
    expected = net(*bigger)  # eager: compiling the networks here would only cost time
    if hybridize:
        net.hybridize()
    path = to_onnx(net, tmp_path / "net.onnx", *example)
    actual, = run_onnx(path, *bigger)
    assert actual.shape == expected.shape
    assert_close(actual, expected, rtol=rtol, atol=1e-5)
    return path


def random_batch_norm_statistics(net, rng):
    """Running statistics far from (0, 1), so that predict mode visibly differs from training mode."""
    for name, param in net.collect_params().items():
        if name.endswith("running_mean"):
            param.set_data(rng.normal(size=param.shape).astype(np.float32))
        elif name.endswith("running_var"):
            param.set_data(rng.uniform(0.5, 2.0, size=param.shape).astype(np.float32))


@pytest.mark.parametrize("hybridize", [False, True])
def test_mlp(tmp_path, rng, hybridize):
    net = nn.HybridSequential()
    net.add(nn.Dense(16, activation="relu"), nn.Dropout(0.5), nn.Dense(4))
    net.initialize()
    x = rng.normal(size=(2, 7)).astype(np.float32)
    bigger = rng.normal(size=(5, 7)).astype(np.float32)
    path = exported_matches(net, tmp_path, (x,), (bigger,), hybridize)
    assert io_shapes(path) == ({"data": ["B", 7]}, {"output": ["B", 4]})
    if hybridize:  # the compiled program agrees too, and exporting after it ran changes nothing
        compiled = net(bigger)
        assert_close(run_onnx(to_onnx(net, tmp_path / "again.onnx", x), bigger)[0], compiled, rtol=1e-4, atol=1e-5)
    model = onnx.load(os.fspath(path))
    weights = {tuple(init.dims) for init in model.graph.initializer}
    assert {(7, 16), (16, 4)} <= weights or {(16, 7), (4, 16)} <= weights  # the parameters are initializers


@pytest.mark.parametrize("hybridize", [False, True])
def test_cnn_with_batch_norm_and_pooling(tmp_path, rng, hybridize):
    net = nn.HybridSequential()
    net.add(nn.Conv2D(6, 3, padding=1), nn.BatchNorm(), nn.Activation("relu"), nn.MaxPool2D(3, 2, 1),
            nn.Conv2D(8, 3), nn.AvgPool2D(3, 1, 1), nn.MaxPool2D(2), nn.GlobalAvgPool2D(), nn.Dense(5))
    net.initialize()
    x = rng.normal(size=(2, 3, 12, 12)).astype(np.float32)
    net(x)
    random_batch_norm_statistics(net, rng)
    exported_matches(net, tmp_path, (x,), (rng.normal(size=(3, 3, 12, 12)).astype(np.float32),), hybridize)


def test_max_pooling_in_1d_3d_and_channels_last(tmp_path, rng):
    """onnxruntime pools over at most 3 axes: 2-d and 3-d pooling of 4-d and 5-d tensors are rewritten."""
    for net, shape in [(nn.MaxPool2D(3, 2, 1, layout="NHWC"), (9, 9, 4)), (nn.MaxPool1D(3, 2), (4, 11)),
                       (nn.MaxPool3D(3, 2, 1), (2, 5, 6, 7)), (nn.MaxPool3D((2, 1, 3), (1, 1, 2)), (2, 5, 6, 7))]:
        x = rng.normal(size=(2,) + shape).astype(np.float32)
        exported_matches(net, tmp_path, (x,), (rng.normal(size=(3,) + shape).astype(np.float32),), False)


@pytest.fixture(scope="module")
def resnet18():
    hybrid.random.seed(7)
    net = get_model("resnet18_v1", classes=10)
    net.initialize()
    x = np.random.default_rng(1).normal(size=(1, 3, 32, 32)).astype(np.float32)
    bigger = np.random.default_rng(3).normal(size=(2, 3, 32, 32)).astype(np.float32)
    net(bigger)  # the output layer's input size is deferred
    random_batch_norm_statistics(net, np.random.default_rng(2))
    return net, x, bigger, np.asarray(net(bigger))


@pytest.mark.parametrize("hybridize", [False, True])
def test_resnet18(tmp_path, resnet18, hybridize):
    net, x, bigger, expected = resnet18
    if hybridize:
        net.hybridize()
    path = to_onnx(net, tmp_path / "resnet18.onnx", x)
    actual, = run_onnx(path, bigger)
    assert_close(actual, expected, rtol=1e-4, atol=1e-5)
    assert io_shapes(path) == ({"data": ["B", 3, 32, 32]}, {"output": ["B", 10]})


@pytest.mark.parametrize("hybridize", [False, True])
def test_transformer_encoder_with_token_and_length_inputs(tmp_path, rng, hybridize):
    net = transformer_classifier(vocab_size=40, classes=3, units=16, hidden_size=32, num_heads=2, num_layers=1,
                                 max_length=10)
    net.initialize()
    tokens = rng.integers(0, 40, size=(2, 8)).astype(np.int32)
    lengths = np.array([3, 8], np.int32)
    bigger = (rng.integers(0, 40, size=(4, 8)).astype(np.int32), np.array([1, 8, 5, 2], np.int32))
    path = exported_matches(net, tmp_path, (tokens, lengths), bigger, hybridize)
    assert io_shapes(path) == ({"data0": ["B", 8], "data1": ["B"]}, {"output": ["B", 3]})


def test_fixed_batch_and_opset(tmp_path, rng):
    net = nn.Dense(3, in_units=4)
    net.initialize()
    x = rng.normal(size=(2, 4)).astype(np.float32)
    path = to_onnx(net, tmp_path / "fixed.onnx", x, dynamic_batch=False, opset=18)
    assert io_shapes(path) == ({"data": [2, 4]}, {"output": [2, 3]})
    assert {o.domain: o.version for o in onnx.load(os.fspath(path)).opset_import}[""] == 18
    assert_close(run_onnx(path, x)[0], net(x), rtol=1e-4, atol=1e-6)
    with pytest.raises(onnxruntime.capi.onnxruntime_pybind11_state.InvalidArgument):
        run_onnx(path, np.ones((5, 4), np.float32))


def test_deferred_shapes_are_completed_and_several_outputs_named(tmp_path, rng):
    class TwoHeads(hybrid.HybridBlock):
        def __init__(self):
            super().__init__()
            self.a, self.b = nn.Dense(2), nn.Dense(3)  # input size deferred

        def forward(self, x):
            return {"a": self.a(x), "b": self.b(x)}

    net = TwoHeads()
    net.initialize()
    x = rng.normal(size=(2, 5)).astype(np.float32)
    path = to_onnx(net, tmp_path / "heads.onnx", x)
    assert io_shapes(path) == ({"data": ["B", 5]}, {"output0": ["B", 2], "output1": ["B", 3]})
    a, b = run_onnx(path, x)
    out = net(x)
    assert_close(a, out["a"], rtol=1e-4, atol=1e-6)
    assert_close(b, out["b"], rtol=1e-4, atol=1e-6)


odd_p = jcore.Primitive("odd_custom_op")  # a primitive jax2onnx has no conversion for
odd_p.def_impl(lambda x: x * 2.0)
odd_p.def_abstract_eval(lambda x: x)


class Odd(hybrid.HybridBlock):
    def forward(self, x):
        return odd_p.bind(x)


def test_unsupported_primitive_names_it_and_its_block_and_writes_nothing(tmp_path):
    class Net(hybrid.HybridBlock):
        def __init__(self):
            super().__init__()
            self.body = nn.HybridSequential()
            self.body.add(nn.Dense(4, in_units=3), Odd())

        def forward(self, x):
            return self.body(x)

    net = Net()
    net.initialize()
    x = np.ones((2, 3), np.float32)
    path = tmp_path / "net.onnx"
    with pytest.raises(ExportError, match=r"primitive 'odd_custom_op' \(float32\[B,4\]\) in block 'body\.1' of Net"):
        to_onnx(net, path, x)
    assert os.listdir(tmp_path) == []
    path.write_bytes(b"previous model")
    with pytest.raises(ExportError):
        to_onnx(net, path, x)
    assert os.listdir(tmp_path) == ["net.onnx"] and path.read_bytes() == b"previous model"


def test_batch_size_in_numpy_code_needs_a_fixed_batch(tmp_path):
    class Ramp(hybrid.HybridBlock):
        def forward(self, x):
            return x * np.arange(x.shape[0], dtype=np.float32)[:, None]  # NumPy needs a concrete batch size

    net = Ramp()
    x = np.ones((3, 2), np.float32)
    with pytest.raises(ExportError, match="not with a symbolic batch axis.*dynamic_batch=False"):
        to_onnx(net, tmp_path / "ramp.onnx", x)
    path = to_onnx(net, tmp_path / "ramp.onnx", x, dynamic_batch=False)
    assert_close(run_onnx(path, x)[0], [[0, 0], [1, 1], [2, 2]])


def test_bad_calls(tmp_path):
    net = nn.Dense(3, in_units=4)
    with pytest.raises(RuntimeError, match="not initialised.*initialize"):
        to_onnx(net, tmp_path / "a.onnx", np.ones((2, 4), np.float32))
    net.initialize()
    with pytest.raises(TypeError, match="example input 0 is a list"):
        to_onnx(net, tmp_path / "a.onnx", [[1.0] * 4])
    with pytest.raises(ValueError, match="0-d"):
        to_onnx(nn.Activation("relu"), tmp_path / "a.onnx", jnp.float32(1.0))
    assert os.listdir(tmp_path) == []
