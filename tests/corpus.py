"""Models used by the differential tests and the pass benchmark."""
import jax
import jax.numpy as jnp
import numpy as np

import hybrid
from hybrid import loss, nn


def mlp():
    net = nn.HybridSequential()
    net.add(nn.Dense(32, activation="relu"), nn.BatchNorm(), nn.Dropout(0.3), nn.Dense(16, activation="tanh"),
            nn.Dense(10))
    return net, (np.random.default_rng(0).standard_normal((8, 20)).astype(np.float32),)


def cnn():
    net = nn.HybridSequential()
    for channels in (8, 16):
        net.add(nn.Conv2D(channels, 3, padding=1), nn.BatchNorm(), nn.Activation("relu"), nn.MaxPool2D(2))
    net.add(nn.Dense(10))
    return net, (np.random.default_rng(1).standard_normal((4, 3, 12, 12)).astype(np.float32),)


class Residual(hybrid.HybridBlock):
    """Conv-BN with the conv output also read by the skip path (BN folding must not fire)."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2D(4, 3, padding=1)
        self.bn = nn.BatchNorm()

    def forward(self, x):
        h = self.conv(x)
        return jax.nn.relu(self.bn(h) + h)


def residual():
    return Residual(), (np.random.default_rng(2).standard_normal((2, 4, 6, 6)).astype(np.float32),)


class TransformerBlock(hybrid.HybridBlock):
    """Self-attention written by hand (Q/K/V projections, einsum attention) plus a feed-forward net."""

    def __init__(self, units=32, heads=4):
        super().__init__()
        self.heads = heads
        self.q = nn.Dense(units, flatten=False)
        self.k = nn.Dense(units, flatten=False)
        self.v = nn.Dense(units, flatten=False)
        self.proj = nn.Dense(units, flatten=False)
        self.norm1 = nn.LayerNorm()
        self.norm2 = nn.LayerNorm()
        self.ffn1 = nn.Dense(4 * units, flatten=False, activation="relu")
        self.ffn2 = nn.Dense(units, flatten=False)
        self.drop = nn.Dropout(0.1)

    def forward(self, x):
        b, t, c = x.shape
        split = lambda y: y.reshape(b, t, self.heads, c // self.heads)  # noqa: E731
        q, k, v = split(self.q(x)), split(self.k(x)), split(self.v(x))
        scores = jnp.einsum("btnh,bsnh->bnts", q, k) / np.float32(np.sqrt(c // self.heads))
        attended = jnp.einsum("bnts,bsnh->btnh", jax.nn.softmax(scores, axis=-1), v).reshape(b, t, c)
        x = self.norm1(x + self.drop(self.proj(attended)))
        return self.norm2(x + self.drop(self.ffn2(self.ffn1(x))))


def transformer():
    return TransformerBlock(), (np.random.default_rng(3).standard_normal((2, 6, 32)).astype(np.float32),)


class Classifier(hybrid.HybridBlock):
    """An MLP with its softmax cross-entropy loss, so the loss is part of the compiled graph."""

    def __init__(self, classes=50):
        super().__init__()
        self.body = nn.HybridSequential()
        self.body.add(nn.Dense(64, activation="relu"), nn.Dense(classes))
        self.loss = loss.SoftmaxCrossEntropyLoss()

    def forward(self, x, label):
        return self.loss(self.body(x), label)


def classifier():
    rng = np.random.default_rng(4)
    return Classifier(), (rng.standard_normal((16, 24)).astype(np.float32), rng.integers(0, 50, 16).astype(np.int32))


CORPUS = {"mlp": mlp, "cnn": cnn, "residual": residual, "transformer": transformer, "classifier": classifier}
