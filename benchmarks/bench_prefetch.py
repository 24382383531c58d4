"""Time a training loop spends waiting for data, with and without ``data.prefetch_to_device``, in one run.

    python benchmarks/bench_prefetch.py [--rounds 9] [--batches 32] [--prep-ms 16] [--out FILE]

Data: a synthetic slow transform, ``--prep-ms`` milliseconds per batch of 64 samples (a sleep per
sample, standing for decoding or disk reads outside the GIL, plus NumPy work). Step: one recorded
training step (forward, backward, SGD update) of a hybridized 4 x Dense(512) MLP on 256 inputs,
shorter than the batch preparation. For each loader (main thread, or 2 worker processes), without and with device
prefetch, the script times:

- ``pipeline``: seconds per batch of the data alone, each batch put on the device (no step): its own rate
  (one figure per loader, the median of its runs with and without prefetch);
- ``step``: seconds per step on batches already on the device (no data);
- ``loop``: seconds per batch of the training loop (data + step);

and prints ``wait = (loop - max(pipeline, step)) / loop``, the share of the loop spent waiting for data
beyond the pipeline's own rate (the issue's target is <= 10% with prefetch). Rounds are interleaved;
figures are medians.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

BATCH, WIDTH, HIDDEN, CLASSES = 64, 256, 512, 10


class SlowSamples:
    """Sample i: a float32 vector of WIDTH and a class label, made in ``prep_s`` seconds per sample."""

    def __init__(self, n: int, prep_s: float):
        self.n, self.prep_s = n, prep_s
        self.base = np.random.default_rng(0).standard_normal((n, WIDTH)).astype(np.float32)

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int):
        time.sleep(self.prep_s)
        x = np.tanh(self.base[i] * 0.5) + 0.01 * np.sin(self.base[i])
        return x.astype(np.float32), np.int32(i % CLASSES)


def make_step():
    import hybrid
    from hybrid import Trainer, autograd, loss, nn
    hybrid.random.seed(0)
    net = nn.HybridSequential()
    net.add(nn.Dense(HIDDEN, activation="relu", in_units=WIDTH))
    for _ in range(3):
        net.add(nn.Dense(HIDDEN, activation="relu", in_units=HIDDEN))
    net.add(nn.Dense(CLASSES, in_units=HIDDEN))
    net.initialize(hybrid.init.Xavier())
    net.hybridize()
    trainer = Trainer(net.collect_params(), "sgd", {"learning_rate": 0.01, "momentum": 0.9})
    loss_fn = loss.SoftmaxCELoss()

    def step(x, y):
        with autograd.record():
            l = loss_fn(net(x), y)
        l.backward()
        trainer.step(x.shape[0])
        return l
    return step


def timed(batches, step=None) -> float:
    """Seconds per batch of one pass over ``batches`` (running ``step`` on each when given)."""
    import jax
    count, last = 0, None
    start = time.perf_counter()
    for x, y in batches:
        last = step(x, y) if step is not None else (x, y)
        count += 1
    jax.block_until_ready(last)
    return (time.perf_counter() - start) / count


def main(argv=None) -> str:
    import jax
    from hybrid import data
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--batches", type=int, default=32, help="batches per epoch")
    parser.add_argument("--prep-ms", type=float, default=16.0, help="milliseconds to make one batch")
    parser.add_argument("--out", help="also write the table to this file")
    args = parser.parse_args(argv)

    dataset = SlowSamples(args.batches * BATCH, args.prep_ms / 1000 / BATCH)
    loaders = {"main thread": data.DataLoader(dataset, batch_size=BATCH),
               "2 workers": data.DataLoader(dataset, batch_size=BATCH, num_workers=2)}
    step = make_step()
    held = [(jax.device_put(x), jax.device_put(y)) for x, y in list(loaders["main thread"])[:8]]
    variants = {}
    for name, loader in loaders.items():
        variants[(name, "no")] = loader
        variants[(name, "yes")] = data.prefetch_to_device(loader, size=2)

    for batches in variants.values():  # warm-up: compile the step, start the workers
        timed(batches, step)
    samples = {key: {"pipeline": [], "loop": []} for key in variants}
    step_samples = []
    for _ in range(args.rounds):
        step_samples.append(timed(held * (args.batches // len(held) or 1), step))
        for key, batches in variants.items():
            samples[key]["pipeline"].append(timed(batches))
            samples[key]["loop"].append(timed(batches, step))
    for loader in loaders.values():
        loader.close()

    step_s = statistics.median(step_samples)
    rows = []
    for (name, prefetch), times in samples.items():
        # the pipeline's own rate is the loader's: pooled over its runs with and without prefetch
        pipeline = statistics.median(samples[(name, "no")]["pipeline"] + samples[(name, "yes")]["pipeline"])
        loop = statistics.median(times["loop"])
        rows.append((name, prefetch, pipeline, step_s, loop, (loop - max(pipeline, step_s)) / loop))
    lines = [f"# python3 benchmarks/bench_prefetch.py --rounds {args.rounds} --batches {args.batches} "
             f"--prep-ms {args.prep_ms:g}",
             f"milliseconds per batch of {BATCH} (median of {args.rounds} interleaved rounds of {args.batches} "
             f"batches); batch preparation {args.prep_ms:g} ms of synthetic work; {jax.devices()[0].platform} "
             f"device, {os.cpu_count()} CPU cores, load average {os.getloadavg()[0]:.1f} at the end; "
             "wait = (loop - max(pipeline, step)) / loop",
             f"{'loader':<12} {'prefetch':<9} {'pipeline':>9} {'step':>7} {'loop':>7} {'wait':>6}"]
    for name, prefetch, pipeline, step_time, loop, wait in rows:
        lines.append(f"{name:<12} {prefetch:<9} {pipeline * 1e3:9.2f} {step_time * 1e3:7.2f} {loop * 1e3:7.2f} "
                     f"{wait * 100:5.1f}%")
    by = {(r[0], r[1]): r for r in rows}
    for name in loaders:
        lines.append(f"{name}: the loop with prefetch takes {by[(name, 'yes')][4] / by[(name, 'no')][4]:.2f}x "
                     "the time of the loop without")
    text = "\n".join(lines)
    print(text)
    if args.out:
        Path(args.out).write_text(text + "\n")
    return text


if __name__ == "__main__":
    main()
