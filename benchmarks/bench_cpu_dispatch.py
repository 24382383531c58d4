"""How much of an XLA:CPU program runs in the Python thread that calls it.

    python benchmarks/bench_cpu_dispatch.py [--calls 100]

For each program, with nothing else queued: the time until the call returns to Python, and the time
then left to wait for its results (medians of ``--calls`` calls). Only the second part can overlap
the Python that follows the call, such as the recording of the next training step. Programs:

- ``wide``: 68 independent chains of two 64x64 matrix products (the shape of the backward pass and
  update of the 33-layer MLP, whose 68 parameters are updated independently);
- ``deep``: one chain of 100 dependent 64x64 matrix products;
- ``limit``: the hand-written JAX training step of ``bench_recorded_step.py``;
- ``recorded``: the program of the recorded Gluon loop of that benchmark (net hybridized, loss not);
- ``tiny136``: 136 one-element arrays in and out (donated), which is the dispatch of as many arrays as
  the two steps above take, with nearly nothing to compute.

Then, called back to back as in a training loop (each call's donated outputs are the next call's
inputs, so a call is issued before the previous one has finished): the CPU time of the calling thread
per call and the wall time per call (medians of 10 rounds of ``--calls`` calls).
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def split_times(program, make_args, calls: int) -> tuple[float, float]:
    """Median microseconds until ``program(*make_args())`` returns (its arguments made and ready
    beforehand), and then until its result is ready."""
    import jax
    returned, waited = [], []
    jax.block_until_ready(program(*make_args()))
    for _ in range(calls):
        args = jax.block_until_ready(make_args())
        start = time.perf_counter()
        out = program(*args)
        middle = time.perf_counter()
        jax.block_until_ready(out)
        returned.append(middle - start)
        waited.append(time.perf_counter() - middle)
    return statistics.median(returned) * 1e6, statistics.median(waited) * 1e6


def recorded_program():
    """The recorded loop's step program, and a function making fresh arguments for it (it donates some)."""
    from benchmarks.bench_recorded_step import hybrid_step
    from benchmarks.common import capture_recorded_program
    run = hybrid_step("gluon_loop")
    for _ in range(3):
        run()
    program, donated, kept = capture_recorded_program(run)
    return program, lambda: ([a + 0 for a in donated], kept)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=100)
    args = parser.parse_args()
    import jax
    import jax.numpy as jnp
    from benchmarks.bench_recorded_step import limit_step

    xs = [jnp.ones((64, 64)) for _ in range(68)]
    wide = jax.jit(lambda xs: [jnp.tanh(x @ x) @ x for x in xs])

    def chain(x):
        for _ in range(100):
            x = jnp.tanh(x @ x)
        return x
    deep = jax.jit(chain)
    _, limit, (weights, momenta) = limit_step()
    recorded, recorded_args = recorded_program()
    print(f"microseconds per call (median of {args.calls}, nothing else queued): until the call returns, "
          "then waiting for the results")
    programs = {"wide": (wide, lambda: (xs,)), "deep": (deep, lambda: (xs[0],)),
                "limit": (limit, lambda: ([w + 0 for w in weights], [m + 0 for m in momenta])),
                "recorded": (recorded, recorded_args)}
    tiny = jax.jit(lambda xs: [x * 1.0001 for x in xs], donate_argnums=0)
    programs["tiny136"] = (tiny, lambda: ([jnp.ones(1) for _ in range(136)],))
    for name, (program, make_args) in programs.items():
        returned, waited = split_times(program, make_args, args.calls)
        share = returned / (returned + waited)
        print(f"  {name:9s} {returned:8.0f} {waited:8.0f}   {share:4.0%} in the calling thread")
    from benchmarks.bench_recorded_step import recorded_program_alone
    from benchmarks.common import back_to_back, chained
    loops = {"limit": limit_step()[0], "recorded": recorded_program_alone("gluon_loop"),
             "tiny136": chained(tiny, [jnp.ones(1) for _ in range(136)])}
    print("called back to back, microseconds per call (median of 10 rounds): CPU time of the calling thread, "
          "then wall time")
    for name, run in loops.items():
        cpu, wall = back_to_back(run, args.calls)
        print(f"  {name:9s} {cpu:8.0f} {wall:8.0f}")


if __name__ == "__main__":
    main()
