"""The five models in MXNet 1.9.1 Gluon (legacy ``hybrid_forward(F, ...)`` API), eager or hybridized with
``static_alloc=True, static_shape=True``. The step is Gluon's loop (record, ``loss.backward()``,
``trainer.step``) followed by ``mx.nd.waitall()``, since MXNet's engine runs asynchronously.
Runs on Python 3.8 in the MXNet virtual environment."""
from __future__ import annotations

import mxnet as mx
from mxnet import autograd, gluon
from mxnet.gluon import nn

from . import spec


def _conv(c_in, c_out, kernel, stride=1):
    return nn.Conv2D(c_out, kernel, strides=stride, padding=kernel // 2, use_bias=False, in_channels=c_in)


def _bn(channels):
    return nn.BatchNorm(momentum=spec.BN_MOMENTUM, epsilon=spec.EPS, in_channels=channels)


class MLP(nn.HybridBlock):
    def __init__(self, sizes):
        super().__init__()
        self.layers = nn.HybridSequential()
        for i in range(len(sizes) - 1):
            last = i == len(sizes) - 2
            self.layers.add(nn.Dense(sizes[i + 1], activation=None if last else "relu", in_units=sizes[i]))

    def hybrid_forward(self, F, x):
        return self.layers(x)


class CNN(nn.HybridBlock):
    def __init__(self):
        super().__init__()
        c_in = 3
        for i, c_out in enumerate(spec.CNN_CHANNELS):
            setattr(self, "conv%d" % i, _conv(c_in, c_out, 3))
            setattr(self, "bn%d" % i, _bn(c_out))
            c_in = c_out
        self.pool = nn.MaxPool2D(2, 2)
        self.fc = nn.Dense(spec.CLASSES, in_units=c_in * 16)

    def hybrid_forward(self, F, x):
        for i in range(len(spec.CNN_CHANNELS)):
            x = self.pool(F.relu(getattr(self, "bn%d" % i)(getattr(self, "conv%d" % i)(x))))
        return self.fc(x)


class BasicBlock(nn.HybridBlock):
    def __init__(self, c_in, c_out, stride):
        super().__init__()
        self.conv1, self.bn1 = _conv(c_in, c_out, 3, stride), _bn(c_out)
        self.conv2, self.bn2 = _conv(c_out, c_out, 3), _bn(c_out)
        self.down = self.down_bn = None
        if spec.has_downsample(c_in, c_out, stride):
            self.down, self.down_bn = _conv(c_in, c_out, 1, stride), _bn(c_out)

    def hybrid_forward(self, F, x):
        out = self.bn2(self.conv2(F.relu(self.bn1(self.conv1(x)))))
        return F.relu(out + (self.down_bn(self.down(x)) if self.down is not None else x))


class ResNet18(nn.HybridBlock):
    def __init__(self):
        super().__init__()
        self.conv, self.bn = _conv(3, 64, 3), _bn(64)
        self.blocks = nn.HybridSequential()
        for _, c_in, c_out, stride in spec.resnet_blocks():
            self.blocks.add(BasicBlock(c_in, c_out, stride))
        self.fc = nn.Dense(spec.CLASSES, in_units=512)

    def hybrid_forward(self, F, x):
        return self.fc(F.mean(self.blocks(F.relu(self.bn(self.conv(x)))), axis=(2, 3)))


class EncoderLayer(nn.HybridBlock):
    def __init__(self, units, heads, ffn):
        super().__init__()
        self.heads, self.scale = heads, (units // heads) ** -0.5
        self.qkv = nn.Dense(3 * units, flatten=False, in_units=units)
        self.proj = nn.Dense(units, flatten=False, in_units=units)
        self.norm1 = nn.LayerNorm(epsilon=spec.EPS, in_channels=units)
        self.ffn1 = nn.Dense(ffn, activation="relu", flatten=False, in_units=units)
        self.ffn2 = nn.Dense(units, flatten=False, in_units=ffn)
        self.norm2 = nn.LayerNorm(epsilon=spec.EPS, in_channels=units)

    def hybrid_forward(self, F, x):
        qkv = F.reshape(self.qkv(x), shape=(0, 0, 3, self.heads, -1))         # (B, T, 3, H, D)
        qkv = F.reshape(F.transpose(qkv, axes=(2, 0, 3, 1, 4)), shape=(0, -3, 0, 0))  # (3, B*H, T, D)
        q, k, v = F.split(qkv, num_outputs=3, axis=0, squeeze_axis=True)
        weights = F.softmax(F.batch_dot(q, k, transpose_b=True) * self.scale, axis=-1)
        attended = F.reshape(F.batch_dot(weights, v), shape=(-4, -1, self.heads, 0, 0))  # (B, H, T, D)
        attended = F.reshape(F.transpose(attended, axes=(0, 2, 1, 3)), shape=(0, 0, -3))
        x = self.norm1(x + self.proj(attended))
        return self.norm2(x + self.ffn2(self.ffn1(x)))


class Transformer(nn.HybridBlock):
    def __init__(self):
        super().__init__()
        cfg = spec.TRANSFORMER
        self.layers = nn.HybridSequential()
        for _ in range(cfg["layers"]):
            self.layers.add(EncoderLayer(cfg["units"], cfg["heads"], cfg["ffn"]))
        self.fc = nn.Dense(spec.CLASSES, in_units=cfg["units"])

    def hybrid_forward(self, F, x):
        return self.fc(F.mean(self.layers(x), axis=1))


def make_net(model):
    if model in ("mlp33", "mlp784"):
        net = MLP(spec.mlp_sizes(model))
    else:
        net = {"cnn": CNN, "resnet18": ResNet18, "transformer": Transformer}[model]()
    net.initialize()
    params = net._collect_params_with_prefix()  # structural names, as save_parameters writes them
    spec.check_loaded("mxnet", model, {name: p.shape for name, p in params.items()})
    for name, value in spec.init_params(model).items():
        params[name].set_data(mx.nd.array(value))
    return net


def build(model, batch, variant="eager"):
    net = make_net(model)
    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
    trainer = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": spec.LEARNING_RATE,
                                                          "momentum": spec.MOMENTUM})
    if variant == "hybridized":
        net.hybridize(static_alloc=True, static_shape=True)
        loss_fn.hybridize(static_alloc=True, static_shape=True)
    x, y = (mx.nd.array(a) for a in spec.data(model, batch))

    def train_step():
        with autograd.record():
            loss = loss_fn(net(x), y)
        loss.backward()
        trainer.step(batch)
        mx.nd.waitall()
        return loss

    def infer():
        out = net(x)
        mx.nd.waitall()
        return out

    params = list(net.collect_params().values())
    sizes = [(int(p.data().size), p.grad_req != "null") for p in params]
    return spec.Case(train_step, infer, n_params=sum(n for n, t in sizes if t),
                     n_state=sum(n for n, t in sizes if not t))
