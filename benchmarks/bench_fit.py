"""``Estimator.fit`` against the hand-written Gluon loop on the same model and batches, in one run.

    python benchmarks/bench_fit.py [--rounds 7] [--epochs 3]

Model: 4 x Dense(256, relu) + Dense(10), batch 64, 32 batches per epoch held in memory (no data
loading is timed), softmax cross-entropy, SGD with momentum. Printed: median seconds per epoch of

- ``loop``: the fastest hand-written loop (record, backward, step; nothing read back);
- ``loop+metrics``: the same loop updating accuracy and loss metrics every batch, as ``fit`` does;
- ``fit``: ``Estimator.fit`` with its default handlers (metrics, logging, progress), logging silenced;

each as a ratio to ``loop`` and to ``loop+metrics`` (rounds interleaved, medians).
"""
from __future__ import annotations

import argparse
import logging
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

WIDTH, DEPTH, CLASSES, BATCH, BATCHES = 256, 4, 10, 64, 32


def setup(seed: int = 0):
    import jax.numpy as jnp
    import hybrid
    from hybrid import Trainer, nn
    rng = np.random.default_rng(seed)
    batches = [(jnp.asarray(rng.standard_normal((BATCH, WIDTH), dtype=np.float32)),
                jnp.asarray(rng.integers(0, CLASSES, BATCH).astype(np.int32))) for _ in range(BATCHES)]
    net = nn.HybridSequential()
    for _ in range(DEPTH):
        net.add(nn.Dense(WIDTH, activation="relu", in_units=WIDTH))
    net.add(nn.Dense(CLASSES, in_units=WIDTH))
    net.initialize(hybrid.init.Xavier())
    net.hybridize()
    trainer = Trainer(net.collect_params(), "sgd", {"learning_rate": 0.01, "momentum": 0.9})
    return net, trainer, batches


def hand_loop(with_metrics: bool, epochs: int):
    from hybrid import autograd, loss, metric
    net, trainer, batches = setup()
    loss_fn = loss.SoftmaxCELoss()
    metrics = [metric.Accuracy(), metric.Loss()]

    def run():
        for _ in range(epochs):
            for m in metrics:
                m.reset()
            for x, y in batches:
                with autograd.record():
                    out = net(x)
                    l = loss_fn(out, y)
                autograd.backward(l)
                trainer.step(BATCH)
                if with_metrics:
                    metrics[0].update([y], [out])
                    metrics[1].update(0, [l])
        return net[0].weight.data()
    return run


def fit_loop(epochs: int):
    from hybrid import estimator, loss
    net, trainer, batches = setup()
    est = estimator.Estimator(net, loss.SoftmaxCELoss(), trainer=trainer)
    est.logger.setLevel(logging.WARNING)

    def run():
        est.fit(batches, epochs=epochs, event_handlers=[estimator.ProgressBar(style="lines")])
        return net[0].weight.data()
    return run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--epochs", type=int, default=3)
    args = parser.parse_args()
    import jax
    runs = {"loop": hand_loop(False, args.epochs), "loop+metrics": hand_loop(True, args.epochs),
            "fit": fit_loop(args.epochs)}
    for run in runs.values():
        jax.block_until_ready(run())
        jax.block_until_ready(run())
    times: dict[str, list] = {name: [] for name in runs}
    for _ in range(args.rounds):
        for name, run in runs.items():
            start = time.perf_counter()
            jax.block_until_ready(run())
            times[name].append((time.perf_counter() - start) / args.epochs)
    loop, with_metrics = statistics.median(times["loop"]), statistics.median(times["loop+metrics"])
    print(f"seconds per epoch of {BATCHES} batches (median of {args.rounds} interleaved rounds; one fit call or "
          f"loop of {args.epochs} epochs each)")
    for name, samples in times.items():
        value = statistics.median(samples)
        print(f"  {name:13s} {value:8.4f}  {value / loop:5.2f}x loop  {value / with_metrics:5.2f}x loop+metrics")


if __name__ == "__main__":
    main()
