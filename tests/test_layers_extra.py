"""The layers beyond test_layers.py (transposed and 1-D/3-D convolutions, 1-D/3-D and channels-last
pooling, group/instance norm, parametric activations, shape layers, attention): forward against NumPy,
hybridized against eager (outputs and gradients, train and predict mode), gradients against finite
differences of the NumPy reference, and errors that name the layer."""
import numpy as np
import pytest

from hybrid import autograd, init, nn
from hybrid.errors import ShapeError

import references as ref
import references_nn as refn
from conftest import assert_close
from helpers import clone_params, run_with_grads
import test_layers as base
from test_layers import Case, InputAsParameter, _arrays, _built


def _last(reference):
    """A channels-first reference applied to channels-last data (input and weight moved)."""
    def run(a):
        moved = dict(a, x=np.moveaxis(a["x"], -1, 1))
        if "weight" in a:
            moved["weight"] = np.moveaxis(a["weight"], -1, 1)
        return np.moveaxis(reference(moved), 1, -1)
    return run


def _conv(*args):
    return lambda a: refn.conv_nd(a["x"], a["weight"], a.get("bias"), *args)


def _deconv(*args):
    return lambda a: refn.conv_transpose_nd(a["x"], a["weight"], a.get("bias"), *args)


def _pool(*args):
    return lambda a: refn.pool_nd(a["x"], *args)


def _concatenated_branches():
    net = nn.HybridConcatenate(axis=1)
    net.add(nn.Dense(3), nn.Identity(), nn.HybridLambda("tanh"))
    return net


NORMAL = dict(gamma_initializer=init.Normal(1.0), beta_initializer=init.Normal(1.0))

CASES = [
    Case("conv1d_nwc", lambda: nn.Conv1D(4, 3, strides=2, padding=1, dilation=2, layout="NWC", in_channels=3),
         (2, 9, 3), _last(_conv((2,), (1,), (2,), 1))),
    Case("conv3d_grouped", lambda: nn.Conv3D(4, (2, 3, 2), strides=(1, 2, 1), padding=(1, 0, 1), groups=2),
         (1, 4, 3, 5, 3), _conv((1, 2, 1), (1, 0, 1), (1, 1, 1), 2)),
    Case("conv3d_ndhwc_relu", lambda: nn.Conv3D(3, 2, layout="NDHWC", activation="relu"), (1, 3, 4, 3, 2),
         lambda a: np.maximum(_last(_conv((1,) * 3, (0,) * 3, (1,) * 3, 1))(a), 0)),
    Case("conv1d_transpose", lambda: nn.Conv1DTranspose(4, 3, strides=2, padding=1, output_padding=1,
                                                        in_channels=3), (2, 3, 5),
         _deconv((2,), (1,), (1,), (1,), 1)),
    Case("conv1d_transpose_nwc", lambda: nn.Conv1DTranspose(2, 3, strides=3, layout="NWC", use_bias=False),
         (2, 4, 3), _last(_deconv((3,), (0,), (0,), (1,), 1))),
    Case("conv2d_transpose_grouped_dilated",
         lambda: nn.Conv2DTranspose(4, (3, 2), strides=(2, 1), padding=(1, 0), output_padding=(1, 0),
                                    dilation=(1, 2), groups=2), (2, 4, 4, 3),
         _deconv((2, 1), (1, 0), (1, 0), (1, 2), 2)),
    Case("conv2d_transpose_nhwc_tanh", lambda: nn.Conv2DTranspose(3, 3, strides=2, padding=1, layout="NHWC",
                                                                  activation="tanh"), (2, 3, 3, 2),
         lambda a: np.tanh(_last(_deconv((2, 2), (1, 1), (0, 0), (1, 1), 1))(a))),
    Case("conv3d_transpose", lambda: nn.Conv3DTranspose(2, 2, strides=(2, 1, 2), padding=(0, 1, 0)),
         (1, 3, 2, 3, 2), _deconv((2, 1, 2), (0, 1, 0), (0, 0, 0), (1, 1, 1), 1)),
    Case("conv3d_transpose_ndhwc", lambda: nn.Conv3DTranspose(2, (1, 2, 2), strides=2, output_padding=1,
                                                              layout="NDHWC"), (1, 2, 2, 2, 3),
         _last(_deconv((2,) * 3, (0,) * 3, (1,) * 3, (1,) * 3, 1))),
    Case("maxpool1d", lambda: nn.MaxPool1D(3, 2, 1), (2, 3, 9), _pool((3,), (2,), (1,), "max")),
    Case("avgpool1d_nwc_ceil_exclude_pad",
         lambda: nn.AvgPool1D(3, 2, 1, layout="NWC", ceil_mode=True, count_include_pad=False), (2, 8, 3),
         _last(_pool((3,), (2,), (1,), "avg", True, False))),
    Case("maxpool3d_ceil", lambda: nn.MaxPool3D(2, 2, ceil_mode=True), (1, 2, 5, 3, 4),
         _pool((2,) * 3, (2,) * 3, (0,) * 3, "max", True)),
    Case("avgpool3d_ndhwc_ceil_include_pad", lambda: nn.AvgPool3D(3, 2, 1, layout="NDHWC", ceil_mode=True),
         (1, 5, 4, 6, 2), _last(_pool((3,) * 3, (2,) * 3, (1,) * 3, "avg", True, True))),
    Case("avgpool3d_exclude_pad", lambda: nn.AvgPool3D((2, 3, 2), (1, 2, 2), (1, 1, 0), count_include_pad=False),
         (1, 2, 3, 5, 4), _pool((2, 3, 2), (1, 2, 2), (1, 1, 0), "avg", False, False)),
    Case("global_maxpool1d", lambda: nn.GlobalMaxPool1D(), (2, 3, 5), lambda a: a["x"].max(2, keepdims=True)),
    Case("global_avgpool1d_nwc", lambda: nn.GlobalAvgPool1D(layout="NWC"), (2, 5, 3),
         lambda a: a["x"].mean(1, keepdims=True)),
    Case("global_maxpool3d_ndhwc", lambda: nn.GlobalMaxPool3D(layout="NDHWC"), (1, 3, 2, 4, 2),
         lambda a: a["x"].max((1, 2, 3), keepdims=True)),
    Case("global_avgpool3d", lambda: nn.GlobalAvgPool3D(), (1, 2, 3, 2, 4),
         lambda a: a["x"].mean((2, 3, 4), keepdims=True)),
    Case("groupnorm", lambda: nn.GroupNorm(2, **NORMAL), (2, 4, 3, 2),
         lambda a: refn.group_norm(a["x"], a["gamma"], a["beta"], 2, 1e-5)),
    Case("groupnorm_1d_eps", lambda: nn.GroupNorm(3, epsilon=0.1, in_channels=6, **NORMAL), (2, 6, 4),
         lambda a: refn.group_norm(a["x"], a["gamma"], a["beta"], 3, 0.1)),
    Case("instancenorm_scaled", lambda: nn.InstanceNorm(scale=True, **NORMAL), (2, 3, 4, 2),
         lambda a: refn.instance_norm(a["x"], a["gamma"], a["beta"], 1e-5)),
    Case("instancenorm_channels_last", lambda: nn.InstanceNorm(axis=-1, beta_initializer=init.Normal(1.0)),
         (2, 5, 3), lambda a: refn.instance_norm(a["x"], a["gamma"], a["beta"], 1e-5, axis=-1)),
    *[Case(f"activation_{name}", make, (3, 7), (lambda a, f=refn.ACTIVATIONS[name]: f(a["x"])))
      for name, make in [("leaky_relu", lambda: nn.LeakyReLU(0.1)), ("elu", lambda: nn.ELU(0.7)),
                         ("selu", nn.SELU), ("gelu_erf", nn.GELU), ("gelu_tanh", lambda: nn.GELU("tanh")),
                         ("silu", nn.SiLU), ("swish", lambda: nn.Swish(1.5))]],
    Case("prelu", lambda: nn.PReLU(), (3, 4), lambda a: refn.prelu(a["x"], a["alpha"])),
    Case("prelu_channels", lambda: nn.PReLU(init.Normal(0.5), in_channels=3), (2, 3, 4),
         lambda a: refn.prelu(a["x"], a["alpha"])),
    Case("identity", nn.Identity, (2, 3), lambda a: a["x"]),
    Case("pixelshuffle1d", lambda: nn.PixelShuffle1D(3), (2, 6, 4), lambda a: refn.pixel_shuffle(a["x"], (3,))),
    Case("pixelshuffle2d", lambda: nn.PixelShuffle2D((2, 3)), (1, 12, 2, 3),
         lambda a: refn.pixel_shuffle(a["x"], (2, 3))),
    Case("pixelshuffle3d", lambda: nn.PixelShuffle3D(2), (1, 16, 2, 1, 2),
         lambda a: refn.pixel_shuffle(a["x"], (2, 2, 2))),
    Case("reflectionpad2d", lambda: nn.ReflectionPad2D((1, 2, 2, 0)), (1, 2, 4, 3),
         lambda a: np.pad(a["x"], ((0, 0), (0, 0), (1, 2), (2, 0)), mode="reflect")),
    Case("hybrid_concatenate", _concatenated_branches, (2, 4),
         lambda a: np.concatenate([ref.dense(a["x"], a["0.weight"], a["0.bias"]), a["x"], np.tanh(a["x"])], 1)),
    Case("multi_head_attention", lambda: nn.MultiHeadAttention(8, 2), (2, 4, 6),
         lambda a: refn.multi_head_attention(a["x"], a["x"], a["x"], a, 2)),
    Case("transformer_post_norm", lambda: nn.TransformerEncoderLayer(8, 12, 2, dropout=0.0), (2, 3, 8),
         lambda a: refn.transformer_encoder(a["x"], a, 2, False, 1e-5, lambda y: np.maximum(y, 0))),
    Case("transformer_pre_norm_gelu", lambda: nn.TransformerEncoderLayer(8, 6, 4, dropout=0.0, activation="gelu",
                                                                         pre_norm=True, layer_norm_eps=1e-3),
         (2, 3, 8), lambda a: refn.transformer_encoder(a["x"], a, 4, True, 1e-3, refn.ACTIVATIONS["gelu_erf"])),
]
IDS = [c.name for c in CASES]
WITH_PARAMS = [c for c in CASES if c.make().collect_params()]
PARAM_FREE = [c for c in CASES if c not in WITH_PARAMS]


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_forward_matches_numpy(case, rng):
    base.test_forward_matches_numpy(case, rng)


# None of these layers behaves differently in training (attention dropout is tested below), so to keep
# compilations few each case runs in one mode, alternating along the list: every family sees both modes.
HYBRID_RUNS = [pytest.param(c, i % 2 == 1, id=f"{c.name}-{('predict', 'train')[i % 2]}") for i, c in enumerate(CASES)]


@pytest.mark.parametrize("case, training", HYBRID_RUNS)
def test_hybridized_equals_eager(case, training, rng):
    eager, x = _built(case, rng)
    compiled, _ = _built(case, rng, seed=1)
    inputs = (x,)
    if case in PARAM_FREE:  # the input as a parameter, so that input gradients are compared
        eager, compiled, inputs = InputAsParameter(eager, x), InputAsParameter(compiled, x), ()
        eager.initialize()
        compiled.initialize()
    else:
        clone_params(eager, compiled)
    compiled.hybridize()
    out_e, grads_e = run_with_grads(eager, inputs, training)
    out_h, grads_h = run_with_grads(compiled, inputs, training)
    assert_close(out_h, out_e, rtol=1e-5, atol=1e-5)
    assert grads_e.keys() == grads_h.keys() and grads_e
    for name in grads_e:
        assert_close(grads_h[name], grads_e[name], rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("case", WITH_PARAMS, ids=[c.name for c in WITH_PARAMS])
def test_gradients_match_finite_differences(case, rng):
    base.test_gradients_match_finite_differences(case, rng)


@pytest.mark.parametrize("case", PARAM_FREE, ids=[c.name for c in PARAM_FREE])
def test_input_gradients_of_parameter_free_layers(case, rng):
    base.test_input_gradients_of_parameter_free_layers(case, False, rng)  # hybridized: compared above


def _cross_attention(rng):
    net = nn.MultiHeadAttention(8, 2)
    net.initialize(init.Normal(0.5))
    q, k, v = (rng.standard_normal(s).astype(np.float32) for s in ((2, 3, 5), (2, 4, 6), (2, 4, 7)))
    net(q, k, v)
    return net, (q, k, v)


def test_attention_masks_match_numpy(rng):
    net, (q, k, v) = _cross_attention(rng)
    a = _arrays(net, q)
    causal = np.tril(np.ones((3, 4), bool))
    key_mask = np.array([[True, True, False, True], [False, False, False, False]])  # sample 1: all padding
    masks = {"2d": rng.random((3, 4)) > 0.3, "3d": rng.random((2, 3, 4)) > 0.3, "4d": rng.random((2, 2, 3, 4)) > 0.3}
    runs = [(dict(mask=m), m if m.ndim == 4 else (m[None] if m.ndim == 2 else m)[:, None]) for m in masks.values()]
    runs += [(dict(key_mask=key_mask), key_mask[:, None, None]), (dict(causal=True), causal),
             (dict(mask=masks["3d"], key_mask=key_mask, causal=True), masks["3d"][:, None] & key_mask[:, None, None]
              & causal)]
    for kwargs, full_mask in runs:
        expected = refn.multi_head_attention(q, k, v, a, 2, mask=full_mask)
        assert_close(net(q, k, v, **kwargs), expected, rtol=1e-4, atol=1e-5)
    # a query with no key to attend to gets the mean of the values
    values = ref.dense(v.astype(np.float64), a["value_proj.weight"], a["value_proj.bias"], flatten=False)
    mean = ref.dense(values.mean(1), a["out_proj.weight"], a["out_proj.bias"])
    assert_close(net(q, k, v, key_mask=key_mask)[1], np.broadcast_to(mean[1], (3, 8)), rtol=1e-4, atol=1e-5)


def test_attention_hybridized_with_masks_equals_eager(rng):
    eager, inputs = _cross_attention(rng)
    compiled, _ = _cross_attention(rng)
    clone_params(eager, compiled)
    compiled.hybridize()
    kwargs = dict(mask=rng.random((2, 3, 4)) > 0.3, key_mask=np.array([[1, 1, 0, 1], [1, 0, 1, 1]], bool))
    results = []
    for net in (eager, compiled):
        with autograd.record():
            out = net(*inputs, **kwargs, causal=True)
        autograd.backward(out, head_grads=np.random.default_rng(0).standard_normal(out.shape).astype(np.float32))
        results.append((np.asarray(out), {n: np.asarray(p.grad()) for n, p in net.collect_params().items()}))
    (out_e, grads_e), (out_h, grads_h) = results
    assert_close(out_h, out_e)
    for name in grads_e:
        assert_close(grads_h[name], grads_e[name], rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("hybridize", [False, True])
def test_attention_dropout_drops_attention_weights(hybridize, rng):
    """With identity value/output projections and one-hot values, the output is the attention weights."""
    size = 8
    net = nn.MultiHeadAttention(size, 1, dropout=0.5, use_bias=False, in_units=3, key_units=3, value_units=size)
    net.initialize(init.Normal(1.0))
    for proj in (net.value_proj, net.out_proj):
        proj.weight.set_data(np.eye(size, dtype=np.float32))
    if hybridize:
        net.hybridize()
    q, k = rng.standard_normal((4, size, 3)).astype(np.float32), rng.standard_normal((4, size, 3)).astype(np.float32)
    v = np.broadcast_to(np.eye(size, dtype=np.float32), (4, size, size))
    weights = np.asarray(net(q, k, v))
    assert_close(weights.sum(-1), 1.0)
    dropped = []
    for _ in range(2):
        with autograd.train_mode():
            out = np.asarray(net(q, k, v))
        kept = ~np.isclose(out, 0.0, atol=1e-7)
        assert_close(out[kept], 2 * weights[kept], rtol=1e-4, atol=1e-6)  # survivors scaled by 1 / (1 - rate)
        assert 0.35 < kept.mean() < 0.65
        dropped.append(kept)
    assert not np.array_equal(*dropped)


def test_transformer_masks_and_dropout(rng):
    net = nn.TransformerEncoderLayer(8, 12, 2, dropout=0.5)
    net.initialize(init.Normal(0.5))
    x = rng.standard_normal((2, 3, 8)).astype(np.float32)
    key_mask = np.array([[1, 1, 0], [1, 1, 1]], bool)
    net(x)
    expected = refn.transformer_encoder(x.astype(np.float64), _arrays(net, x), 2, False, 1e-5,
                                        lambda y: np.maximum(y, 0), mask=key_mask[:, None, None])
    predicted = np.asarray(net(x, key_mask=key_mask))
    assert_close(predicted, expected, rtol=1e-4, atol=1e-5)
    with autograd.train_mode():
        trained = np.asarray(net(x, key_mask=key_mask))
    assert not np.allclose(trained, predicted, atol=1e-3)


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


@pytest.mark.parametrize("hybridize", [False, True])
def test_conv_transpose_deferred_shapes(hybridize):
    layer = nn.Conv2DTranspose(6, 3, strides=2, padding=1, output_padding=1, groups=3)
    layer.initialize()
    if hybridize:
        layer.hybridize()
    out = layer(np.ones((2, 9, 4, 5), np.float32))
    assert out.shape == (2, 6, 8, 10)
    assert layer.weight.shape == (9, 2, 3, 3) and layer.bias.shape == (6,)


def test_bad_constructor_arguments_name_the_layer():
    bad = [(lambda: nn.Conv1DTranspose(-2, 3), "Conv1DTranspose: channels must be a positive integer"),
           (lambda: nn.Conv2DTranspose(4, 3, strides=2, output_padding=2), "Conv2DTranspose: output_padding"),
           (lambda: nn.Conv3DTranspose(4, 3, layout="NCHW"), "Conv3DTranspose: layout must be one of"),
           (lambda: nn.Conv2DTranspose(4, (3, 3, 3)), "Conv2DTranspose: kernel_size"),
           (lambda: nn.GroupNorm(3, in_channels=4), r"GroupNorm: in_channels \(4\) must be divisible"),
           (lambda: nn.GroupNorm(0), "GroupNorm: num_groups must be a positive integer"),
           (lambda: nn.InstanceNorm(epsilon=0), "InstanceNorm: epsilon must be positive"),
           (lambda: nn.LeakyReLU(-0.1), "LeakyReLU: alpha"),
           (lambda: nn.PReLU(in_channels=0), "PReLU: in_channels"),
           (lambda: nn.GELU("fast"), "GELU: approximation"),
           (lambda: nn.PixelShuffle2D((2, 0)), "PixelShuffle2D: factor"),
           (lambda: nn.ReflectionPad2D(-1), "ReflectionPad2D: padding"),
           (lambda: nn.HybridConcatenate(axis="1"), "HybridConcatenate: axis"),
           (lambda: nn.MultiHeadAttention(10, 3), r"MultiHeadAttention: units \(10\) must be divisible"),
           (lambda: nn.MultiHeadAttention(8, 2, dropout=1.0), "MultiHeadAttention: dropout"),
           (lambda: nn.TransformerEncoderLayer(8, -1, 2), "TransformerEncoderLayer: hidden_size")]
    for make, message in bad:
        with pytest.raises(ValueError, match=message):
            make()


def _bad_inputs():
    net = nn.HybridSequential()
    net.add(nn.Identity(), nn.GroupNorm(2))
    return [(net, (2, 3, 4), r"GroupNorm '1': 3 channels .* cannot be split into 2 groups"),
            (nn.GroupNorm(2, in_channels=4), (2, 6, 3), "GroupNorm: expected 4 channels on axis 1"),
            (nn.InstanceNorm(axis=3), (2, 3, 4), "InstanceNorm: expected an input"),
            (nn.PReLU(in_channels=3), (2, 4), "PReLU: expected 3 channels on axis 1"),
            (nn.PixelShuffle2D(2), (1, 6, 2, 2), "PixelShuffle2D: expected a 4-D input .* divisible by 4"),
            (nn.ReflectionPad2D(3), (1, 1, 3, 3), "ReflectionPad2D: reflection padding"),
            (nn.Conv2DTranspose(2, 3, padding=3), (1, 1, 1, 1), "Conv2DTranspose: input of shape .* empty output"),
            (nn.Conv1DTranspose(2, 3, in_channels=4), (1, 3, 5), "Conv1DTranspose: expected 4 input channels"),
            (nn.MultiHeadAttention(4, 2), (2, 4), r"MultiHeadAttention: expected query \(B, T, Cq\)"),
            (nn.TransformerEncoderLayer(8, 4, 2), (2, 3, 5), r"TransformerEncoderLayer: expected an input \(B, T, 8\)")]


@pytest.mark.parametrize("hybridize", [False, True])
def test_bad_inputs_raise_shape_errors_naming_the_layer(hybridize):
    for layer, shape, message in _bad_inputs():
        layer.initialize()
        if hybridize:
            layer.hybridize()
        with pytest.raises(ShapeError, match=message):
            layer(np.ones(shape, np.float32))
    branches = nn.HybridConcatenate(axis=0)
    branches.add(nn.Dense(3), nn.Identity())
    branches.initialize()
    with pytest.raises(ShapeError, match=r"HybridConcatenate: cannot concatenate .* \[\(2, 3\), \(2, 4\)\]"):
        branches(np.ones((2, 4), np.float32))
    with pytest.raises(ValueError, match="Concatenate has no children"):
        nn.Concatenate()(np.ones((2, 4), np.float32))


def test_bad_attention_masks(rng):
    net, (q, k, v) = _cross_attention(rng)
    with pytest.raises(ShapeError, match=r"MultiHeadAttention: mask must broadcast to \(T, S\) = \(3, 4\)"):
        net(q, k, v, mask=np.ones((4, 3), bool))
    with pytest.raises(ShapeError, match=r"key_mask must have shape \(B, S\) = \(2, 4\), got \(2, 3\)"):
        net(q, k, v, key_mask=np.ones((2, 3), bool))
    with pytest.raises(ShapeError, match="MultiHeadAttention: expected query"):
        net(q, k[:, :3], v)
