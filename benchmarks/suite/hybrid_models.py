"""The five models in hybrid, run five ways.

``build(model, batch, variant)`` with ``variant`` in:

* ``'eager'``: nothing hybridized;
* ``'hybridized'``: the net AND the loss block hybridized;
* ``'gluon_loop'``: the loop as users usually write it: the net hybridized, the loss block not;
* ``'mean_head'``: as ``'gluon_loop'``, but the recorded loss is ``loss_fn(net(x), y).mean()``, backward
  on that scalar and ``trainer.step(1)`` (the same update as backward on the per-sample losses with
  ``trainer.step(batch)``);
* ``'compiled'``: the ``'hybridized'`` step function passed to ``hybrid.compile``; raises
  :class:`spec.Unavailable` where that does not exist.

The training step is Gluon's loop (record, backward, ``trainer.step``) in every variant.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

import hybrid
from hybrid import Trainer, autograd, loss, nn

from . import spec


def _dense(units: int, in_units: int, activation: str | None = None, flatten: bool = True) -> nn.Dense:
    return nn.Dense(units, activation=activation, in_units=in_units, flatten=flatten)


def _conv(c_in: int, c_out: int, kernel: int, stride: int = 1) -> nn.Conv2D:
    return nn.Conv2D(c_out, kernel, strides=stride, padding=kernel // 2, use_bias=False, in_channels=c_in)


def _bn(channels: int) -> nn.BatchNorm:
    return nn.BatchNorm(momentum=spec.BN_MOMENTUM, epsilon=spec.EPS, in_channels=channels)


class MLP(hybrid.HybridBlock):
    def __init__(self, sizes):
        super().__init__()
        self.layers = nn.HybridSequential()
        for i in range(len(sizes) - 1):
            last = i == len(sizes) - 2
            self.layers.add(_dense(sizes[i + 1], sizes[i], None if last else "relu"))

    def forward(self, x):
        return self.layers(x)


class CNN(hybrid.HybridBlock):
    def __init__(self):
        super().__init__()
        c_in = 3
        for i, c_out in enumerate(spec.CNN_CHANNELS):
            setattr(self, f"conv{i}", _conv(c_in, c_out, 3))
            setattr(self, f"bn{i}", _bn(c_out))
            c_in = c_out
        self.pool = nn.MaxPool2D(2)
        self.fc = _dense(spec.CLASSES, c_in * 16)

    def forward(self, x):
        for i in range(len(spec.CNN_CHANNELS)):
            x = self.pool(jax.nn.relu(getattr(self, f"bn{i}")(getattr(self, f"conv{i}")(x))))
        return self.fc(x)


class BasicBlock(hybrid.HybridBlock):
    def __init__(self, c_in: int, c_out: int, stride: int):
        super().__init__()
        self.conv1, self.bn1 = _conv(c_in, c_out, 3, stride), _bn(c_out)
        self.conv2, self.bn2 = _conv(c_out, c_out, 3), _bn(c_out)
        self.down = self.down_bn = None
        if spec.has_downsample(c_in, c_out, stride):
            self.down, self.down_bn = _conv(c_in, c_out, 1, stride), _bn(c_out)

    def forward(self, x):
        out = self.bn2(self.conv2(jax.nn.relu(self.bn1(self.conv1(x)))))
        return jax.nn.relu(out + (self.down_bn(self.down(x)) if self.down is not None else x))


class ResNet18(hybrid.HybridBlock):
    def __init__(self):
        super().__init__()
        self.conv, self.bn = _conv(3, 64, 3), _bn(64)
        self.blocks = nn.HybridSequential()
        for _, c_in, c_out, stride in spec.resnet_blocks():
            self.blocks.add(BasicBlock(c_in, c_out, stride))
        self.fc = _dense(spec.CLASSES, 512)

    def forward(self, x):
        x = self.blocks(jax.nn.relu(self.bn(self.conv(x))))
        return self.fc(jnp.mean(x, axis=(2, 3)))


class EncoderLayer(hybrid.HybridBlock):
    """Post-LN encoder layer: x = LN(x + proj(attention(qkv(x)))); x = LN(x + ffn2(relu(ffn1(x))))."""

    def __init__(self, units: int, heads: int, ffn: int):
        super().__init__()
        self.heads = heads
        self.qkv, self.proj = _dense(3 * units, units, flatten=False), _dense(units, units, flatten=False)
        self.norm1 = nn.LayerNorm(epsilon=spec.EPS, in_channels=units)
        self.ffn1 = _dense(ffn, units, "relu", flatten=False)
        self.ffn2 = _dense(units, ffn, flatten=False)
        self.norm2 = nn.LayerNorm(epsilon=spec.EPS, in_channels=units)

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = (z.reshape(b, t, self.heads, c // self.heads) for z in jnp.split(self.qkv(x), 3, axis=-1))
        attended = jax.nn.dot_product_attention(q, k, v).reshape(b, t, c)
        x = self.norm1(x + self.proj(attended))
        return self.norm2(x + self.ffn2(self.ffn1(x)))


class Transformer(hybrid.HybridBlock):
    def __init__(self):
        super().__init__()
        cfg = spec.TRANSFORMER
        self.layers = nn.HybridSequential()
        for _ in range(cfg["layers"]):
            self.layers.add(EncoderLayer(cfg["units"], cfg["heads"], cfg["ffn"]))
        self.fc = _dense(spec.CLASSES, cfg["units"])

    def forward(self, x):
        return self.fc(jnp.mean(self.layers(x), axis=1))


def make_net(model: str) -> hybrid.HybridBlock:
    """The hybrid network of ``model``, its parameters set to the canonical initial values."""
    if model in ("mlp33", "mlp784"):
        net = MLP(spec.mlp_sizes(model))
    else:
        net = {"cnn": CNN, "resnet18": ResNet18, "transformer": Transformer}[model]()
    net.initialize()
    params = net.collect_params()
    spec.check_loaded("hybrid", model, {name: p.shape for name, p in params.items()})
    for name, value in spec.init_params(model).items():
        params[name].set_data(value)
    return net


VARIANTS = ("eager", "hybridized", "gluon_loop", "mean_head", "compiled")


def build(model: str, batch: int, variant: str = "eager", keep_grads: bool = True) -> spec.Case:
    """The train step and inference of ``model`` in ``variant``; ``keep_grads`` is the Trainer's."""
    if variant not in VARIANTS:
        raise ValueError(f"unknown hybrid variant {variant!r}")
    compile_step = getattr(hybrid, "compile", None)
    if variant == "compiled" and compile_step is None:
        raise spec.Unavailable("hybrid.compile (the whole-step compiler) is not in this checkout")
    net = make_net(model)
    loss_fn = loss.SoftmaxCELoss()
    trainer = Trainer(net.collect_params(), "sgd", {"learning_rate": spec.LEARNING_RATE,
                                                    "momentum": spec.MOMENTUM}, keep_grads=keep_grads)
    if variant != "eager":  # hybrid.compile takes the optimised graphs of hybridized blocks
        net.hybridize(static_alloc=True, static_shape=True)
    if variant in ("hybridized", "compiled"):
        loss_fn.hybridize(static_alloc=True, static_shape=True)
    x, y = (jnp.asarray(a) for a in spec.data(model, batch))

    def step(x, y):
        with autograd.record():
            batch_loss = loss_fn(net(x), y)
        autograd.backward(batch_loss)
        trainer.step(batch)
        return batch_loss

    if variant == "mean_head":
        def step(x, y):  # noqa: F811 - the mean-head loop replaces the per-sample one
            with autograd.record():
                batch_loss = loss_fn(net(x), y).mean()
            autograd.backward(batch_loss)
            trainer.step(1)
            return batch_loss

    def predict(x):
        return net(x)

    if variant == "compiled":
        step, predict = compile_step(step), compile_step(predict)
    params = list(net.collect_params().values())
    first = params[0]

    def train_step():
        batch_loss = step(x, y)
        jax.block_until_ready((batch_loss, first.data()))  # the loss and the (separately compiled) update
        return batch_loss

    def infer():
        return jax.block_until_ready(predict(x))

    sizes = [(int(np.prod(p.shape)), p.grad_req != "null") for p in params]
    return spec.Case(train_step, infer, n_params=sum(n for n, t in sizes if t),
                     n_state=sum(n for n, t in sizes if not t))
