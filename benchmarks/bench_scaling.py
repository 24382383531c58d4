"""Training-step time on 1, 2 and 4 devices (data parallel), simulated CPU devices by default.

    python benchmarks/bench_scaling.py [--devices 1 2 4] [--repeats 10] [--resnet-batch 64]

Each model trains with ``Trainer(mesh=make_mesh(n))`` and a ``hybrid.compile`` step on a
batch split with ``shard_batch``; the global batch is the same for every n. The step is
timed after compilation, round-robin over the device counts, and the median is printed
with the first call's time (trace + compile). On CPU, XLA_FLAGS simulates devices that
share the same cores, so the figures show the cost of partitioning and collectives,
not a speed-up. On a GPU machine the same script runs on the real devices.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

if "--xla_force_host_platform_device_count" not in os.environ.get("XLA_FLAGS", ""):
    os.environ["XLA_FLAGS"] = os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=4"

import jax  # noqa: E402
import numpy as np  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import hybrid  # noqa: E402
from hybrid import distributed, nn  # noqa: E402

from common import interleaved_medians, sgd_step, table  # noqa: E402


def mlp():
    """784-512x4-10 with ReLU."""
    net = nn.HybridSequential()
    for _ in range(4):
        net.add(nn.Dense(512, activation="relu"))
    net.add(nn.Dense(10))
    return net


class BasicBlock(nn.HybridBlock):
    """Two 3x3 conv-BN layers with an identity (or 1x1 conv-BN) shortcut, ReLU after the sum."""

    def __init__(self, channels: int, stride: int):
        super().__init__()
        self.body = nn.HybridSequential()
        self.body.add(nn.Conv2D(channels, 3, stride, 1, use_bias=False), nn.BatchNorm(), nn.Activation("relu"),
                      nn.Conv2D(channels, 3, 1, 1, use_bias=False), nn.BatchNorm())
        self.shortcut = None
        if stride != 1:
            self.shortcut = nn.HybridSequential()
            self.shortcut.add(nn.Conv2D(channels, 1, stride, use_bias=False), nn.BatchNorm())

    def forward(self, x):
        skip = x if self.shortcut is None else self.shortcut(x)
        return jax.nn.relu(self.body(x) + skip)


def resnet18():
    """ResNet-18 for 32x32 inputs: 3x3 stem, four stages of two BasicBlocks (64-512 channels), 10 classes."""
    net = nn.HybridSequential()
    net.add(nn.Conv2D(64, 3, 1, 1, use_bias=False), nn.BatchNorm(), nn.Activation("relu"))
    for stage, channels in enumerate((64, 128, 256, 512)):
        net.add(BasicBlock(channels, 1 if stage == 0 else 2), BasicBlock(channels, 1))
    net.add(nn.GlobalAvgPool2D(), nn.Dense(10))
    return net


def make_step(build, x, y, mesh):
    """A compiled training step of a fresh copy of the model on ``mesh`` (None: plain one device)."""
    hybrid.random.seed(0)
    net = build()
    net.initialize(hybrid.init.Xavier())
    net.hybridize()
    step, _ = sgd_step(net, **({} if mesh is None else {"mesh": mesh}))

    if mesh is not None:
        x, y = distributed.shard_batch((x, y), mesh)
    start = time.perf_counter()
    jax.block_until_ready(step(x, y))
    return (lambda: step(x, y)), time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--devices", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--mlp-batch", type=int, default=128)
    parser.add_argument("--resnet-batch", type=int, default=64)
    parser.add_argument("--models", nargs="+", default=["mlp", "resnet18"])
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    models = {"mlp": (mlp, (args.mlp_batch, 784)), "resnet18": (resnet18, (args.resnet_batch, 3, 32, 32))}
    print(f"jax {jax.__version__}, {jax.devices()[0].platform}: {len(jax.devices())} devices, "
          f"{os.cpu_count()} CPU cores")
    rows = []
    for name in args.models:
        build, shape = models[name]
        x = rng.standard_normal(shape).astype(np.float32)
        y = rng.integers(0, 10, shape[0]).astype(np.int32)
        variants = {"1 (no mesh)": make_step(build, x, y, None)}
        for n in args.devices:
            variants[f"{n}"] = make_step(build, x, y, distributed.make_mesh(n))
        medians = interleaved_medians({k: fn for k, (fn, _) in variants.items()}, repeats=args.repeats, warmup=2)
        base = medians["1 (no mesh)"]
        for key, (_, first) in variants.items():
            rows.append({"model": name, "batch": shape[0], "devices": key, "step_ms": medians[key] * 1e3,
                         "vs_one": base / medians[key], "first_s": first})
    print(table(rows, [("model", "model"), ("batch", "global batch"), ("devices", "devices"),
                       ("step_ms", "step ms (median)"), ("vs_one", "speed vs 1 device"),
                       ("first_s", "first call s")]))


if __name__ == "__main__":
    main()
