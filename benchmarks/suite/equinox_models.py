"""The five models in Equinox, written as its documentation shows: per-example modules, ``jax.vmap`` over
the batch (``axis_name='batch'`` for BatchNorm, whose running statistics live in an ``eqx.nn.State``),
``eqx.filter_jit``/``eqx.filter_value_and_grad`` and optax SGD with momentum. The step donates the model,
state and optimizer state. BatchNorm runs in ``mode='batch'`` (batch statistics while training); its running
statistics start from Equinox's own initial values, so inference outputs differ from the other frameworks'
(the time does not)."""
from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import optax

from . import spec

KEY = jax.random.PRNGKey(0)


def linear(p, name):
    w = p[name + ".weight"]
    layer = eqx.nn.Linear(w.shape[1], w.shape[0], key=KEY)
    return eqx.tree_at(lambda m: (m.weight, m.bias), layer, (jnp.asarray(w), jnp.asarray(p[name + ".bias"])))


def conv(p, name, stride=1):
    w = p[name + ".weight"]  # OIHW, as Equinox stores it
    layer = eqx.nn.Conv2d(w.shape[1], w.shape[0], w.shape[2], stride=stride, padding=w.shape[2] // 2,
                          use_bias=False, key=KEY)
    return eqx.tree_at(lambda m: m.weight, layer, jnp.asarray(w))


def batch_norm(p, name):
    layer = eqx.nn.BatchNorm(p[name + ".gamma"].shape[0], axis_name="batch", eps=spec.EPS,
                             momentum=spec.BN_MOMENTUM, mode="batch")
    return eqx.tree_at(lambda m: (m.weight, m.bias), layer,
                       (jnp.asarray(p[name + ".gamma"]), jnp.asarray(p[name + ".beta"])))


def layer_norm(p, name):
    layer = eqx.nn.LayerNorm(p[name + ".gamma"].shape[0], eps=spec.EPS)
    return eqx.tree_at(lambda m: (m.weight, m.bias), layer,
                       (jnp.asarray(p[name + ".gamma"]), jnp.asarray(p[name + ".beta"])))


class MLP(eqx.Module):
    layers: list

    def __init__(self, p, n_layers):
        self.layers = [linear(p, "layers.%d" % i) for i in range(n_layers)]

    def __call__(self, x, state):
        for layer in self.layers[:-1]:
            x = jax.nn.relu(layer(x))
        return self.layers[-1](x), state


class CNN(eqx.Module):
    convs: list
    bns: list
    pool: eqx.nn.MaxPool2d
    fc: eqx.nn.Linear

    def __init__(self, p):
        n = len(spec.CNN_CHANNELS)
        self.convs = [conv(p, "conv%d" % i) for i in range(n)]
        self.bns = [batch_norm(p, "bn%d" % i) for i in range(n)]
        self.pool = eqx.nn.MaxPool2d(2, stride=2)
        self.fc = linear(p, "fc")

    def __call__(self, x, state):
        for conv_, bn in zip(self.convs, self.bns):
            x, state = bn(conv_(x), state)
            x = self.pool(jax.nn.relu(x))
        return self.fc(x.reshape(-1)), state


class BasicBlock(eqx.Module):
    conv1: eqx.nn.Conv2d
    bn1: eqx.nn.BatchNorm
    conv2: eqx.nn.Conv2d
    bn2: eqx.nn.BatchNorm
    down: eqx.nn.Conv2d | None
    down_bn: eqx.nn.BatchNorm | None

    def __init__(self, p, name, c_in, c_out, stride):
        self.conv1, self.bn1 = conv(p, name + ".conv1", stride), batch_norm(p, name + ".bn1")
        self.conv2, self.bn2 = conv(p, name + ".conv2"), batch_norm(p, name + ".bn2")
        has_down = spec.has_downsample(c_in, c_out, stride)
        self.down = conv(p, name + ".down", stride) if has_down else None
        self.down_bn = batch_norm(p, name + ".down_bn") if has_down else None

    def __call__(self, x, state):
        out, state = self.bn1(self.conv1(x), state)
        out, state = self.bn2(self.conv2(jax.nn.relu(out)), state)
        if self.down is not None:
            x, state = self.down_bn(self.down(x), state)
        return jax.nn.relu(out + x), state


class ResNet18(eqx.Module):
    conv: eqx.nn.Conv2d
    bn: eqx.nn.BatchNorm
    blocks: list
    fc: eqx.nn.Linear

    def __init__(self, p):
        self.conv, self.bn = conv(p, "conv"), batch_norm(p, "bn")
        self.blocks = [BasicBlock(p, *b) for b in spec.resnet_blocks()]
        self.fc = linear(p, "fc")

    def __call__(self, x, state):
        x, state = self.bn(self.conv(x), state)
        x = jax.nn.relu(x)
        for block in self.blocks:
            x, state = block(x, state)
        return self.fc(jnp.mean(x, axis=(1, 2))), state


class EncoderLayer(eqx.Module):
    qkv: eqx.nn.Linear
    proj: eqx.nn.Linear
    norm1: eqx.nn.LayerNorm
    ffn1: eqx.nn.Linear
    ffn2: eqx.nn.Linear
    norm2: eqx.nn.LayerNorm

    def __init__(self, p, name):
        self.qkv, self.proj, self.norm1 = linear(p, name + ".qkv"), linear(p, name + ".proj"), \
            layer_norm(p, name + ".norm1")
        self.ffn1, self.ffn2, self.norm2 = linear(p, name + ".ffn1"), linear(p, name + ".ffn2"), \
            layer_norm(p, name + ".norm2")

    def __call__(self, x):  # x: (length, units)
        t, c = x.shape
        heads = spec.TRANSFORMER["heads"]
        q, k, v = (z.reshape(t, heads, c // heads) for z in jnp.split(jax.vmap(self.qkv)(x), 3, axis=-1))
        attended = jax.nn.dot_product_attention(q, k, v).reshape(t, c)
        x = jax.vmap(self.norm1)(x + jax.vmap(self.proj)(attended))
        hidden = jax.vmap(lambda h: self.ffn2(jax.nn.relu(self.ffn1(h))))(x)
        return jax.vmap(self.norm2)(x + hidden)


class Transformer(eqx.Module):
    layers: list
    fc: eqx.nn.Linear

    def __init__(self, p):
        self.layers = [EncoderLayer(p, "layers.%d" % i) for i in range(spec.TRANSFORMER["layers"])]
        self.fc = linear(p, "fc")

    def __call__(self, x, state):
        for layer in self.layers:
            x = layer(x)
        return self.fc(jnp.mean(x, axis=0)), state


def make_model(model):
    p = spec.init_params(model)
    if model in ("mlp33", "mlp784"):
        return MLP(p, len(spec.mlp_sizes(model)) - 1)
    return {"cnn": CNN, "resnet18": ResNet18, "transformer": Transformer}[model](p)


def batched(model, x, state):
    return jax.vmap(model, axis_name="batch", in_axes=(0, None), out_axes=(0, None))(x, state)


def build(model, batch, variant=None):
    net, state = eqx.nn.make_with_state(make_model)(model)
    optimizer = optax.sgd(spec.LEARNING_RATE, momentum=spec.MOMENTUM)
    opt_state = optimizer.init(eqx.filter(net, eqx.is_array))
    data = tuple(jnp.asarray(a) for a in spec.data(model, batch))

    @eqx.filter_jit(donate="all-except-first")
    def train_step(data, net, state, opt_state):
        x, y = data

        def loss_fn(net, state):
            logits, state = batched(net, x, state)
            return optax.softmax_cross_entropy_with_integer_labels(logits, y).mean(), state

        (loss, state), grads = eqx.filter_value_and_grad(loss_fn, has_aux=True)(net, state)
        updates, opt_state = optimizer.update(grads, opt_state, eqx.filter(net, eqx.is_array))
        return loss, eqx.apply_updates(net, updates), state, opt_state

    @eqx.filter_jit
    def predict(net, state, x):
        return batched(net, x, state)[0]

    live = {"net": net, "state": state, "opt": opt_state, "inference": None}

    def step():
        loss, live["net"], live["state"], live["opt"] = train_step(data, live["net"], live["state"], live["opt"])
        live["inference"] = None
        return loss.block_until_ready()

    def infer():
        if live["inference"] is None:
            live["inference"] = eqx.nn.inference_mode(live["net"])
        return predict(live["inference"], live["state"], data[0]).block_until_ready()

    size = lambda tree: sum(int(a.size) for a in jax.tree_util.tree_leaves(tree)  # noqa: E731
                            if jnp.issubdtype(a.dtype, jnp.floating))
    return spec.Case(step, infer, n_params=size(eqx.filter(net, eqx.is_array)), n_state=size(state))
