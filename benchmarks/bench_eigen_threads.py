"""The mlp33 recorded loop against the hand-written step, with XLA:CPU's defaults and with its matrix
products on one thread (``XLA_FLAGS=--xla_cpu_multi_thread_eigen=false``), in alternating processes.

    python benchmarks/bench_eigen_threads.py [--processes 4] [--rounds 20] [--steps 50]

XLA reads ``XLA_FLAGS`` once, when its CPU backend starts, so every process runs one setting; the settings
alternate, process after process. A process builds ``bench_recorded_step.py``'s limit, Gluon loop and
``mean_head`` loop, and times them in interleaved rounds of ``--steps`` steps whose order rotates. Printed
per setting (medians over the processes of each process's medians): milliseconds per step, the calling
thread's CPU milliseconds per step, and the ratio to the limit of the same rounds.

A recorded step's Python runs while the previous step's program runs in XLA's threads. When the wall time
of the loop exceeds its thread's CPU time, the thread waited for a core.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

FLAG = "--xla_cpu_multi_thread_eigen=false"
SETTINGS = {"default": "", "one-thread products": FLAG}
VARIANTS = ("limit", "gluon_loop", "mean_head")


def worker(rounds: int, steps: int) -> dict:
    """Medians per variant: ms per step, calling-thread CPU ms per step, ratio to the limit's round."""
    import jax
    from benchmarks.bench_recorded_step import hybrid_step, limit_step
    runs = {"limit": limit_step()[0], **{v: hybrid_step(v) for v in VARIANTS[1:]}}
    for run in runs.values():
        for _ in range(20):
            out = run()
        jax.block_until_ready(out)
    wall: dict[str, list] = {v: [] for v in runs}
    cpu: dict[str, list] = {v: [] for v in runs}
    for round_ in range(rounds):
        shift = round_ % len(VARIANTS)
        for name in VARIANTS[shift:] + VARIANTS[:shift]:
            run = runs[name]
            start, start_cpu = time.perf_counter(), time.thread_time()
            for _ in range(steps):
                out = run()
            cpu[name].append((time.thread_time() - start_cpu) / steps * 1e3)
            jax.block_until_ready(out)
            wall[name].append((time.perf_counter() - start) / steps * 1e3)
    return {v: {"ms": statistics.median(wall[v]), "cpu_ms": statistics.median(cpu[v]),
                "ratio": statistics.median(a / b for a, b in zip(wall[v], wall["limit"]))} for v in runs}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--processes", type=int, default=4, help="processes per setting")
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--steps", type=int, default=50)
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(worker(args.rounds, args.steps)))
        return
    results: dict[str, list] = {name: [] for name in SETTINGS}
    for _ in range(args.processes):
        for name, flags in SETTINGS.items():
            env = dict(os.environ, XLA_FLAGS=flags)
            out = subprocess.run([sys.executable, __file__, "--worker", "--rounds", str(args.rounds),
                                  "--steps", str(args.steps)], env=env, capture_output=True, text=True,
                                 check=True, cwd=ROOT)
            results[name].append(json.loads(out.stdout.splitlines()[-1]))
    print(f"mlp33, median over {args.processes} processes per setting of each process's medians "
          f"({args.rounds} interleaved rounds of {args.steps} steps)")
    print(f"  {'setting':22s}{'variant':12s}{'ms/step':>9s}{'thread ms':>11s}{'ratio':>8s}  ratios of the processes")
    for name, runs in results.items():
        for variant in VARIANTS:
            rows = [run[variant] for run in runs]
            ratios = sorted(row["ratio"] for row in rows)
            print(f"  {name:22s}{variant:12s}{statistics.median(r['ms'] for r in rows):9.3f}"
                  f"{statistics.median(r['cpu_ms'] for r in rows):11.3f}{statistics.median(ratios):7.2f}x  "
                  + " ".join(f"{r:.2f}" for r in ratios))


if __name__ == "__main__":
    main()
