"""The basic layers (dense, activations, 2-D convolution and pooling, batch and layer norm, embedding,
dropout): forward against NumPy, hybridized against eager (outputs and gradients, train and predict
mode), and gradients against finite differences of the NumPy reference; and, for every layer, errors
that name the layer. The other layers have their own modules: test_layers_conv.py, test_layers_norm.py,
test_layers_activation.py, test_layers_concatenate.py, test_layers_attention.py."""
import numpy as np
import pytest

from hybrid import autograd, init, nn
from hybrid.errors import ShapeError

import references as ref
from conftest import assert_close
from helpers import (LayerCase, built_layer, check_forward_matches_numpy, check_gradients_match_finite_differences,
                     check_input_gradients_of_parameter_free_layer, clone_params, run_with_grads)


def _conv_nhwc(a, **kw):
    x = a["x"].transpose(0, 3, 1, 2)
    w = a["weight"].transpose(0, 3, 1, 2)
    return ref.conv2d(x, w, a["bias"], **kw).transpose(0, 2, 3, 1)


CASES = [
    LayerCase("dense", lambda: nn.Dense(5, in_units=12), (3, 12), lambda a: ref.dense(a["x"], a["weight"], a["bias"])),
    LayerCase("dense_deferred_flatten", lambda: nn.Dense(4), (2, 3, 4),
              lambda a: ref.dense(a["x"], a["weight"], a["bias"])),
    LayerCase("dense_no_flatten", lambda: nn.Dense(4, flatten=False, use_bias=False), (2, 3, 6),
              lambda a: ref.dense(a["x"], a["weight"], flatten=False)),
    LayerCase("dense_relu", lambda: nn.Dense(6, activation="relu"), (4, 5),
              lambda a: np.maximum(ref.dense(a["x"], a["weight"], a["bias"]), 0)),
    *[LayerCase(f"activation_{name}", (lambda n=name: nn.Activation(n)), (3, 7), (lambda a, f=fn: f(a["x"])))
      for name, fn in ref.ACTIVATIONS.items()],
    LayerCase("conv2d", lambda: nn.Conv2D(6, 3, padding=1, in_channels=4), (2, 4, 7, 7),
              lambda a: ref.conv2d(a["x"], a["weight"], a["bias"], (1, 1), (1, 1), (1, 1), 1)),
    LayerCase("conv2d_strided_dilated_grouped", lambda: nn.Conv2D(6, (3, 2), strides=(2, 1), padding=(2, 1),
                                                                  dilation=(2, 1), groups=2), (2, 4, 9, 8),
              lambda a: ref.conv2d(a["x"], a["weight"], a["bias"], (2, 1), (2, 1), (2, 1), 2)),
    LayerCase("conv2d_nhwc_tanh", lambda: nn.Conv2D(5, 3, layout="NHWC", activation="tanh"), (2, 6, 6, 3),
              lambda a: np.tanh(_conv_nhwc(a, stride=(1, 1), pad=(0, 0), dilation=(1, 1), groups=1))),
    LayerCase("maxpool", lambda: nn.MaxPool2D(3, 2, 1), (2, 3, 7, 7),
              lambda a: ref.pool2d(a["x"], (3, 3), (2, 2), (1, 1), "max")),
    LayerCase("maxpool_ceil", lambda: nn.MaxPool2D(2, 2, ceil_mode=True), (1, 2, 7, 5),
              lambda a: ref.pool2d(a["x"], (2, 2), (2, 2), (0, 0), "max", ceil_mode=True)),
    LayerCase("avgpool", lambda: nn.AvgPool2D(3, 2, 1), (2, 3, 8, 7),
              lambda a: ref.pool2d(a["x"], (3, 3), (2, 2), (1, 1), "avg")),
    LayerCase("avgpool_exclude_pad_ceil", lambda: nn.AvgPool2D(3, 2, 1, ceil_mode=True, count_include_pad=False),
              (2, 3, 8, 6), lambda a: ref.pool2d(a["x"], (3, 3), (2, 2), (1, 1), "avg", True, False)),
    LayerCase("global_avgpool", lambda: nn.GlobalAvgPool2D(), (2, 3, 5, 4),
              lambda a: a["x"].mean(axis=(2, 3), keepdims=True)),
    LayerCase("batchnorm_predict", lambda: nn.BatchNorm(in_channels=3, running_mean_initializer=init.Normal(1.0),
                                                        running_variance_initializer=init.Constant(2.0),
                                                        gamma_initializer=init.Normal(1.0)), (4, 3, 2, 2),
              lambda a: ref.batch_norm_infer(a["x"], a["gamma"], a["beta"], a["running_mean"], a["running_var"], 1e-5)),
    LayerCase("layernorm", lambda: nn.LayerNorm(gamma_initializer=init.Normal(1.0), beta_initializer=init.Normal(1.0)),
              (3, 4, 6), lambda a: ref.layer_norm(a["x"], a["gamma"], a["beta"], 1e-5)),
    LayerCase("embedding", lambda: nn.Embedding(10, 4), (3, 5), lambda a: a["weight"][a["x"].astype(int)],
              integer_input=10),
    LayerCase("flatten", lambda: nn.Flatten(), (2, 3, 4), lambda a: a["x"].reshape(2, -1)),
    LayerCase("hybrid_lambda", lambda: nn.HybridLambda("tanh"), (3, 3), lambda a: np.tanh(a["x"])),
]
IDS = [c.name for c in CASES]
WITH_PARAMS = [c for c in CASES if c.name.startswith(("dense", "conv", "batchnorm", "layernorm", "embedding"))]


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_forward_matches_numpy(case, rng):
    check_forward_matches_numpy(case, rng)


@pytest.mark.parametrize("training", [False, True], ids=["predict", "train"])
@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_hybridized_equals_eager(case, training, rng):
    eager, x = built_layer(case, rng)
    compiled, _ = built_layer(case, rng, seed=1)
    clone_params(eager, compiled)
    compiled.hybridize()
    out_e, grads_e = run_with_grads(eager, (x,), training)
    out_h, grads_h = run_with_grads(compiled, (x,), training)
    assert_close(out_h, out_e, rtol=1e-5, atol=1e-5)
    assert grads_e.keys() == grads_h.keys()
    for name in grads_e:
        assert_close(grads_h[name], grads_e[name], rtol=1e-4, atol=1e-5)
    for (name, p), q in zip(eager.collect_params().items(), compiled.collect_params().values()):
        assert_close(q.data(), p.data(), rtol=1e-5, atol=1e-6)  # state updates agree too


@pytest.mark.parametrize("case", WITH_PARAMS, ids=[c.name for c in WITH_PARAMS])
def test_gradients_match_finite_differences(case, rng):
    check_gradients_match_finite_differences(case, rng)


PARAM_FREE = [c for c in CASES if c not in WITH_PARAMS]


@pytest.mark.parametrize("hybridize", [False, True])
@pytest.mark.parametrize("case", PARAM_FREE, ids=[c.name for c in PARAM_FREE])
def test_input_gradients_of_parameter_free_layers(case, hybridize, rng):
    check_input_gradients_of_parameter_free_layer(case, hybridize, rng)


def test_batchnorm_training_uses_batch_stats_and_updates_running_stats(rng):
    for hybridize in (False, True):
        bn = nn.BatchNorm(momentum=0.8, in_channels=3, gamma_initializer=init.Normal(1.0))
        bn.initialize()
        if hybridize:
            bn.hybridize()
        x = rng.standard_normal((5, 3, 4, 2)).astype(np.float32) * 3 + 1
        gamma = np.asarray(bn.gamma.data(), np.float64)
        with autograd.record():
            y = bn(x)
        expected, mean, var = ref.batch_norm_train(x.astype(np.float64), gamma, np.zeros(3), 1e-5)
        assert_close(y, expected, rtol=1e-4, atol=1e-4)
        assert_close(bn.running_mean.data(), 0.2 * mean, rtol=1e-5, atol=1e-5)
        assert_close(bn.running_var.data(), 0.8 + 0.2 * var, rtol=1e-5, atol=1e-5)
        with autograd.predict_mode():
            y2 = bn(x)
        assert_close(y2, ref.batch_norm_infer(x, gamma, np.zeros(3), 0.2 * mean, 0.8 + 0.2 * var, 1e-5),
                     rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("hybridize", [False, True])
def test_dropout_fresh_masks_scaling_and_gradient(hybridize, rng):
    drop = nn.Dropout(0.5)
    if hybridize:
        drop.hybridize()
    x = rng.uniform(1, 2, (64, 64)).astype(np.float32)
    np.testing.assert_array_equal(np.asarray(drop(x)), x)  # predict mode: identity
    masks = []
    for _ in range(3):
        with autograd.record():
            y = drop(x)
        autograd.backward(y)
        y = np.asarray(y)
        kept = y != 0
        assert_close(y[kept], 2 * x[kept])
        assert 0.4 < kept.mean() < 0.6
        masks.append(kept)
    assert not np.array_equal(masks[0], masks[1]) and not np.array_equal(masks[1], masks[2])


def test_dropout_axes_share_mask(rng):
    drop = nn.Dropout(0.5, axes=(1,))
    with autograd.train_mode():
        y = np.asarray(drop(np.ones((50, 8), np.float32)))
    assert all(len(set(row)) == 1 for row in y)


def test_deferred_init_conv_on_4d_input():
    for hybridize in (False, True):
        layer = nn.Conv2D(10, 2)
        layer.initialize()
        if hybridize:
            layer.hybridize()
        out = layer(np.ones((5, 4, 10, 10), np.float32))
        assert out.shape == (5, 10, 9, 9)
        assert layer.weight.shape == (10, 4, 2, 2) and layer.bias.shape == (10,)


@pytest.mark.parametrize("hybridize", [False, True])
def test_bad_input_errors_name_the_layer(hybridize):
    net = nn.HybridSequential()
    net.add(nn.Dense(4, in_units=3), nn.Conv2D(2, 3))
    net.initialize()
    if hybridize:
        net.hybridize()
    with pytest.raises(ShapeError, match=r"Dense '0'.*expected inputs with 3 features.*\(2, 5\)"):
        net(np.ones((2, 5), np.float32))
    with pytest.raises(ShapeError, match=r"Conv2D '1'.*expected a 4-D input in layout 'NCHW'"):
        net(np.ones((2, 3), np.float32))
    bn = nn.BatchNorm(in_channels=3)
    bn.initialize()
    with pytest.raises(ShapeError, match="BatchNorm: expected 3 channels"):
        bn(np.ones((2, 4, 5), np.float32))


def test_bad_constructor_arguments():
    with pytest.raises(ValueError, match="Dense: units must be a non-negative integer"):
        nn.Dense(-3)
    with pytest.raises(ValueError, match="Conv2D: layout must be one of"):
        nn.Conv2D(3, 3, layout="NCWH")
    with pytest.raises(ValueError, match="Conv2D: kernel_size"):
        nn.Conv2D(3, (3, 0))
    with pytest.raises(ValueError, match="Dropout: rate"):
        nn.Dropout(1.5)
    with pytest.raises(ValueError, match="Activation: unknown activation"):
        nn.Activation("swishy")
    with pytest.raises(ValueError, match="divisible by groups"):
        nn.Conv2D(5, 3, groups=2)


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
