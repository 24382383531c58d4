"""The five models in Flax NNX, trained as its documentation shows: ``nnx.jit`` over a step that takes the
model and an ``nnx.Optimizer`` (optax SGD with momentum), ``nnx.value_and_grad``, ``optimizer.update``.
Images are NHWC (Flax's convolution layout); weights come from the canonical parameters."""
from __future__ import annotations

import jax
import jax.numpy as jnp
import optax
from flax import nnx

from . import spec

RNGS = nnx.Rngs(0)


def linear(p, name):
    w = p[name + ".weight"]
    layer = nnx.Linear(w.shape[1], w.shape[0], rngs=RNGS)
    layer.kernel.value, layer.bias.value = jnp.asarray(w.T), jnp.asarray(p[name + ".bias"])
    return layer


def conv(p, name, stride=1):
    w = p[name + ".weight"]  # HWIO
    pad = w.shape[0] // 2
    layer = nnx.Conv(w.shape[2], w.shape[3], w.shape[:2], strides=stride, padding=((pad, pad), (pad, pad)),
                     use_bias=False, rngs=RNGS)
    layer.kernel.value = jnp.asarray(w)
    return layer


def batch_norm(p, name):
    layer = nnx.BatchNorm(p[name + ".gamma"].shape[0], momentum=spec.BN_MOMENTUM, epsilon=spec.EPS, rngs=RNGS)
    for attr, key in (("scale", "gamma"), ("bias", "beta"), ("mean", "running_mean"), ("var", "running_var")):
        getattr(layer, attr).value = jnp.asarray(p[name + "." + key])
    return layer


def layer_norm(p, name):
    layer = nnx.LayerNorm(p[name + ".gamma"].shape[0], epsilon=spec.EPS, rngs=RNGS)
    layer.scale.value, layer.bias.value = jnp.asarray(p[name + ".gamma"]), jnp.asarray(p[name + ".beta"])
    return layer


class MLP(nnx.Module):
    def __init__(self, p, n_layers):
        self.layers = nnx.List([linear(p, "layers.%d" % i) for i in range(n_layers)])

    def __call__(self, x):
        for i, layer in enumerate(self.layers):
            x = layer(x)
            x = nnx.relu(x) if i < len(self.layers) - 1 else x
        return x


class CNN(nnx.Module):
    def __init__(self, p):
        n = len(spec.CNN_CHANNELS)
        self.convs = nnx.List([conv(p, "conv%d" % i) for i in range(n)])
        self.bns = nnx.List([batch_norm(p, "bn%d" % i) for i in range(n)])
        self.fc = linear(p, "fc")

    def __call__(self, x):
        for conv_, bn in zip(self.convs, self.bns):
            x = nnx.max_pool(nnx.relu(bn(conv_(x))), (2, 2), strides=(2, 2))
        return self.fc(x.reshape(x.shape[0], -1))


class BasicBlock(nnx.Module):
    def __init__(self, p, name, c_in, c_out, stride):
        self.conv1, self.bn1 = conv(p, name + ".conv1", stride), batch_norm(p, name + ".bn1")
        self.conv2, self.bn2 = conv(p, name + ".conv2"), batch_norm(p, name + ".bn2")
        has_down = spec.has_downsample(c_in, c_out, stride)
        self.down = nnx.data(conv(p, name + ".down", stride) if has_down else None)
        self.down_bn = nnx.data(batch_norm(p, name + ".down_bn") if has_down else None)

    def __call__(self, x):
        out = self.bn2(self.conv2(nnx.relu(self.bn1(self.conv1(x)))))
        return nnx.relu(out + (self.down_bn(self.down(x)) if self.down is not None else x))


class ResNet18(nnx.Module):
    def __init__(self, p):
        self.conv, self.bn = conv(p, "conv"), batch_norm(p, "bn")
        self.blocks = nnx.List([BasicBlock(p, *b) for b in spec.resnet_blocks()])
        self.fc = linear(p, "fc")

    def __call__(self, x):
        x = nnx.relu(self.bn(self.conv(x)))
        for block in self.blocks:
            x = block(x)
        return self.fc(jnp.mean(x, axis=(1, 2)))


class EncoderLayer(nnx.Module):
    def __init__(self, p, name):
        self.qkv, self.proj, self.norm1 = linear(p, name + ".qkv"), linear(p, name + ".proj"), \
            layer_norm(p, name + ".norm1")
        self.ffn1, self.ffn2, self.norm2 = linear(p, name + ".ffn1"), linear(p, name + ".ffn2"), \
            layer_norm(p, name + ".norm2")

    def __call__(self, x):
        b, t, c = x.shape
        heads = spec.TRANSFORMER["heads"]
        q, k, v = (z.reshape(b, t, heads, c // heads) for z in jnp.split(self.qkv(x), 3, axis=-1))
        x = self.norm1(x + self.proj(jax.nn.dot_product_attention(q, k, v).reshape(b, t, c)))
        return self.norm2(x + self.ffn2(nnx.relu(self.ffn1(x))))


class Transformer(nnx.Module):
    def __init__(self, p):
        self.layers = nnx.List([EncoderLayer(p, "layers.%d" % i) for i in range(spec.TRANSFORMER["layers"])])
        self.fc = linear(p, "fc")

    def __call__(self, x):
        for layer in self.layers:
            x = layer(x)
        return self.fc(jnp.mean(x, axis=1))


def make_model(model):
    p = {n: spec.channels_last(model, n, v) for n, v in spec.init_params(model).items()}
    if model in ("mlp33", "mlp784"):
        return MLP(p, len(spec.mlp_sizes(model)) - 1)
    return {"cnn": CNN, "resnet18": ResNet18, "transformer": Transformer}[model](p)


@nnx.jit
def train_step(model, optimizer, x, y):
    def loss_fn(model):
        return optax.softmax_cross_entropy_with_integer_labels(model(x), y).mean()

    loss, grads = nnx.value_and_grad(loss_fn)(model)
    optimizer.update(model, grads)
    return loss


@nnx.jit
def predict(model, x):
    return model(x)


def build(model, batch, variant=None):
    net = make_model(model)
    optimizer = nnx.Optimizer(net, optax.sgd(spec.LEARNING_RATE, momentum=spec.MOMENTUM), wrt=nnx.Param)
    x, y = spec.data(model, batch)
    x, y = jnp.asarray(x.transpose(0, 2, 3, 1) if x.ndim == 4 else x), jnp.asarray(y)
    mode = ["train"]

    def switch(to):
        if mode[0] != to:
            net.train() if to == "train" else net.eval()
            mode[0] = to

    def step():
        switch("train")
        return train_step(net, optimizer, x, y).block_until_ready()

    def infer():
        switch("eval")
        return predict(net, x).block_until_ready()

    sizes = lambda kind: sum(int(a.size) for a in jax.tree_util.tree_leaves(nnx.state(net, kind)))  # noqa: E731
    return spec.Case(step, infer, n_params=sizes(nnx.Param), n_state=sizes(nnx.BatchStat))
