"""Hand-written JAX: the limit the other frameworks are measured against.

Each model is a pure function of flat tuples of arrays; the whole train step (forward, backward, SGD with
momentum, BatchNorm running statistics) is ONE ``jax.jit`` program that donates the parameter, momentum and
state buffers, so a step allocates nothing new and costs one dispatch. Images run channels-last (NHWC, HWIO
kernels), the layout XLA:CPU's convolutions use natively; the CNN's classifier weight is permuted once at
build time so that it reads the NHWC flattening and the model stays the canonical one.

The ``oihw`` variant (framework ``jax_handwritten_oihw``) keeps convolution kernels as Gluon, PyTorch and
hybrid store them (OIHW) and moves them to HWIO inside the step, as a framework with that storage must:
the difference between the two is the price of the storage layout alone.
"""
from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from . import spec


def _dense(p, name, h):
    return lax.dot_general(h, p[name + ".weight"], (((h.ndim - 1,), (1,)), ((), ()))) + p[name + ".bias"]


def _conv(p, name, h, stride=1):
    w = p[name + ".weight"]
    pad = w.shape[0] // 2
    return lax.conv_general_dilated(h, w, (stride, stride), [(pad, pad), (pad, pad)],
                                    dimension_numbers=("NHWC", "HWIO", "NHWC"))


def _batch_norm(p, name, h, train, new_state):
    gamma, beta = p[name + ".gamma"], p[name + ".beta"]
    if train:
        mean = jnp.mean(h, axis=(0, 1, 2))
        var = jnp.mean(jnp.square(h - mean), axis=(0, 1, 2))
        m = spec.BN_MOMENTUM
        new_state[name + ".running_mean"] = m * p[name + ".running_mean"] + (1 - m) * lax.stop_gradient(mean)
        new_state[name + ".running_var"] = m * p[name + ".running_var"] + (1 - m) * lax.stop_gradient(var)
    else:
        mean, var = p[name + ".running_mean"], p[name + ".running_var"]
    scale = gamma * lax.rsqrt(var + spec.EPS)
    return h * scale + (beta - mean * scale)


def _layer_norm(p, name, h):
    mean = jnp.mean(h, axis=-1, keepdims=True)
    var = jnp.mean(jnp.square(h - mean), axis=-1, keepdims=True)
    return (h - mean) * lax.rsqrt(var + spec.EPS) * p[name + ".gamma"] + p[name + ".beta"]


def _max_pool2(h):
    b, height, width, c = h.shape
    return jnp.max(h.reshape(b, height // 2, 2, width // 2, 2, c), axis=(2, 4))


def _mlp(p, x, n_layers):
    for i in range(n_layers):
        x = _dense(p, "layers.%d" % i, x)
        x = jax.nn.relu(x) if i < n_layers - 1 else x
    return x


def _cnn(p, x, train, new_state):
    for i in range(len(spec.CNN_CHANNELS)):
        x = _max_pool2(jax.nn.relu(_batch_norm(p, "bn%d" % i, _conv(p, "conv%d" % i, x), train, new_state)))
    return _dense(p, "fc", x.reshape(x.shape[0], -1))


def _resnet18(p, x, train, new_state):
    bn = partial(_batch_norm, p, train=train, new_state=new_state)
    x = jax.nn.relu(bn("bn", _conv(p, "conv", x)))
    for name, c_in, c_out, stride in spec.resnet_blocks():
        out = jax.nn.relu(bn(name + ".bn1", _conv(p, name + ".conv1", x, stride)))
        out = bn(name + ".bn2", _conv(p, name + ".conv2", out))
        if spec.has_downsample(c_in, c_out, stride):
            x = bn(name + ".down_bn", _conv(p, name + ".down", x, stride))
        x = jax.nn.relu(out + x)
    return _dense(p, "fc", jnp.mean(x, axis=(1, 2)))


def _transformer(p, x):
    heads = spec.TRANSFORMER["heads"]
    b, t, c = x.shape
    for i in range(spec.TRANSFORMER["layers"]):
        name = "layers.%d" % i
        q, k, v = (z.reshape(b, t, heads, c // heads) for z in jnp.split(_dense(p, name + ".qkv", x), 3, axis=-1))
        attended = jax.nn.dot_product_attention(q, k, v).reshape(b, t, c)
        x = _layer_norm(p, name + ".norm1", x + _dense(p, name + ".proj", attended))
        hidden = jax.nn.relu(_dense(p, name + ".ffn1", x))
        x = _layer_norm(p, name + ".norm2", x + _dense(p, name + ".ffn2", hidden))
    return _dense(p, "fc", jnp.mean(x, axis=1))


def forward(model, p, x, train):
    """Logits of ``model`` for parameters/states ``p`` (a dict by canonical name, in this module's layout)
    and the new running statistics (empty unless ``train`` and the model has BatchNorm)."""
    new_state = {}
    if model in ("mlp33", "mlp784"):
        logits = _mlp(p, x, len(spec.mlp_sizes(model)) - 1)
    elif model == "cnn":
        logits = _cnn(p, x, train, new_state)
    elif model == "resnet18":
        logits = _resnet18(p, x, train, new_state)
    else:
        logits = _transformer(p, x)
    return logits, new_state


def cross_entropy(logits, labels):
    """Mean softmax cross-entropy of integer ``labels``."""
    picked = jnp.take_along_axis(logits, labels[:, None], axis=-1)[:, 0]
    return jnp.mean(jax.nn.logsumexp(logits, axis=-1) - picked)


def build(model, batch, variant=None):
    spec_ = spec.param_spec(model)
    init = spec.init_params(model)
    train_names = tuple(n for n, _, kind in spec_ if not kind.startswith("state"))
    state_names = tuple(n for n, _, kind in spec_ if kind.startswith("state"))
    if variant not in (None, "oihw"):
        raise ValueError(f"unknown jax_handwritten variant {variant!r}")
    oihw = variant == "oihw"
    params = [jnp.asarray(init[n] if oihw and init[n].ndim == 4 else spec.channels_last(model, n, init[n]))
              for n in train_names]
    names = train_names + state_names

    def by_name(params, state):
        values = tuple(params) + tuple(state)
        if oihw:
            values = tuple(v.transpose(2, 3, 1, 0) if v.ndim == 4 else v for v in values)
        return dict(zip(names, values))
    state = [jnp.asarray(init[n]) for n in state_names]
    momentum = [jnp.zeros_like(w) for w in params]
    x, y = spec.data(model, batch)
    x = jnp.asarray(x.transpose(0, 2, 3, 1) if x.ndim == 4 else x)
    y = jnp.asarray(y)

    def loss_fn(params, state, x, y):
        p = by_name(params, state)
        logits, new_state = forward(model, p, x, True)
        return cross_entropy(logits, y), [new_state[n] for n in state_names]

    @partial(jax.jit, donate_argnums=(0, 1, 2))
    def step(params, momentum, state, x, y):
        (loss, new_state), grads = jax.value_and_grad(loss_fn, has_aux=True)(params, state, x, y)
        momentum = [spec.MOMENTUM * m - spec.LEARNING_RATE * g for m, g in zip(momentum, grads)]
        return [w + m for w, m in zip(params, momentum)], momentum, new_state, loss

    @jax.jit
    def predict(params, state, x):
        return forward(model, by_name(params, state), x, False)[0]

    live = [params, momentum, state]

    def train_step():
        live[0], live[1], live[2], loss = step(live[0], live[1], live[2], x, y)
        return loss.block_until_ready()

    def infer():
        return predict(live[0], live[2], x).block_until_ready()

    def step_bytes():
        from benchmarks.common import program_bytes
        return program_bytes(step, live[0], live[1], live[2], x, y)

    return spec.Case(train_step, infer, n_params=sum(int(w.size) for w in params),
                     n_state=sum(int(s.size) for s in state), step_bytes=step_bytes)
