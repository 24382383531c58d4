"""Gluon 1.x ``hybrid_forward(F, x, **params)`` blocks against the same networks written with ``forward``.

    python benchmarks/bench_hybrid_forward.py [--repeats 30] [--rounds 5] [--out results.txt]

Each model is built twice with the same weights: from Gluon 1.x blocks (``self.params.get`` and ``F``
operators: ``F.FullyConnected``, ``F.Convolution``, ``F.Activation``, ``F.Pooling``, ``F.Flatten``) and
from hybrid's layers (``nn.Dense``, ``nn.Conv2D``, ...), both in an ``nn.HybridSequential``. Modes:

- ``infer``: hybridized inference, ``net(x)``;
- ``loop``: hybridized Gluon training loop, ``record`` / ``backward`` / ``trainer.step`` (SGD, momentum);
- ``eager``: inference without hybridize (shown for information: hybrid's own layers run as one compiled
  call there, user blocks such as the 1.x ones operation by operation).

Calls of the two variants are interleaved; each round gives a ratio of medians (``hybrid_forward`` time /
``forward`` time), rounds alternate which variant goes first, and the median ratio is printed with its
spread. The target is a ratio of at most 1.05 for ``infer`` and ``loop``.
"""
from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import hybrid  # noqa: E402
from hybrid import init, nn  # noqa: E402

from common import interleaved_medians, sgd_step, table  # noqa: E402


class Dense1x(hybrid.HybridBlock):
    def __init__(self, units, activation=None, **kwargs):
        super().__init__(**kwargs)
        self._units, self._act = units, activation
        with self.name_scope():
            self.weight = self.params.get("weight", shape=(units, 0), allow_deferred_init=True)
            self.bias = self.params.get("bias", shape=(units,), init=init.Zero())

    def hybrid_forward(self, F, x, weight, bias):
        y = F.FullyConnected(x, weight, bias, num_hidden=self._units)
        return F.Activation(y, act_type=self._act) if self._act else y


class Conv1x(hybrid.HybridBlock):
    def __init__(self, channels, **kwargs):
        super().__init__(**kwargs)
        self._channels = channels
        with self.name_scope():
            self.weight = self.params.get("weight", shape=(channels, 0, 3, 3), allow_deferred_init=True)
            self.bias = self.params.get("bias", shape=(channels,), init=init.Zero())

    def hybrid_forward(self, F, x, weight, bias):
        y = F.Convolution(x, weight, bias, kernel=(3, 3), pad=(1, 1), num_filter=self._channels)
        return F.Activation(y, act_type="relu")


class Pool1x(hybrid.HybridBlock):
    def hybrid_forward(self, F, x):
        return F.Pooling(x, pool_type="max", kernel=(2, 2), stride=(2, 2))


class Flatten1x(hybrid.HybridBlock):
    def hybrid_forward(self, F, x):
        return F.Flatten(x)


def mlp(gluon1: bool):
    net = nn.HybridSequential()
    if gluon1:
        net.add(Dense1x(512, "relu"), Dense1x(512, "relu"), Dense1x(10))
    else:
        net.add(nn.Dense(512, activation="relu"), nn.Dense(512, activation="relu"), nn.Dense(10))
    return net, (64, 784)


def cnn(gluon1: bool):
    net = nn.HybridSequential()
    if gluon1:
        net.add(Conv1x(32), Pool1x(), Conv1x(64), Pool1x(), Flatten1x(), Dense1x(10))
    else:
        net.add(nn.Conv2D(32, 3, padding=1, activation="relu"), nn.MaxPool2D(2),
                nn.Conv2D(64, 3, padding=1, activation="relu"), nn.MaxPool2D(2), nn.Flatten(), nn.Dense(10))
    return net, (32, 3, 28, 28)


MODELS = {"mlp": mlp, "cnn": cnn}


def pair(make):
    """The Gluon 1.x and the ``forward`` variant of a model, with the same weights, and an input."""
    old, shape = make(True)
    new, _ = make(False)
    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    for net in (old, new):
        net.initialize(init.Xavier())
        net(x)
    for p_old, p_new in zip(old.collect_params().values(), new.collect_params().values()):
        p_new.set_data(np.asarray(p_old.data()))
    return old, new, x


def runner(net, x, mode: str):
    if mode == "eager":
        return lambda: net(x)
    net.hybridize()
    if mode == "infer":
        return lambda: net(x)
    step, _ = sgd_step(net, compiled=False)
    y = np.arange(x.shape[0]) % 10
    return lambda: step(x, y)


def measure(repeats: int, rounds: int) -> list[dict]:
    rows = []
    for model, make in MODELS.items():
        for mode in ("infer", "loop", "eager"):
            old, new, x = pair(make)
            fns = {"hybrid_forward": runner(old, x, mode), "forward": runner(new, x, mode)}
            orders = [fns, dict(reversed(list(fns.items())))]
            per_round = [interleaved_medians(orders[r % 2], repeats=repeats, warmup=5) for r in range(rounds)]
            ratios = sorted(m["hybrid_forward"] / m["forward"] for m in per_round)
            rows.append({"model": model, "mode": mode,
                         "forward_ms": statistics.median(m["forward"] for m in per_round) * 1e3,
                         "hybrid_forward_ms": statistics.median(m["hybrid_forward"] for m in per_round) * 1e3,
                         "ratio": statistics.median(ratios), "spread": f"{ratios[0]:.3f}-{ratios[-1]:.3f}"})
            print(f"  {model} {mode}: ratio {rows[-1]['ratio']:.3f}", flush=True)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=30)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--out", help="also write the table to this file")
    args = parser.parse_args()
    import jax
    rows = measure(args.repeats, args.rounds)
    text = (f"hybrid_forward (Gluon 1.x) / forward, median of {args.rounds} rounds of interleaved medians "
            f"({args.repeats} calls each); jax {jax.__version__}, {jax.devices()[0].platform}\n\n"
            + table(rows, [("model", "model"), ("mode", "mode"), ("forward_ms", "forward ms"),
                           ("hybrid_forward_ms", "hybrid_forward ms"), ("ratio", "ratio"),
                           ("spread", "spread")]))
    print(text)
    if args.out:
        Path(args.out).write_text(text + "\n")


if __name__ == "__main__":
    main()
