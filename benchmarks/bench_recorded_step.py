"""The recorded Gluon loop against the best hand-written JAX step, side by side in one run.

    python benchmarks/bench_recorded_step.py [--rounds 15] [--steps 30] [--first-rounds 5]

Model: 33 x Dense(64, tanh) + Dense(10), batch 32, softmax cross-entropy, SGD with momentum 0.9.
The limit is one ``jax.jit`` of forward, loss, backward and update over flat parameter lists with
donated buffers. Printed, each as a ratio to the limit:

- steady-state time per step (medians of interleaved rounds, in an order that rotates) of the loop as users write it: net
  hybridized and loss block not (``gluon_loop``), the same with an ``l.mean()`` head, the same
  with ``Trainer(..., keep_grads=False)`` (``no_grads``: gradients not kept after the step),
  nothing hybridized (``eager``), and ``hybrid.compile`` of the same step;
- the CPU time the calling thread spends per step in the same rounds: Python, dispatch, and the part of
  each program XLA:CPU runs in the calling thread (docs/benchmarks.md, "Retired investigations"). Other processes on the
  machine change it much less than the wall time;
- how often the calling thread was preempted in those rounds (a round that waited for a core is slow
  whatever the loop does);
- the Python function calls the calling thread makes per step (counted by a profile hook, so the
  machine's load does not change it: a change of the loop's per-step Python shows here first);
- the recorded step's program on its own, called back to back like the limit (what the loop would cost
  without its Python);
- the first step (tracing and compiling included), one fresh process per variant in interleaved rounds;
- XLA's memory figure of the step's program (temporaries + arguments + outputs - aliased bytes),
  with and without the gradients kept, and the same for the suite's mlp784 and cnn.
"""
from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

WIDTH, DEPTH, CLASSES, BATCH, LR, MOMENTUM = 64, 33, 10, 32, 0.01, 0.9


def data():
    import jax.numpy as jnp
    rng = np.random.default_rng(0)
    return (jnp.asarray(rng.random((BATCH, WIDTH), dtype=np.float32)),
            jnp.asarray(rng.integers(0, CLASSES, BATCH)))


def limit_model() -> tuple[list, Callable]:
    """The hand-written model: its parameters (33 weights and the output layer's, then the biases) and
    ``loss(parameters) -> mean softmax cross-entropy`` on :func:`data`."""
    import jax
    import jax.numpy as jnp
    x, y = data()
    rng = np.random.default_rng(1)
    shapes = [(WIDTH, WIDTH)] * DEPTH + [(CLASSES, WIDTH)]
    params = [jnp.asarray(rng.standard_normal(s, dtype=np.float32) * 0.1) for s in shapes]
    params += [jnp.zeros(s[0], jnp.float32) for s in shapes]

    def loss(ps):
        h = x
        for w, b in zip(ps[:DEPTH], ps[DEPTH + 1:2 * DEPTH + 1]):
            h = jnp.tanh(h @ w.T + b)
        out = h @ ps[DEPTH].T + ps[-1]
        return jnp.mean(-jnp.take_along_axis(jax.nn.log_softmax(out), y[:, None], axis=1))
    return params, loss


def limit_step():
    """The hand-written step: returns ``run() -> loss`` and its jitted program with arguments."""
    import jax
    import jax.numpy as jnp
    params, loss = limit_model()
    moms = [jnp.zeros_like(p) for p in params]

    def step(ps, ms):
        value, grads = jax.value_and_grad(loss)(ps)
        ms = [MOMENTUM * m + g for m, g in zip(ms, grads)]
        return [p - LR * m for p, m in zip(ps, ms)], ms, value

    program = jax.jit(step, donate_argnums=(0, 1))
    state = {"p": params, "m": moms}

    def run():
        state["p"], state["m"], value = program(state["p"], state["m"])
        return value
    return run, program, (params, moms)


def hybrid_step(variant: str):
    """The Gluon loop: returns ``run() -> the step's loss`` (as the limit's ``run``; holding a parameter's
    array instead would keep the next step from reusing its buffer)."""
    import hybrid
    from hybrid import Trainer, autograd, nn
    from hybrid import loss as losses
    x, y = data()
    net = nn.HybridSequential()
    for _ in range(DEPTH):
        net.add(nn.Dense(WIDTH, activation="tanh", in_units=WIDTH))
    net.add(nn.Dense(CLASSES, in_units=WIDTH))
    net.initialize(hybrid.init.Xavier())
    if variant in ("gluon_loop", "mean_head", "no_grads"):
        net.hybridize()
    loss_fn = losses.SoftmaxCELoss()
    trainer = Trainer(net.collect_params(), "sgd", {"learning_rate": LR, "momentum": MOMENTUM},
                      keep_grads=variant != "no_grads")

    def step(x, y):
        with autograd.record():
            loss = loss_fn(net(x), y)
            if variant == "mean_head":
                loss = loss.mean()
        autograd.backward(loss)
        trainer.step(1 if variant == "mean_head" else BATCH)
        return loss

    step_fn = hybrid.compile(step) if variant == "compiled" else step

    def run():
        return step_fn(x, y)
    return run


VARIANTS = ("gluon_loop", "mean_head", "no_grads", "eager", "compiled")


BUSY_ROUND = 5  # involuntary context switches in a round of steps that mark it as one that waited for a core


def involuntary_switches() -> int:
    """How often the calling thread has been preempted so far (Linux; 0 elsewhere)."""
    import resource
    who = getattr(resource, "RUSAGE_THREAD", None)
    return resource.getrusage(who).ru_nivcsw if who is not None else 0


def python_calls_per_step(run: Callable[[], object], steps: int = 10) -> float:
    """Python function calls the calling thread makes per step of ``run``, counted over ``steps`` steps."""
    import jax
    calls = [0]

    def count(frame: object, event: str, arg: object) -> None:
        if event == "call":
            calls[0] += 1
    sys.setprofile(count)
    try:
        for _ in range(steps):
            out = run()
    finally:
        sys.setprofile(None)
    jax.block_until_ready(out)
    return calls[0] / steps


def first_steps(variants: tuple, rounds: int) -> dict[str, list[float]]:
    """Seconds of the first step (trace, compile, run) of each variant, one fresh process each, in
    ``rounds`` interleaved rounds (a change of machine load hits every variant alike)."""
    seconds: dict[str, list[float]] = {v: [] for v in variants}
    for _ in range(rounds):
        for variant in variants:
            seconds[variant].append(_first_step_once(variant))
    return seconds


def _first_step_once(variant: str) -> float:
    code = ("import time, jax, sys; sys.path.insert(0, '.'); from benchmarks.bench_recorded_step import *; "
            f"run = {'limit_step()[0]' if variant == 'limit' else f'hybrid_step({variant!r})'}; "
            "t = time.perf_counter(); jax.block_until_ready(run()); print(time.perf_counter() - t)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    return float(out.stdout.split()[-1])


def recorded_program_alone(variant: str) -> Callable[[], object]:
    """The recorded step's program of ``variant`` on its own: ``run()`` calls it with the donated
    outputs of the last call (its first outputs) as the next donated inputs, and returns its last output."""
    from benchmarks.common import capture_recorded_program, chained
    step = hybrid_step(variant)
    for _ in range(3):
        step()
    program, donated, kept = capture_recorded_program(step)
    n = len(donated)
    return chained(lambda last: program(last[:n], kept), donated)


def suite_step_bytes(model: str) -> tuple[int, int, int]:
    """XLA's memory figure of the train step of the suite's ``model`` (benchmarks/suite): the hand-written
    limit's, and the Gluon loop's with its gradients kept and with ``keep_grads=False``."""
    from benchmarks.common import recorded_step_bytes
    from benchmarks.suite import hybrid_models, jax_handwritten, spec
    batch = spec.DEFAULT_BATCH[model]
    figures = [jax_handwritten.build(model, batch).step_bytes()]
    for keep in (True, False):
        case = hybrid_models.build(model, batch, "gluon_loop", keep_grads=keep)
        case.train_step()
        figures.append(recorded_step_bytes(case.train_step))
    return tuple(figures)


def recorded_program_bytes(variant: str) -> int:
    """XLA's memory figure of a recorded step's program, as compiled by the recorder."""
    from benchmarks.common import recorded_step_bytes
    run = hybrid_step(variant)
    run()
    return recorded_step_bytes(run)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--first-rounds", type=int, default=5)
    args = parser.parse_args()
    import jax
    from benchmarks.common import interleaved_medians
    limit, program, limit_args = limit_step()
    runs = {"limit": limit, **{v: hybrid_step(v) for v in VARIANTS}}
    for run in runs.values():
        for _ in range(10):
            jax.block_until_ready(run())
    times: dict[str, list] = {name: [] for name in runs}
    cpu: dict[str, list] = {name: [] for name in runs}
    preempted: dict[str, list] = {name: [] for name in runs}
    names = list(runs)
    for round_ in range(args.rounds):
        shift = round_ % len(names)  # the order rotates: the variant timed after another one pays for it alike
        for name in names[shift:] + names[:shift]:
            run = runs[name]
            switches = involuntary_switches()
            start, start_cpu = time.perf_counter(), time.thread_time()
            for _ in range(args.steps):
                out = run()
            cpu[name].append((time.thread_time() - start_cpu) / args.steps * 1e3)
            preempted[name].append(involuntary_switches() - switches)
            jax.block_until_ready(out)
            times[name].append((time.perf_counter() - start) / args.steps * 1e3)
    for title, table in ((f"steady state, ms per step (median of {args.rounds} interleaved rounds of {args.steps} "
                          "steps)", times),
                         ("CPU time of the calling thread per step until the last step is issued, ms (same rounds)",
                          cpu)):
        base = statistics.median(table["limit"])
        print(title)
        for name, samples in table.items():
            print(f"  {name:11s} {statistics.median(samples):8.3f}  {statistics.median(samples) / base:5.2f}x")
    print(f"the calling thread's involuntary context switches per round (it was runnable, but another thread had "
          f"its core): mean, and rounds with more than {BUSY_ROUND}")
    for name, counts in preempted.items():
        busy = sum(count > BUSY_ROUND for count in counts)
        print(f"  {name:11s} {statistics.mean(counts):8.1f}  {busy:2d} of {len(counts)}")
    print("Python function calls of the calling thread per step (a profile hook's count; load does not change it)")
    for name, run in runs.items():
        print(f"  {name:11s} {python_calls_per_step(run):8.1f}")
    alone = {"limit": limit, **{v: recorded_program_alone(v) for v in ("gluon_loop", "no_grads")}}
    alone_times = interleaved_medians(alone, repeats=args.rounds, warmup=10, inner=args.steps)
    print(f"the recorded step's program alone, called back to back, ms per call (median of {args.rounds} rounds)")
    for name, seconds in alone_times.items():
        print(f"  {name:11s} {seconds * 1e3:8.3f}  {seconds / alone_times['limit']:5.2f}x")
    firsts = first_steps(("limit",) + VARIANTS, args.first_rounds)
    print(f"first step, s (median of {args.first_rounds} interleaved rounds of one fresh process each; "
          "the ratio is the median of the rounds' ratios)")
    for name, seconds in firsts.items():
        ratio = statistics.median(s / limit for s, limit in zip(seconds, firsts["limit"]))
        print(f"  {name:11s} {statistics.median(seconds):8.3f}  {ratio:5.2f}x")
    from benchmarks.common import program_bytes
    limit_bytes = program_bytes(program, *limit_args)
    print("XLA memory of the step's program, bytes (temp + arguments + outputs - aliased)")
    print(f"  limit       {limit_bytes:10d}  1.00x")
    for variant in ("gluon_loop", "no_grads"):
        recorded = recorded_program_bytes(variant)
        print(f"  {variant:11s} {recorded:10d}  {recorded / limit_bytes:5.2f}x")
    print("the same figure for the suite's models (benchmarks/suite): the limit, the Gluon loop keeping its gradients, "
          "and with keep_grads=False")
    for model in ("mlp784", "cnn"):
        limit, kept, not_kept = suite_step_bytes(model)
        print(f"  {model:11s} {limit:10d}  {kept:10d} {kept / limit:5.2f}x  {not_kept:10d} {not_kept / limit:5.2f}x")


if __name__ == "__main__":
    main()
