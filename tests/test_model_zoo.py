"""Model zoo: parameter counts against the published figures, every family eager vs hybridized, NumPy
references for the building blocks and the GPT model, generation, and get_model errors."""
import numpy as np
import pytest

import hybrid
from hybrid import model_zoo, nn
from hybrid.errors import ShapeError
from hybrid.model_zoo import (MLP, VGG, AdaptiveAvgPool2D, BasicBlockV1, BasicBlockV2, BottleneckV1, BottleneckV2,
                              GPTModel, InvertedResidual, LeNet, MobileNetV2, ResNetV1, ResNetV2,
                              TransformerClassifier)

import references as ref
import references_nn as ref_nn
from conftest import assert_close
from helpers import clone_params, run_with_grads

# Trainable parameters (weights, biases, BatchNorm gamma/beta; running statistics not counted) of the
# ImageNet models with 1000 classes and 3-channel input, as published by torchvision (num_params) and for
# GPT-2 small by OpenAI. The ResNet and VGG figures do not depend on the stride placement or input size.
PUBLISHED = {
    "resnet18_v1": 11_689_512, "resnet34_v1": 21_797_672, "resnet50_v1": 25_557_032,
    "resnet101_v1": 44_549_160, "resnet152_v1": 60_192_808,
    "vgg11_bn": 132_868_840, "vgg13_bn": 133_053_736, "vgg16_bn": 138_365_992, "vgg19_bn": 143_678_248,
    "vgg16": 138_357_544, "mobilenetv2_1.0": 3_504_872, "gpt_small": 124_439_808,
    "alexnet": 61_100_840, "squeezenet1.0": 1_248_424, "squeezenet1.1": 1_235_496,
    "densenet121": 7_978_856, "densenet161": 28_681_000, "densenet169": 14_149_480, "densenet201": 20_013_928,
    "mobilenet1.0": 4_231_976,  # Keras' MobileNet (alpha 1.0): its trainable parameters
}
# Derived by hand. ResNet-18 v2 vs v1: the first BN of each stage's first block sees the block's input channels
# instead of its output channels (+2 * (64 + 64 + 128 + 256) - 2 * (64 + 128 + 256 + 512)), the projection
# shortcuts have no BN (-2 * (128 + 256 + 512)), and a final BN follows the last stage (+2 * 512).
# ResNet-50 v2 likewise: +2 * (64 + 256 + 512 + 1024) - 2 * (256 + 512 + 1024 + 2048) for the first blocks,
# -2 * (256 + 512 + 1024 + 2048) for the projections, +2 * 2048.
# LeNet-5 on 1-channel 28x28 digits: 156 + 2,416 + 48,120 + 10,164 + 850 (conv, conv, dense, dense, output).
# CIFAR ResNet-20: 269,722 with the paper's parameter-free shortcuts, plus two 1x1 projections with BN
# (16 * 32 + 2 * 32 and 32 * 64 + 2 * 64).
# Inception v3: torchvision's 27,161,264 less its auxiliary classifier (absent here, as in Gluon): a 1x1
# convolution 768 -> 128 with BN (98,304 + 256), a 5x5 convolution 128 -> 768 with BN (2,457,600 + 1,536) and
# Dense(768, 1000) (769,000).
DERIVED = {
    "inceptionv3": 27_161_264 - (98_304 + 256) - (2_457_600 + 1_536) - 769_000,
    "resnet18_v2": 11_689_512 + 2 * 512 - 2 * 960 - 2 * 896 + 2 * 512,
    "resnet50_v2": 25_557_032 + 2 * 1856 - 2 * 3840 - 2 * 3840 + 2 * 2048,
    "cifar_resnet20_v1": 269_722 + 576 + 2176,
    "lenet": 61_706,
}
INPUT_CHANNELS = {"gpt_small": {}, "lenet": {"in_channels": 1}}


def count_params(net, trainable=True):
    unique = {id(p): p for p in net.collect_params().values()}.values()
    return sum(int(np.prod(p.shape)) for p in unique if not trainable or p.grad_req != "null")


@pytest.mark.parametrize("name", sorted({**PUBLISHED, **DERIVED}))
def test_parameter_count_matches_the_published_figure(name):
    # with in_channels given, every shape is known at construction: no forward is needed
    net = model_zoo.get_model(name, **INPUT_CHANNELS.get(name, {"in_channels": 3}))
    assert count_params(net) == {**PUBLISHED, **DERIVED}[name]


def test_deferred_input_channels_are_inferred_by_a_forward():
    net = model_zoo.get_model("lenet")
    assert net.features[0].weight.shape == (6, 0, 5, 5)
    net.initialize()
    net(np.zeros((1, 1, 28, 28), np.float32))
    assert count_params(net) == DERIVED["lenet"]


def test_counts_with_running_statistics_and_classes():
    net = model_zoo.get_model("resnet18_v1", in_channels=3, classes=10)
    assert count_params(net) == 11_689_512 - 512 * 990 - 990
    bn_channels = 64 + 2 * 2 * 64 + (4 * 128 + 128) + (4 * 256 + 256) + (4 * 512 + 512)
    assert count_params(net, trainable=False) == count_params(net) + 2 * bn_channels


SMALL_CASES = {   # name: (constructor, input shape, classes)
    "mlp": (lambda: MLP(hidden=(8, 6), classes=3, dropout=0.2), (2, 1, 4, 4), 3),
    "lenet": (lambda: LeNet(classes=4), (2, 1, 28, 28), 4),
    "resnet_v1_basic_imagenet": (lambda: ResNetV1(BasicBlockV1, [1, 1], [4, 4, 8], classes=5), (2, 3, 16, 16), 5),
    "resnet_v2_bottleneck_cifar": (lambda: ResNetV2(BottleneckV2, [1, 1], [4, 8, 16], classes=5, stem="cifar"),
                                   (2, 3, 8, 8), 5),
    "vgg_bn": (lambda: VGG([1, 1, 1, 1, 1], [4, 4, 4, 8, 8], classes=3, batch_norm=True), (1, 3, 32, 32), 3),
    "mobilenetv2_0.25": (lambda: model_zoo.get_model("mobilenetv2_0.25", classes=7), (1, 3, 8, 8), 7),
    "mobilenet0.25": (lambda: model_zoo.get_model("mobilenet0.25", classes=7), (1, 3, 32, 32), 7),
    "densenet_small": (lambda: model_zoo.DenseNet(8, 4, [2, 2], classes=3, dropout=0.1), (1, 3, 56, 56), 3),
}


@pytest.mark.parametrize("case", list(SMALL_CASES))
def test_vision_models_eager_and_hybridized_agree(case, rng):
    make, shape, classes = SMALL_CASES[case]
    net = make()
    net.initialize(hybrid.init.Xavier())
    x = rng.standard_normal(shape).astype(np.float32)
    eager = np.asarray(net(x))
    assert eager.shape == (shape[0], classes) and np.isfinite(eager).all()
    net.hybridize()
    assert_close(net(x), eager, rtol=1e-4, atol=1e-5)


def test_resnet_training_mode_agrees(rng):
    """Batch statistics in training mode: equal outputs and running statistics, eager and hybridized."""
    make = lambda: ResNetV1(BottleneckV1, [1], [4, 8], classes=3, stem="cifar", in_channels=3)  # noqa: E731
    eager, hybridized = make(), make()
    eager.initialize(hybrid.init.Xavier())
    hybridized.initialize()
    clone_params(eager, hybridized)
    hybridized.hybridize()
    x = rng.standard_normal((2, 3, 6, 6)).astype(np.float32)
    with hybrid.autograd.train_mode():
        assert_close(hybridized(x), eager(x), rtol=1e-4, atol=1e-5)
    stats = eager.collect_params(".*running_(mean|var)")
    assert len(stats) == 10
    for name, param in stats.items():
        assert_close(hybridized.collect_params()[name].data(), param.data())
        assert not np.allclose(np.asarray(param.data()), 0.0 if "mean" in name else 1.0)   # they were updated


# -- NumPy references of the building blocks -----------------------------------------------------------------
def _randomise(net, rng):
    """Random values for every parameter, positive running variances."""
    for name, param in net.collect_params().items():
        value = rng.standard_normal(param.shape) * 0.5
        param.set_data(np.abs(value) + 0.5 if name.endswith("running_var") else value)
    return {name: np.asarray(p.data(), np.float64) for name, p in net.collect_params().items()}


def _conv(x, a, name, stride=1, groups=1):
    w = a[f"{name}.weight"]
    pad = w.shape[-1] // 2
    return ref.conv2d(x, w, a.get(f"{name}.bias"), (stride, stride), (pad, pad), (1, 1), groups)


def _bn(x, a, name):
    return ref.batch_norm_infer(x, a[f"{name}.gamma"], a[f"{name}.beta"], a[f"{name}.running_mean"],
                                a[f"{name}.running_var"], 1e-5)


def _relu(x):
    return np.maximum(x, 0)


def _initialized(block, shape, rng):
    block.initialize()
    block(np.zeros(shape, np.float32))
    return _randomise(block, rng)


def test_basic_block_v1_matches_numpy(rng):
    block = BasicBlockV1(6, 2, downsample=True, in_channels=4)
    a = _initialized(block, (2, 4, 5, 5), rng)
    x = rng.standard_normal((2, 4, 5, 5))
    body = _bn(_conv(_relu(_bn(_conv(x, a, "body.0", 2), a, "body.1")), a, "body.3"), a, "body.4")
    expected = _relu(body + _bn(_conv(x, a, "downsample.0", 2), a, "downsample.1"))
    assert_close(block(x.astype(np.float32)), expected, rtol=1e-4, atol=1e-4)


def test_bottleneck_v2_matches_numpy(rng):
    block = BottleneckV2(8, 2, downsample=True, in_channels=4)
    a = _initialized(block, (2, 4, 6, 6), rng)
    x = rng.standard_normal((2, 4, 6, 6))
    pre = _relu(_bn(x, a, "bn1"))
    y = _conv(_relu(_bn(_conv(pre, a, "conv1"), a, "bn2")), a, "conv2", stride=2)
    y = _conv(_relu(_bn(y, a, "bn3")), a, "conv3")
    assert_close(block(x.astype(np.float32)), y + _conv(pre, a, "downsample.0", 2), rtol=1e-4, atol=1e-4)


def test_inverted_residual_matches_numpy(rng):
    block = InvertedResidual(4, 4, 1, expansion=3)
    a = _initialized(block, (1, 4, 5, 5), rng)
    x = rng.standard_normal((1, 4, 5, 5))
    relu6 = lambda v: np.clip(v, 0, 6)  # noqa: E731
    y = relu6(_bn(_conv(x, a, "body.0"), a, "body.1"))
    y = relu6(_bn(_conv(y, a, "body.3", groups=12), a, "body.4"))
    assert_close(block(x.astype(np.float32)), x + _bn(_conv(y, a, "body.6"), a, "body.7"), rtol=1e-4, atol=1e-4)
    assert len(InvertedResidual(4, 8, 2, expansion=1).body) == 5   # no expansion convolution for t = 1


@pytest.mark.parametrize("size_in, size_out", [((5, 7), (3, 2)), ((1, 1), (7, 7)), ((7, 7), (7, 7))])
def test_adaptive_avg_pool_matches_numpy(size_in, size_out, rng):
    x = rng.standard_normal((2, 3) + size_in)
    expected = np.zeros((2, 3) + size_out)
    for i in range(size_out[0]):
        rows = slice(int(np.floor(i * size_in[0] / size_out[0])), int(np.ceil((i + 1) * size_in[0] / size_out[0])))
        for j in range(size_out[1]):
            cols = slice(int(np.floor(j * size_in[1] / size_out[1])),
                         int(np.ceil((j + 1) * size_in[1] / size_out[1])))
            expected[:, :, i, j] = x[:, :, rows, cols].mean(axis=(2, 3))
    assert_close(AdaptiveAvgPool2D(size_out)(x.astype(np.float32)), expected)


# -- sequence models -------------------------------------------------------------------------------------------
def _tiny_gpt(**kwargs):
    options = dict(vocab_size=11, units=16, num_layers=2, num_heads=2, max_length=8, dropout=0.0)
    net = GPTModel(**{**options, **kwargs})
    net.initialize(hybrid.init.Xavier())
    return net


def _gpt_reference(tokens, a, tied, layers=2, heads=2):
    t = tokens.shape[1]
    x = a["embedding.token.weight"][tokens] + a["embedding.position.weight"][:t][None]
    causal = np.tril(np.ones((t, t), bool))
    for i in range(layers):
        prefix = f"decoder.{i}."
        layer = {k[len(prefix):]: v for k, v in a.items() if k.startswith(prefix)}
        x = ref_nn.transformer_encoder(x, layer, heads, True, 1e-5, ref_nn.ACTIVATIONS["gelu_tanh"], causal)
    x = ref.layer_norm(x, a["norm.gamma"], a["norm.beta"], 1e-5)
    return x @ (a["embedding.token.weight"] if tied else a["output.weight"]).T


@pytest.mark.parametrize("tied", [True, False])
def test_gpt_matches_numpy_and_hybridized(tied, rng):
    net = _tiny_gpt(tie_weights=tied)
    tokens = rng.integers(0, 11, (2, 6)).astype(np.int32)
    eager = np.asarray(net(tokens))
    a = {name: np.asarray(p.data(), np.float64) for name, p in net.collect_params().items()}
    assert ("output.weight" in a) is not tied
    assert eager.shape == (2, 6, 11)
    assert_close(eager, _gpt_reference(tokens, a, tied), rtol=1e-4, atol=1e-4)
    net.hybridize()
    assert_close(net(tokens), eager, rtol=1e-4, atol=1e-5)
    # causal: changing the last token leaves the scores of earlier positions unchanged
    changed = tokens.copy()
    changed[:, -1] = (changed[:, -1] + 1) % 11
    assert_close(np.asarray(net(changed))[:, :-1], eager[:, :-1], rtol=1e-4, atol=1e-5)


def test_gpt_training_gradients_agree_and_counts(rng):
    eager, hybridized = _tiny_gpt(num_layers=1), _tiny_gpt(num_layers=1)
    clone_params(eager, hybridized)
    hybridized.hybridize()
    tokens = rng.integers(0, 11, (2, 5)).astype(np.int32)
    out_e, grads_e = run_with_grads(eager, [tokens], training=True)
    out_h, grads_h = run_with_grads(hybridized, [tokens], training=True)
    assert_close(out_h, out_e, rtol=1e-4, atol=1e-5)
    for name in grads_e:
        assert_close(grads_h[name], grads_e[name], rtol=1e-3, atol=1e-5)
    per_layer = 4 * (16 * 16 + 16) + 2 * 2 * 16 + (16 * 64 + 64) + (64 * 16 + 16)
    tied = 11 * 16 + 8 * 16 + per_layer + 2 * 16
    assert count_params(eager) == tied
    assert count_params(_tiny_gpt(num_layers=3, tie_weights=False)) == tied + 2 * per_layer + 11 * 16


def _greedy_reference(net, prompt, steps):
    tokens = np.array(prompt)
    for _ in range(steps):
        scores = np.asarray(net(tokens[:, -net.max_length:]))[:, -1]
        tokens = np.concatenate([tokens, scores.argmax(-1)[:, None]], axis=1)
    return tokens


def test_gpt_greedy_generation(rng):
    net = _tiny_gpt()
    prompt_length, steps = 7, 3   # the context slides past max_length = 8
    prompt = rng.integers(0, 11, (2, prompt_length)).astype(np.int32)
    net.hybridize()
    expected = _greedy_reference(net, prompt, steps)
    out = net.generate(prompt, steps)
    assert out.dtype == np.int32 and out.shape == (2, prompt_length + steps)
    np.testing.assert_array_equal(out, expected)


def test_gpt_sampled_generation(rng):
    net = _tiny_gpt()
    net.hybridize()
    prompt = rng.integers(0, 11, 3).astype(np.int32)   # 1-D: one sequence; 3 + 5 tokens fill max_length
    greedy = net.generate(prompt, 5)
    assert greedy.shape == (8,)
    np.testing.assert_array_equal(net.generate(prompt[None], 5, sample=True, top_k=1), greedy[None])
    hybrid.random.seed(7)
    first = net.generate(prompt, 5, sample=True, temperature=2.0)
    hybrid.random.seed(7)
    np.testing.assert_array_equal(net.generate(prompt, 5, sample=True, temperature=2.0), first)
    draws = np.concatenate([net.generate(prompt, 5, sample=True, temperature=5.0)[3:] for _ in range(4)])
    assert len(set(draws.tolist())) > 1 and draws.min() >= 0 and draws.max() < 11
    with pytest.raises(ValueError, match="temperature"):
        net.generate(prompt, 2, sample=True, temperature=0)
    with pytest.raises(ValueError, match="prompt"):
        net.generate(np.zeros((1, 0), np.int32), 2)
    with pytest.raises(ShapeError, match="max_length"):
        net(np.zeros((1, 9), np.int32))


def test_transformer_classifier(rng):
    net = TransformerClassifier(vocab_size=20, classes=3, units=16, hidden_size=32, num_heads=2, num_layers=1,
                                max_length=8, dropout=0.0)
    net.initialize(hybrid.init.Xavier())
    tokens = rng.integers(0, 20, (2, 6)).astype(np.int32)
    valid = np.array([6, 3], np.int32)
    eager = np.asarray(net(tokens, valid))
    assert eager.shape == (2, 3)
    a = {name: np.asarray(p.data(), np.float64) for name, p in net.collect_params().items()}
    key_mask = (np.arange(6)[None] < valid[:, None])[:, None, None, :]
    x = a["embedding.token.weight"][tokens] + a["embedding.position.weight"][:6][None]
    layer = {k[len("encoder.0."):]: v for k, v in a.items() if k.startswith("encoder.0.")}
    x = ref_nn.transformer_encoder(x, layer, 2, False, 1e-5, ref.ACTIVATIONS["relu"], key_mask)
    weights = key_mask[:, 0, 0, :, None]
    pooled = (x * weights).sum(1) / weights.sum(1)
    assert_close(eager, pooled @ a["output.weight"].T + a["output.bias"], rtol=1e-4, atol=1e-4)
    net.hybridize()
    padded = tokens.copy()
    padded[1, 3:] = 0   # padding tokens do not matter
    assert_close(net(padded, valid), eager, rtol=1e-4, atol=1e-5)
    first = TransformerClassifier(vocab_size=20, units=16, hidden_size=32, num_heads=2, num_layers=1, max_length=8,
                                  pooling="first", pre_norm=True)
    first.initialize()
    assert np.asarray(first(tokens)).shape == (2, 2)


# -- get_model -------------------------------------------------------------------------------------------------
def test_get_model_names_and_errors():
    names = model_zoo.get_model_list()
    for name in ("resnet18_v1", "resnet34_v2", "resnet50_v2", "vgg11_bn", "vgg16_bn", "mobilenetv2_1.0", "lenet",
                 "mlp", "transformer_classifier", "gpt_small", "cifar_resnet20_v1", "cifar_resnet110_v2"):
        assert name in names
    assert isinstance(model_zoo.get_model("ResNet18_V1"), ResNetV1)
    assert isinstance(model_zoo.get_model("mobilenetv2_0.5"), MobileNetV2)
    thumbnail = ResNetV2(BasicBlockV2, [1], [4, 4], thumbnail=True, in_channels=3)
    assert thumbnail.features[0].weight.shape == (4, 3, 3, 3) and isinstance(thumbnail.features[1], nn.HybridSequential)
    assert hybrid.model_zoo is model_zoo
    with pytest.raises(ValueError, match=r"unknown model 'resnet19_v1'.*Did you mean.*resnet18_v1.*Available models:"
                                         r".*gpt_small.*vgg16_bn"):
        model_zoo.get_model("resnet19_v1")
    with pytest.raises(ValueError, match="no pretrained weights"):
        model_zoo.get_model("vgg11", pretrained=True)
    with pytest.raises(ValueError, match="stem must be one of"):
        model_zoo.get_model("resnet18_v1", stem="tiny")
    with pytest.raises(ValueError, match="classes must be a positive integer"):
        model_zoo.get_model("lenet", classes=0)
    with pytest.raises(ValueError, match="6n \\+ 2"):
        model_zoo.get_cifar_resnet(1, 21)
    with pytest.raises(ValueError, match="num_layers must be one of"):
        model_zoo.get_resnet(1, 19)
    with pytest.raises(ValueError, match="multiplier must be a positive number"):
        MobileNetV2(multiplier=0)
    with pytest.raises(TypeError):
        model_zoo.get_model("mlp", no_such_argument=1)


@pytest.mark.parametrize("name", ["alexnet", "squeezenet1.0", "squeezenet1.1"])
def test_imagenet_models_at_their_input_size(name, rng):
    """AlexNet and SqueezeNet fix the spatial size (a 6x6 flatten, a 13x13 average pool): 224x224 inputs."""
    net = model_zoo.get_model(name, classes=5, root="~/.mxnet/models")  # Gluon's root= is accepted
    net.initialize(hybrid.init.Xavier())
    net.hybridize()
    out = net(rng.standard_normal((1, 3, 224, 224)).astype(np.float32))
    assert out.shape == (1, 5) and np.isfinite(np.asarray(out)).all()
    assert [k for k in net.collect_params()][:2] == ["features.0.weight", "features.0.bias"]


def test_new_zoo_names_refuse_pretrained_weights_and_bad_arguments():
    for name in ("alexnet", "densenet121", "squeezenet1.1", "mobilenet0.5"):
        with pytest.raises(ValueError, match="no pretrained weights"):
            model_zoo.get_model(name, pretrained=True)
    with pytest.raises(ValueError, match="version must be '1.0' or '1.1'"):
        model_zoo.SqueezeNet("2.0")
    with pytest.raises(ValueError, match="num_layers must be one of"):
        model_zoo.get_densenet(100)


def test_inception_v3_maps_299x299_images_to_classes():
    import jax
    net = model_zoo.get_model("inceptionv3", classes=5)
    net.initialize()
    net.hybridize()
    out = jax.eval_shape(net, jax.ShapeDtypeStruct((2, 3, 299, 299), np.float32))  # shapes only: no compile
    assert out.shape == (2, 5)
