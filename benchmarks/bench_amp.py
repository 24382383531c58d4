"""Mixed precision against float32 on the digits data: held-out accuracy, step time and step memory.

    pip install -e '.[examples]' && python benchmarks/bench_amp.py [--steps 500]

For an MLP (64-256-256-10) and a small CNN (two 3x3 convolutions of 32 and 64 channels, max pooling,
Dense 10), each trained for ``--steps`` steps of batch 64 with Adam from the same initial weights:
float32, bfloat16 (``amp.init('bfloat16')``) and float16 with dynamic loss scaling. Printed per
model and precision: held-out accuracy (360 images), whether any loss was NaN, the median time of a
steady step (interleaved rounds), and XLA's memory figure of the recorded step's program
(temporaries + arguments + outputs - aliased).
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))

BATCH = 64


def models():
    from hybrid import nn

    def mlp():
        net = nn.HybridSequential()
        net.add(nn.Flatten(), nn.Dense(256, activation="relu"), nn.Dense(256, activation="relu"), nn.Dense(10))
        return net

    def cnn():
        net = nn.HybridSequential()
        net.add(nn.Conv2D(32, 3, padding=1, activation="relu"), nn.Conv2D(64, 3, padding=1, activation="relu"),
                nn.MaxPool2D(2), nn.Flatten(), nn.Dense(10))
        return net
    return {"mlp": mlp, "cnn": cnn}


class Run:
    """One model trained in one precision: ``step()`` runs a training step."""

    def __init__(self, make, precision: str | None, data: tuple):
        import hybrid
        from hybrid import Trainer, amp, loss
        self.precision, self.data = precision, data
        hybrid.random.seed(0)
        self.policy = None if precision is None else amp._policy(precision, None, None, "bench")
        self.net = make()
        self.net.initialize(hybrid.init.Xavier())
        self.net.hybridize()
        self.trainer = Trainer(self.net.collect_params(), "adam", {"learning_rate": 0.002})
        if precision == "float16":
            amp.init_trainer(self.trainer)
        self.loss_fn = loss.SoftmaxCELoss()
        self.at, self.nan = 0, False

    def step(self):
        from hybrid import amp, autograd
        from hybrid.graph import precision
        x_train, y_train = self.data[0], self.data[1]
        at = self.at
        self.at = (at + BATCH) % (len(x_train) - BATCH)
        with precision.use(self.policy):
            with autograd.record():
                l = self.loss_fn(self.net(x_train[at:at + BATCH]), y_train[at:at + BATCH])
            if self.precision == "float16":
                with amp.scale_loss(l, self.trainer) as scaled:
                    autograd.backward(scaled)
            else:
                autograd.backward(l)
            self.trainer.step(BATCH)
        return l

    def accuracy(self) -> float:
        from hybrid.graph import precision
        x_test, y_test = self.data[2], self.data[3]
        with precision.use(self.policy):
            pred = np.asarray(self.net(x_test), np.float32).argmax(axis=1)
        return float(np.mean(pred == y_test))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=500)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    import jax
    from benchmarks.common import recorded_step_bytes
    from train_digits import load_digits
    data = load_digits(0)
    print(f"{jax.devices()[0].device_kind}, jax {jax.__version__}; {args.steps} steps of batch {BATCH}, Adam")
    print(f"{'model':5s} {'precision':9s} {'held-out acc':>12s} {'NaN':>4s} {'ms/step':>8s} {'x f32':>6s} "
          f"{'step bytes':>11s} {'x f32':>6s}")
    for name, make in models().items():
        runs = {p or "float32": Run(make, p, data) for p in (None, "bfloat16", "float16")}
        accuracy = {}
        for p, run in runs.items():
            for _ in range(args.steps):
                run.nan |= not np.isfinite(float(run.step().mean()))
            accuracy[p] = run.accuracy()  # after exactly --steps steps (the timed rounds train on)
        times = {p: [] for p in runs}
        for _ in range(args.rounds):
            for p, run in runs.items():
                start = time.perf_counter()
                for _ in range(20):
                    out = run.step()
                jax.block_until_ready(out)
                times[p].append((time.perf_counter() - start) / 20 * 1e3)
        base_time = statistics.median(times["float32"])
        base_bytes = recorded_step_bytes(runs["float32"].step)
        for p, run in runs.items():
            ms, nbytes = statistics.median(times[p]), recorded_step_bytes(run.step)
            print(f"{name:5s} {p:9s} {accuracy[p]:12.4f} {str(run.nan):>4s} {ms:8.3f} {ms / base_time:6.2f} "
                  f"{nbytes:11d} {nbytes / base_bytes:6.2f}")


if __name__ == "__main__":
    main()
