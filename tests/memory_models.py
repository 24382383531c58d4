"""Training graphs of small MLP, CNN and transformer classifiers, for the memory planner's tests and
benchmark (``benchmarks/bench_memory_plan.py`` builds the same models at larger sizes)."""
import jax
import jax.numpy as jnp
import numpy as np

import hybrid
from hybrid import graph, loss, nn
from hybrid.graph import layer_ops
from hybrid.graph.memory import training_graph


class WithLoss(hybrid.HybridBlock):
    """``body`` followed by softmax cross-entropy against integer labels."""

    def __init__(self, body):
        super().__init__()
        self.body = body
        self.loss = loss.SoftmaxCrossEntropyLoss()

    def forward(self, x, label):
        return self.loss(self.body(x), label)


class EncoderLayer(hybrid.HybridBlock):
    """Pre-norm transformer encoder layer: attention (the ``attention`` big op) and a feed-forward net."""

    def __init__(self, units, heads):
        super().__init__()
        self.heads = heads
        self.norm1, self.norm2 = nn.LayerNorm(), nn.LayerNorm()
        self.qkv = nn.Dense(3 * units, flatten=False)
        self.proj = nn.Dense(units, flatten=False)
        self.ffn1 = nn.Dense(4 * units, flatten=False, activation="gelu")
        self.ffn2 = nn.Dense(units, flatten=False)

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = jnp.split(self.qkv(self.norm1(x)).reshape(b, t, 3 * self.heads, c // self.heads), 3, axis=2)
        x = x + self.proj(layer_ops.attention(q, k, v, causal=True).reshape(b, t, c))
        return x + self.ffn2(self.ffn1(self.norm2(x)))


class MeanPool(hybrid.HybridBlock):
    def forward(self, x):
        return jnp.mean(x, axis=1)


def mlp(batch=32, width=64, depth=3, features=32):
    body = nn.HybridSequential()
    for _ in range(depth):
        body.add(nn.Dense(width), nn.BatchNorm(), nn.Activation("relu"))
    body.add(nn.Dense(10))
    return WithLoss(body), (np.zeros((batch, features), np.float32), np.zeros(batch, np.int32))


def cnn(batch=8, channels=(8, 16), size=16):
    body = nn.HybridSequential()
    for c in channels:
        body.add(nn.Conv2D(c, 3, padding=1), nn.BatchNorm(), nn.Activation("relu"), nn.MaxPool2D(2))
    body.add(nn.Dense(10))
    return WithLoss(body), (np.zeros((batch, 3, size, size), np.float32), np.zeros(batch, np.int32))


def transformer(batch=4, length=16, units=32, heads=4, layers=2):
    body = nn.HybridSequential()
    body.add(nn.Dense(units, flatten=False))
    for _ in range(layers):
        body.add(EncoderLayer(units, heads))
    body.add(nn.LayerNorm(), MeanPool(), nn.Dense(10))
    return WithLoss(body), (np.zeros((batch, length, units), np.float32), np.zeros(batch, np.int32))


MODELS = {"mlp": mlp, "cnn": cnn, "transformer": transformer}


def block_objective(block, *inputs):
    """``sum(block(*inputs))`` in training mode as a pure function of the block's flat graph inputs, with
    the input specs, their names and the positions of the trainable parameters among them."""
    block.initialize(hybrid.init.Xavier())
    forward = hybrid.inspect(block, *inputs, passes=[], training=True).before
    params = block.collect_params()
    wrt = [i for i, v in enumerate(forward.inputs) if v.name in params and params[v.name].grad_req != "null"]
    run = graph.lower(forward)

    def objective(*flat):
        return jnp.sum(run(*flat)[0])

    specs = [jax.ShapeDtypeStruct(v.shape, v.dtype) for v in forward.inputs]
    return objective, specs, [v.name for v in forward.inputs], wrt


def block_training_graph(block, *inputs):
    """The forward-plus-backward graph of ``sum(block(*inputs))``, differentiated with respect to the
    block's trainable parameters (graph inputs keep the parameters' structural names)."""
    objective, specs, names, wrt = block_objective(block, *inputs)
    return training_graph(objective, *specs, wrt=wrt, input_names=names)
