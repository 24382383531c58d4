"""hybrid.interop.torch against the real PyTorch and torchvision: converted weights compute PyTorch's
outputs, layer by layer and for whole torchvision networks; bad state_dicts are refused before anything is
written; PyTorch tensors and lists are accepted as block inputs."""
import jax.numpy as jnp
import numpy as np
import pytest
import torch
import torchvision

import hybrid
from hybrid import autograd, model_zoo, nn, rnn
from hybrid.errors import ShapeError
from hybrid.interop.torch import (TORCHVISION_ARCHS, TorchvisionBottleneck, load_torch_state_dict, load_torchvision,
                                  torch_state_dict, torchvision_mapping, torchvision_net)


def _randomize_batch_norms(module):
    """Non-trivial BatchNorm statistics and affine parameters, so that a wrong mapping shows."""
    with torch.no_grad():
        for m in module.modules():
            if isinstance(m, torch.nn.modules.batchnorm._BatchNorm):
                m.running_mean.normal_(0.0, 0.5)
                m.running_var.uniform_(0.5, 2.0)
                m.weight.normal_(1.0, 0.2)
                m.bias.normal_(0.0, 0.2)
    return module.eval()


def _values(net):
    return {name: np.array(p.data()) for name, p in net.collect_params().items()}


@pytest.fixture(scope="module")
def resnet18():
    torch.manual_seed(0)
    return _randomize_batch_norms(torchvision.models.resnet18(num_classes=10))


def test_resnet18_gives_torchvisions_logits(resnet18):
    net = model_zoo.resnet18_v1(classes=10)
    loaded = load_torchvision(net, resnet18, "resnet18")
    assert loaded["features.4.0.body.1.gamma"] == "layer1.0.bn1.weight"
    assert loaded["output.weight"] == "fc.weight"
    x = torch.randn(2, 3, 32, 32)
    with torch.no_grad():
        expected = resnet18(x).numpy()
    net.hybridize()  # the compiled graph, after its passes (BatchNorm folding among them)
    np.testing.assert_allclose(np.asarray(net(x)), expected, atol=1e-4, rtol=0)


def test_mobilenet_v2_gives_torchvisions_logits():
    torch.manual_seed(1)
    model = _randomize_batch_norms(torchvision.models.mobilenet_v2(num_classes=7))
    net = torchvision_net("mobilenet_v2", classes=7)
    load_torchvision(net, model.state_dict(), "mobilenet_v2")
    x = torch.randn(1, 3, 32, 32)
    with torch.no_grad():
        expected = model(x).numpy()
    np.testing.assert_allclose(np.asarray(net(x)), expected, atol=1e-4, rtol=0)


def test_vgg11_bn_gives_torchvisions_logits():
    torch.manual_seed(2)
    with torch.device("meta"):  # skips torchvision's initialisation of 130M weights, the slow part
        model = torchvision.models.vgg11_bn(num_classes=5)
    model = model.to_empty(device="cpu")
    with torch.no_grad():
        for param in model.parameters():
            param.uniform_(-0.05, 0.05)
    model = _randomize_batch_norms(model)
    net = torchvision_net("vgg11_bn", classes=5)
    load_torchvision(net, model, "vgg11_bn")
    x = torch.randn(1, 3, 64, 64)  # 2x2 features: the flattening order before the classifier matters
    with torch.no_grad():
        expected = model(x).numpy()
    np.testing.assert_allclose(np.asarray(net(x)), expected, atol=1e-4, rtol=0)


def test_resnet50_bottleneck_strides_like_torchvision():
    torch.manual_seed(3)
    downsample = torch.nn.Sequential(torch.nn.Conv2d(8, 16, 1, stride=2, bias=False), torch.nn.BatchNorm2d(16))
    block = _randomize_batch_norms(torchvision.models.resnet.Bottleneck(8, 4, stride=2, downsample=downsample))
    ours = TorchvisionBottleneck(16, 2, downsample=True, in_channels=8)
    layers = {"conv1": "body.0", "bn1": "body.1", "conv2": "body.3", "bn2": "body.4", "conv3": "body.6",
              "bn3": "body.7", "downsample": "downsample"}

    def rename(name):
        layer, rest = name.split(".", 1)
        return f"{layers[layer]}.{rest}"
    load_torch_state_dict(ours, block, mapping=rename)
    x = torch.randn(1, 8, 9, 9)
    with torch.no_grad():
        expected = block(x).numpy()
    np.testing.assert_allclose(np.asarray(ours(x)), expected, atol=1e-5, rtol=0)


@pytest.mark.parametrize("arch", TORCHVISION_ARCHS)
def test_every_torchvision_arch_maps_every_name(arch):
    with torch.device("meta"):  # names and shapes without memory
        model = getattr(torchvision.models, arch)(num_classes=10)
    net = torchvision_net(arch, classes=10)
    loaded = load_torchvision(net, model, arch, dry_run=True)
    assert set(loaded) == set(net.collect_params())
    assert set(loaded.values()) == {n for n in model.state_dict() if not n.endswith("num_batches_tracked")}
    assert not any(p.is_initialized for p in net.collect_params().values())


def test_the_zoos_resnet50_v1_is_refused():
    with torch.device("meta"):
        model = torchvision.models.resnet50()
    with pytest.raises(ValueError, match=r"strides the 3x3 convolution.*torchvision_net\('resnet50'\)"):
        load_torchvision(model_zoo.resnet50_v1(), model, "resnet50", dry_run=True)
    with pytest.raises(ValueError, match="unknown torchvision arch 'resnet9'"):
        torchvision_mapping("resnet9")


# -- single layers ---------------------------------------------------------------------------------------------

def _check_layer(module, block, *inputs, atol=1e-5, call=None):
    """Load ``module`` into ``block`` and compare their outputs on ``inputs`` (NumPy arrays)."""
    module.eval()
    load_torch_state_dict(block, module)
    with torch.no_grad():
        expected = (call or (lambda m, *xs: m(*xs)))(module, *[torch.as_tensor(x) for x in inputs])
    got = block(*[jnp.asarray(x) for x in inputs])
    if isinstance(expected, tuple):
        expected, got = expected[0], got[0] if isinstance(got, tuple) else got
    np.testing.assert_allclose(np.asarray(got), expected.numpy(), atol=atol, rtol=0)


def _x(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def test_linear():
    _check_layer(torch.nn.Linear(5, 3), nn.Dense(3, flatten=False), _x(2, 4, 5))


def test_conv1d_conv2d_conv3d():
    _check_layer(torch.nn.Conv1d(3, 4, 3, stride=2, padding=1), nn.Conv1D(4, 3, strides=2, padding=1), _x(2, 3, 9))
    _check_layer(torch.nn.Conv2d(4, 6, 3, padding=2, dilation=2, groups=2),
                 nn.Conv2D(6, 3, padding=2, dilation=2, groups=2), _x(2, 4, 7, 7))
    _check_layer(torch.nn.Conv3d(2, 3, 2, bias=False), nn.Conv3D(3, 2, use_bias=False), _x(1, 2, 4, 4, 4))


def test_conv2d_into_a_channels_last_layer():
    conv = torch.nn.Conv2d(2, 5, 3, padding=1).eval()
    block = nn.Conv2D(5, 3, padding=1, layout="NHWC")
    load_torch_state_dict(block, conv)
    assert block.weight.shape == (5, 3, 3, 2)
    assert float(block.weight.data()[0, 2, 0, 1]) == float(conv.weight.detach()[0, 1, 2, 0])
    x = _x(2, 2, 6, 6)
    with torch.no_grad():
        expected = conv(torch.as_tensor(x)).numpy()
    got = np.asarray(block(jnp.asarray(x.transpose(0, 2, 3, 1)))).transpose(0, 3, 1, 2)
    np.testing.assert_allclose(got, expected, atol=1e-5, rtol=0)
    back = torch_state_dict(block)
    np.testing.assert_array_equal(back["weight"].numpy(), conv.weight.detach().numpy())


def test_conv_transpose():
    _check_layer(torch.nn.ConvTranspose2d(4, 6, 3, stride=2, padding=1, output_padding=1, groups=2),
                 nn.Conv2DTranspose(6, 3, strides=2, padding=1, output_padding=1, groups=2, in_channels=4),
                 _x(2, 4, 5, 5))
    _check_layer(torch.nn.ConvTranspose1d(3, 2, 4, stride=3), nn.Conv1DTranspose(2, 4, strides=3, in_channels=3),
                 _x(2, 3, 5))


def test_batch_norm_in_predict_mode():
    _check_layer(_randomize_batch_norms(torch.nn.BatchNorm2d(4)), nn.BatchNorm(), _x(3, 4, 5, 5))
    _check_layer(_randomize_batch_norms(torch.nn.BatchNorm1d(6, eps=1e-3)), nn.BatchNorm(epsilon=1e-3), _x(8, 6))


def test_layer_norm_group_norm_prelu():
    norm = torch.nn.LayerNorm(6)
    with torch.no_grad():
        norm.weight.normal_()
        norm.bias.normal_()
    _check_layer(norm, nn.LayerNorm(), _x(2, 3, 6))
    group = torch.nn.GroupNorm(2, 4)
    with torch.no_grad():
        group.weight.normal_()
    _check_layer(group, nn.GroupNorm(2, in_channels=4), _x(2, 4, 3, 3))
    prelu = torch.nn.PReLU(4, init=0.3)
    _check_layer(prelu, nn.PReLU(in_channels=4), _x(2, 4, 3, 3))


def test_embedding():
    _check_layer(torch.nn.Embedding(10, 4), nn.Embedding(10, 4), np.array([[1, 9, 0], [3, 3, 7]]))


def test_lstm_two_layers_bidirectional():
    _check_layer(torch.nn.LSTM(5, 7, num_layers=2, bidirectional=True),
                 rnn.LSTM(7, num_layers=2, bidirectional=True), _x(4, 2, 5), atol=1e-5)


def test_lstm_with_projection_and_gru():
    _check_layer(torch.nn.LSTM(5, 7, proj_size=3), rnn.LSTM(7, projection_size=3), _x(4, 2, 5))
    _check_layer(torch.nn.GRU(5, 6, bidirectional=True, batch_first=True),
                 rnn.GRU(6, bidirectional=True, layout="NTC"), _x(2, 4, 5))


def test_recurrent_cells():
    cell = rnn.GRUCell(6, input_size=5)
    torch_cell = torch.nn.GRUCell(5, 6)
    load_torch_state_dict(cell, torch_cell)
    x, h = _x(3, 5), _x(3, 6, seed=1)
    with torch.no_grad():
        expected = torch_cell(torch.as_tensor(x), torch.as_tensor(h)).numpy()
    out, _ = cell(jnp.asarray(x), [jnp.asarray(h)])
    np.testing.assert_allclose(np.asarray(out), expected, atol=1e-5, rtol=0)


def test_multihead_attention():
    self_attention = lambda m, x: m(x, x, x, need_weights=False)  # noqa: E731
    _check_layer(torch.nn.MultiheadAttention(8, 2, batch_first=True), nn.MultiHeadAttention(8, 2), _x(2, 3, 8),
                 call=self_attention)
    torch.manual_seed(4)
    module = torch.nn.MultiheadAttention(8, 4, kdim=5, vdim=6, batch_first=True).eval()
    block = nn.MultiHeadAttention(8, 4)
    loaded = load_torch_state_dict(block, module)
    assert loaded["key_proj.weight"] == "k_proj_weight" and loaded["value_proj.bias"] == "in_proj_bias[16:24]"
    q, k, v = _x(2, 3, 8), _x(2, 4, 5, seed=1), _x(2, 4, 6, seed=2)
    with torch.no_grad():
        expected = module(*map(torch.as_tensor, (q, k, v)), need_weights=False)[0].numpy()
    got = block(jnp.asarray(q), jnp.asarray(k), jnp.asarray(v))
    np.testing.assert_allclose(np.asarray(got), expected, atol=1e-5, rtol=0)


def test_transformer_encoder_layer():
    module = torch.nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True)
    _check_layer(module, nn.TransformerEncoderLayer(8, 16, 2, dropout=0.0), _x(2, 5, 8), atol=1e-5)


# -- the reverse direction -------------------------------------------------------------------------------------

def test_torch_state_dict_loads_into_pytorch():
    hybrid.random.seed(0)
    net = nn.HybridSequential()
    net.add(nn.Conv2D(4, 3, in_channels=3), nn.BatchNorm(in_channels=4), nn.Flatten(), nn.Dense(2, in_units=4 * 36))
    net.initialize()
    module = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.BatchNorm2d(4), torch.nn.Flatten(),
                                 torch.nn.Linear(144, 2)).eval()
    state = torch_state_dict(net)
    assert state["1.num_batches_tracked"].item() == 0 and "1.gamma" not in state
    module.load_state_dict(state, strict=True)
    x = _x(2, 3, 8, 8)
    with torch.no_grad():
        expected = module(torch.as_tensor(x)).numpy()
    np.testing.assert_allclose(np.asarray(net(jnp.asarray(x))), expected, atol=1e-5, rtol=0)

    attention = nn.MultiHeadAttention(8, 2, in_units=8, key_units=8, value_units=8)
    attention.initialize()
    packed = torch_state_dict(attention)
    assert sorted(packed) == ["in_proj_bias", "in_proj_weight", "out_proj.bias", "out_proj.weight"]
    torch.nn.MultiheadAttention(8, 2).load_state_dict(packed, strict=True)


# -- refusals --------------------------------------------------------------------------------------------------

@pytest.fixture()
def initialised_resnet18():
    net = model_zoo.resnet18_v1(classes=10, in_channels=3)
    net.initialize()
    return net


def test_a_missing_entry_is_named_and_nothing_is_written(resnet18, initialised_resnet18):
    net, before = initialised_resnet18, _values(initialised_resnet18)
    state = dict(resnet18.state_dict())
    del state["fc.bias"]
    with pytest.raises(ValueError, match=r"hybrid parameter 'output.bias' \(10,\) gets no value \(no entry is "
                                         r"named or mapped to 'output.bias'\)"):
        load_torchvision(net, state, "resnet18")
    state = dict(resnet18.state_dict(), **{"fc.scale": torch.ones(10)})
    with pytest.raises(ValueError, match=r"PyTorch entry 'fc.scale \(renamed output.scale\)' \(10,\): no "
                                         r"parameter 'scale' in 'output' \(Dense"):
        load_torchvision(net, state, "resnet18")
    after = _values(net)
    assert all(np.array_equal(before[n], after[n]) for n in before)


def test_a_wrong_shape_names_both_sides_and_nothing_is_written(initialised_resnet18):
    net, before = initialised_resnet18, _values(initialised_resnet18)
    torch.manual_seed(0)
    state = torchvision.models.resnet18(num_classes=5).state_dict()
    with pytest.raises(ShapeError, match=r"PyTorch 'fc.weight' has shape \(5, 512\); hybrid parameter\(s\) "
                                         r"'output.weight' \(10, 512\) need \(10, 512\)"):
        load_torchvision(net, state, "resnet18")
    after = _values(net)
    assert all(np.array_equal(before[n], after[n]) for n in before)


def test_mapping_strict_and_bad_values():
    dense = nn.Dense(3, in_units=4)
    dense.initialize()
    weight, bias = np.ones((3, 4), np.float32), np.arange(3, dtype=np.float32)
    loaded = load_torch_state_dict(dense, {"fc.weight": weight, "fc.bias": bias, "fc.extra": bias},
                                   mapping={"fc.weight": "weight", "fc.bias": "bias", "fc.extra": None})
    assert loaded == {"weight": "fc.weight", "bias": "fc.bias"}
    np.testing.assert_array_equal(np.asarray(dense.bias.data()), bias)
    load_torch_state_dict(dense, {"w": 2 * weight, "junk": bias}, mapping=lambda n: "weight" if n == "w" else n,
                          strict=False)
    np.testing.assert_array_equal(np.asarray(dense.weight.data()), 2 * weight)
    np.testing.assert_array_equal(np.asarray(dense.bias.data()), bias)  # kept: strict=False
    with pytest.raises(ValueError, match="'a' and 'b' both map onto hybrid parameter 'bias'"):
        load_torch_state_dict(dense, {"a": bias, "b": bias, "weight": weight}, mapping={"a": "bias", "b": "bias"})
    with pytest.raises(TypeError, match="'bias' has dtype <U1"):
        load_torch_state_dict(dense, {"weight": 3 * weight, "bias": np.array(["a", "b", "c"])})
    with torch.device("meta"):
        shapes_only = torch.nn.Linear(4, 3)
    assert load_torch_state_dict(dense, shapes_only, dry_run=True) == {"weight": "weight", "bias": "bias"}
    with pytest.raises(TypeError, match="'weight' is a meta tensor"):
        load_torch_state_dict(dense, shapes_only)
    np.testing.assert_array_equal(np.asarray(dense.weight.data()), 2 * weight)  # nothing written
    with pytest.raises(TypeError, match="net must be a hybrid Block"):
        load_torch_state_dict(torch.nn.Linear(2, 2), {})


def test_an_uninitialised_network_takes_its_shapes_from_the_state_dict():
    module = torch.nn.Linear(6, 2)
    dense = nn.Dense(2)  # in_units unknown
    load_torch_state_dict(dense, module)
    assert dense.weight.shape == (2, 6)
    np.testing.assert_array_equal(np.asarray(dense.bias.data()), module.bias.detach().numpy())


# -- PyTorch tensors and lists as inputs -----------------------------------------------------------------------

def test_blocks_take_tensors_and_lists():
    dense = nn.Dense(2, in_units=3)
    dense.initialize()
    expected = np.asarray(dense(jnp.asarray([[1.0, 2.0, 3.0]])))
    tensor = torch.tensor([[1.0, 2.0, 3.0]], requires_grad=True)
    for hybridized in (False, True):
        dense.hybridize(hybridized)
        np.testing.assert_allclose(np.asarray(dense(tensor)), expected, rtol=1e-6)
        np.testing.assert_allclose(np.asarray(dense([[1, 2, 3]])), expected, rtol=1e-6)
        with autograd.record():
            out = dense(tensor.to(torch.bfloat16))
        assert out.shape == (1, 2)
    attention = nn.MultiHeadAttention(4, 2)
    attention.initialize()
    q = _x(1, 2, 4)
    np.testing.assert_allclose(np.asarray(attention(torch.as_tensor(q), key=torch.as_tensor(q))),
                               np.asarray(attention(jnp.asarray(q))), atol=1e-6)
    lstm = rnn.LSTM(3, input_size=2)
    lstm.initialize()
    states = [torch.zeros(1, 1, 3), torch.zeros(1, 1, 3)]
    out, new_states = lstm(torch.ones(2, 1, 2), states)  # a list of tensors stays a list of arrays
    assert out.shape == (2, 1, 3) and len(new_states) == 2


def test_a_tensor_is_copied_not_shared():
    dense = nn.Dense(1, in_units=1, use_bias=False)
    dense.initialize(hybrid.init.One())
    tensor = torch.ones(1, 1)
    out = dense(tensor)
    tensor.add_(1.0)
    assert float(out[0, 0]) == 1.0


def test_inputs_that_cannot_be_converted_name_the_block():
    dense = nn.Dense(2, in_units=3)
    dense.initialize()
    with pytest.raises(TypeError, match="Dense: input 0 is a list of numbers that is not rectangular"):
        dense([[1, 2, 3], [4]])
    with pytest.raises(TypeError, match="Dense expects arrays as inputs, but input 0 is of type list"):
        dense([1, "a"])
