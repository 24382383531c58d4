"""The five models in PyTorch (CPU): eager, or with ``torch.compile`` (Inductor) applied to the model and to
the forward-plus-loss function; backward runs through the compiled graph (AOTAutograd) and
``torch.optim.SGD(momentum=0.9)`` stays eager, as in the usual ``torch.compile`` recipe."""
from __future__ import annotations

import torch
import torch._inductor.config
import torch.nn.functional as F
from torch import nn

from . import spec


def _load(module, p, name, **keys):
    """Copy canonical arrays into ``module``: ``keys`` maps attribute -> canonical suffix (default weight)."""
    with torch.no_grad():
        for attr, key in (keys or {"weight": "weight"}).items():
            getattr(module, attr).copy_(torch.from_numpy(p[name + "." + key]))
    return module


def linear(p, name):
    w = p[name + ".weight"]
    return _load(nn.Linear(w.shape[1], w.shape[0]), p, name, weight="weight", bias="bias")


def conv(p, name, stride=1):
    w = p[name + ".weight"]
    return _load(nn.Conv2d(w.shape[1], w.shape[0], w.shape[2], stride, w.shape[2] // 2, bias=False), p, name)


def batch_norm(p, name):
    layer = nn.BatchNorm2d(p[name + ".gamma"].shape[0], eps=spec.EPS, momentum=1 - spec.BN_MOMENTUM)
    return _load(layer, p, name, weight="gamma", bias="beta", running_mean="running_mean",
                 running_var="running_var")


def layer_norm(p, name):
    return _load(nn.LayerNorm(p[name + ".gamma"].shape[0], eps=spec.EPS), p, name, weight="gamma", bias="beta")


class MLP(nn.Module):
    def __init__(self, p, n_layers):
        super().__init__()
        self.layers = nn.ModuleList([linear(p, "layers.%d" % i) for i in range(n_layers)])

    def forward(self, x):
        for layer in self.layers[:-1]:
            x = F.relu(layer(x))
        return self.layers[-1](x)


class CNN(nn.Module):
    def __init__(self, p):
        super().__init__()
        n = len(spec.CNN_CHANNELS)
        self.convs = nn.ModuleList([conv(p, "conv%d" % i) for i in range(n)])
        self.bns = nn.ModuleList([batch_norm(p, "bn%d" % i) for i in range(n)])
        self.fc = linear(p, "fc")

    def forward(self, x):
        for conv_, bn in zip(self.convs, self.bns):
            x = F.max_pool2d(F.relu(bn(conv_(x))), 2)
        return self.fc(x.flatten(1))


class BasicBlock(nn.Module):
    def __init__(self, p, name, c_in, c_out, stride):
        super().__init__()
        self.conv1, self.bn1 = conv(p, name + ".conv1", stride), batch_norm(p, name + ".bn1")
        self.conv2, self.bn2 = conv(p, name + ".conv2"), batch_norm(p, name + ".bn2")
        self.down = self.down_bn = None
        if spec.has_downsample(c_in, c_out, stride):
            self.down, self.down_bn = conv(p, name + ".down", stride), batch_norm(p, name + ".down_bn")

    def forward(self, x):
        out = self.bn2(self.conv2(F.relu(self.bn1(self.conv1(x)))))
        return F.relu(out + (self.down_bn(self.down(x)) if self.down is not None else x))


class ResNet18(nn.Module):
    def __init__(self, p):
        super().__init__()
        self.conv, self.bn = conv(p, "conv"), batch_norm(p, "bn")
        self.blocks = nn.Sequential(*[BasicBlock(p, *b) for b in spec.resnet_blocks()])
        self.fc = linear(p, "fc")

    def forward(self, x):
        return self.fc(self.blocks(F.relu(self.bn(self.conv(x)))).mean(dim=(2, 3)))


class EncoderLayer(nn.Module):
    def __init__(self, p, name):
        super().__init__()
        self.qkv, self.proj, self.norm1 = linear(p, name + ".qkv"), linear(p, name + ".proj"), \
            layer_norm(p, name + ".norm1")
        self.ffn1, self.ffn2, self.norm2 = linear(p, name + ".ffn1"), linear(p, name + ".ffn2"), \
            layer_norm(p, name + ".norm2")

    def forward(self, x):
        b, t, c = x.shape
        heads = spec.TRANSFORMER["heads"]
        q, k, v = (z.reshape(b, t, heads, c // heads).transpose(1, 2) for z in self.qkv(x).chunk(3, dim=-1))
        attended = F.scaled_dot_product_attention(q, k, v).transpose(1, 2).reshape(b, t, c)
        x = self.norm1(x + self.proj(attended))
        return self.norm2(x + self.ffn2(F.relu(self.ffn1(x))))


class Transformer(nn.Module):
    def __init__(self, p):
        super().__init__()
        self.layers = nn.Sequential(*[EncoderLayer(p, "layers.%d" % i) for i in range(spec.TRANSFORMER["layers"])])
        self.fc = linear(p, "fc")

    def forward(self, x):
        return self.fc(self.layers(x).mean(dim=1))


def make_model(model):
    p = spec.init_params(model)
    if model in ("mlp33", "mlp784"):
        return MLP(p, len(spec.mlp_sizes(model)) - 1)
    return {"cnn": CNN, "resnet18": ResNet18, "transformer": Transformer}[model](p)


def build(model, batch, variant="eager"):
    net = make_model(model)
    optimizer = torch.optim.SGD(net.parameters(), lr=spec.LEARNING_RATE, momentum=spec.MOMENTUM)
    x, y = spec.data(model, batch)
    x, y = torch.from_numpy(x), torch.from_numpy(y).long()

    def forward_loss(x, y):
        return F.cross_entropy(net(x), y)

    predict = net
    if variant == "compile":
        torch._inductor.config.force_disable_caches = True  # the first call is a cold compile, as for JAX
        forward_loss, predict = torch.compile(forward_loss), torch.compile(net)

    def train_step():
        net.train()
        optimizer.zero_grad(set_to_none=True)
        loss = forward_loss(x, y)
        loss.backward()
        optimizer.step()
        return loss.detach()

    def infer():
        net.eval()
        with torch.no_grad():
            return predict(x)

    n_state = sum(b.numel() for name, b in net.named_buffers() if b.is_floating_point())
    return spec.Case(train_step, infer, n_params=sum(q.numel() for q in net.parameters()), n_state=n_state,
                     notes="torch threads: %d" % torch.get_num_threads())
