"""The five benchmark models as data: shapes, canonical parameters and synthetic batches.

Every framework module builds its models from these canonical parameters, so all frameworks start a
run from the same weights and compute the same losses. Canonical layouts follow Gluon: dense weights
``(out, in)``, convolution weights ``(out, in, kh, kw)``, images NCHW. Only NumPy is needed here, and
the code runs on Python 3.8 (the MXNet worker's interpreter).
"""
from __future__ import annotations

from collections import OrderedDict
from typing import Any, Callable, Dict, List, Tuple

import numpy as np

CLASSES = 10
LEARNING_RATE = 0.01
MOMENTUM = 0.9
BN_MOMENTUM = 0.9  # Gluon/Flax convention: running = 0.9 * running + 0.1 * batch (PyTorch's momentum=0.1)
EPS = 1e-5

MLP33_WIDTH, MLP33_HIDDEN = 64, 32
MLP784_SIZES = (784, 512, 512, 512, 512)
CNN_CHANNELS = (32, 64, 128)
RESNET_STAGES = ((64, 1), (128, 2), (256, 2), (512, 2))  # (channels, stride of the first block)
TRANSFORMER = {"layers": 4, "units": 128, "heads": 4, "ffn": 512, "length": 64}

MODELS = OrderedDict([
    ("mlp33", "33-layer MLP: 32 x Dense(64)+ReLU, Dense(10); input (B, 64)"),
    ("mlp784", "MLP 784-512x4-10 with ReLU; input (B, 784)"),
    ("cnn", "(Conv3x3-BN-ReLU-MaxPool2) x3 with 32/64/128 channels, Dense(10); input (B, 3, 32, 32)"),
    ("resnet18", "ResNet-18, CIFAR variant (3x3 stem, no max-pool), Dense(10); input (B, 3, 32, 32)"),
    ("transformer", "4 post-LN encoder layers (d=128, 4 heads, FFN 512, ReLU), mean-pool, Dense(10); "
                    "input (B, 64, 128)"),
])
DEFAULT_BATCH = {"mlp33": 32, "mlp784": 128, "cnn": 64, "resnet18": 16, "transformer": 16}


class Unavailable(Exception):
    """A framework variant that cannot run here (missing package or API); the suite reports the reason."""


class Case:
    """One built (framework, model): ``train_step()`` and ``infer()`` each run one full step on fixed data
    and return only when its results are computed; ``train_step`` returns the batch loss (any array type).
    ``step_bytes()``, where a framework gives it, is XLA's memory figure of the train step's program."""

    def __init__(self, train_step: Callable[[], Any], infer: Callable[[], Any], n_params: int, n_state: int,
                 notes: str = "", step_bytes: Callable[[], int] | None = None):
        self.train_step, self.infer = train_step, infer
        self.n_params, self.n_state, self.notes = n_params, n_state, notes
        self.step_bytes = step_bytes


# -- parameter specifications ------------------------------------------------------------------
Spec = List[Tuple[str, Tuple[int, ...], str]]  # (name, shape, kind)


def dense(name: str, n_in: int, n_out: int) -> Spec:
    return [(name + ".weight", (n_out, n_in), "dense"), (name + ".bias", (n_out,), "bias")]


def conv(name: str, c_in: int, c_out: int, k: int) -> Spec:
    return [(name + ".weight", (c_out, c_in, k, k), "conv")]


def batch_norm(name: str, c: int) -> Spec:
    return [(name + ".gamma", (c,), "ones"), (name + ".beta", (c,), "zeros"),
            (name + ".running_mean", (c,), "state_zeros"), (name + ".running_var", (c,), "state_ones")]


def layer_norm(name: str, c: int) -> Spec:
    return [(name + ".gamma", (c,), "ones"), (name + ".beta", (c,), "zeros")]


def mlp_sizes(model: str) -> List[int]:
    """Layer widths of an MLP model, input and classes included."""
    if model == "mlp33":
        return [MLP33_WIDTH] * (MLP33_HIDDEN + 1) + [CLASSES]
    return list(MLP784_SIZES) + [CLASSES]


def resnet_blocks() -> List[Tuple[str, int, int, int]]:
    """``(name, in_channels, out_channels, stride)`` of the eight basic blocks, in order."""
    blocks, c_in = [], 64
    for c_out, stride in RESNET_STAGES:
        for i in range(2):
            blocks.append(("blocks.%d" % len(blocks), c_in, c_out, stride if i == 0 else 1))
            c_in = c_out
    return blocks


def param_spec(model: str) -> Spec:
    """Canonical ``(name, shape, kind)`` of every parameter and state array of ``model``, in order.
    Names are structural (``'blocks.0.conv1.weight'``); kinds starting with ``state`` are not trained."""
    if model in ("mlp33", "mlp784"):
        sizes = mlp_sizes(model)
        return [p for i in range(len(sizes) - 1) for p in dense("layers.%d" % i, sizes[i], sizes[i + 1])]
    if model == "cnn":
        spec, c_in = [], 3
        for i, c_out in enumerate(CNN_CHANNELS):
            spec += conv("conv%d" % i, c_in, c_out, 3) + batch_norm("bn%d" % i, c_out)
            c_in = c_out
        return spec + dense("fc", c_in * 4 * 4, CLASSES)
    if model == "resnet18":
        spec = conv("conv", 3, 64, 3) + batch_norm("bn", 64)
        for name, c_in, c_out, stride in resnet_blocks():
            spec += conv(name + ".conv1", c_in, c_out, 3) + batch_norm(name + ".bn1", c_out)
            spec += conv(name + ".conv2", c_out, c_out, 3) + batch_norm(name + ".bn2", c_out)
            if has_downsample(c_in, c_out, stride):
                spec += conv(name + ".down", c_in, c_out, 1) + batch_norm(name + ".down_bn", c_out)
        return spec + dense("fc", 512, CLASSES)
    if model == "transformer":
        d, ffn, spec = TRANSFORMER["units"], TRANSFORMER["ffn"], []
        for i in range(TRANSFORMER["layers"]):
            name = "layers.%d" % i
            spec += dense(name + ".qkv", d, 3 * d) + dense(name + ".proj", d, d) + layer_norm(name + ".norm1", d)
            spec += dense(name + ".ffn1", d, ffn) + dense(name + ".ffn2", ffn, d) + layer_norm(name + ".norm2", d)
        return spec + dense("fc", d, CLASSES)
    raise ValueError("unknown model %r; expected one of %s" % (model, list(MODELS)))


def has_downsample(c_in: int, c_out: int, stride: int) -> bool:
    return stride != 1 or c_in != c_out


def init_params(model: str, seed: int = 0) -> "OrderedDict[str, np.ndarray]":
    """Canonical float32 parameters and states of ``model``: Glorot-uniform dense, He-normal convolutions,
    small uniform biases, BatchNorm/LayerNorm at gamma=1, beta=0, running mean 0 and variance 1."""
    rng = np.random.default_rng(seed)
    out = OrderedDict()
    for name, shape, kind in param_spec(model):
        if kind == "dense":
            limit = np.sqrt(6.0 / (shape[0] + shape[1]))
            value = rng.uniform(-limit, limit, shape)
        elif kind == "conv":
            value = rng.standard_normal(shape) * np.sqrt(2.0 / np.prod(shape[1:]))
        elif kind == "bias":
            value = rng.uniform(-0.05, 0.05, shape)
        elif kind in ("ones", "state_ones"):
            value = np.ones(shape)
        else:
            value = np.zeros(shape)
        out[name] = value.astype(np.float32)
    return out


def count(model: str) -> Tuple[int, int]:
    """(trainable parameter count, state count) of ``model``."""
    trainable = state = 0
    for _, shape, kind in param_spec(model):
        size = int(np.prod(shape))
        if kind.startswith("state"):
            state += size
        else:
            trainable += size
    return trainable, state


def input_shape(model: str, batch: int) -> Tuple[int, ...]:
    shapes = {"mlp33": (MLP33_WIDTH,), "mlp784": (MLP784_SIZES[0],), "cnn": (3, 32, 32), "resnet18": (3, 32, 32),
              "transformer": (TRANSFORMER["length"], TRANSFORMER["units"])}
    return (batch,) + shapes[model]


def data(model: str, batch: int, seed: int = 1) -> Tuple[np.ndarray, np.ndarray]:
    """A fixed synthetic batch: float32 inputs (standard normal) and int32 labels in ``[0, CLASSES)``."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(input_shape(model, batch)).astype(np.float32)
    return x, rng.integers(0, CLASSES, batch).astype(np.int32)


def channels_last(model: str, name: str, value: np.ndarray) -> np.ndarray:
    """A canonical array for a channels-last (NHWC) implementation: convolution kernels as HWIO, and the
    CNN's classifier weight permuted to read the NHWC flattening. Other arrays are returned unchanged."""
    if value.ndim == 4:
        return np.ascontiguousarray(value.transpose(2, 3, 1, 0))
    if model == "cnn" and name == "fc.weight":
        c = CNN_CHANNELS[-1]
        return np.ascontiguousarray(value.reshape(-1, c, 4, 4).transpose(0, 2, 3, 1).reshape(value.shape))
    return value


def to_float(value: Any) -> float:
    """Mean of a loss returned by any framework (JAX, NumPy, PyTorch tensor, MXNet NDArray) as a float."""
    if hasattr(value, "asnumpy"):
        value = value.asnumpy()
    elif hasattr(value, "detach"):
        value = value.detach().cpu().numpy()
    return float(np.mean(np.asarray(value)))


def check_loaded(framework: str, model: str, shapes: Dict[str, Tuple[int, ...]]) -> None:
    """Raise ValueError unless ``shapes`` (a framework's own parameter shapes by structural name) match the
    canonical specification exactly."""
    expected = {n: s for n, s, _ in param_spec(model)}
    got = {n: tuple(s) for n, s in shapes.items()}
    if got != expected:
        diff = sorted(set(expected.items()) ^ set(got.items()))[:6]
        raise ValueError("%s %s: parameters differ from the canonical model, e.g. %s" % (framework, model, diff))
