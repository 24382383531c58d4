"""What keeping the momenta in one buffer costs and saves, in the hand-written mlp33 step.

    python benchmarks/bench_packed_states.py [--calls 100] [--modes concat dus]

The model and the limit are those of ``bench_recorded_step.py``: one ``jax.jit`` of forward, loss,
backward and SGD-with-momentum update over 68 weights and 68 momenta, donated. The variants keep the
68 momenta as one flat buffer between steps, sliced inside the step and rebuilt at its end:

- ``concat``: the new momenta joined with ``jnp.concatenate``;
- ``dus``: the new momenta written into the donated buffer with ``lax.dynamic_update_slice``;

or pack only one side, to tell their costs apart (these do not chain: a call's outputs do not fit the
next call, so only the compile time and the memory figure are printed):

- ``slices``: the momenta come packed and leave one array each;
- ``join``: the momenta come one array each and leave packed.

Printed for each: XLA's compile time, its memory figure (temporaries + arguments + outputs - aliased
bytes), and, called back to back, the calling thread's CPU time and the wall time per step (medians of
10 rounds of ``--calls`` calls). Fewer arrays are cheaper to dispatch; the cost is in XLA.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def packed_step(mode: str):
    """The limit's step with the momenta packed: returns ``(program, (weights, packed momenta))``."""
    import jax
    import jax.numpy as jnp
    import numpy as np
    from benchmarks.bench_recorded_step import LR, MOMENTUM, limit_model
    params, loss = limit_model()
    sizes = [int(np.prod(p.shape)) for p in params]
    starts = [int(s) for s in np.cumsum([0] + sizes[:-1])]

    def step(ps, packed):
        value, grads = jax.value_and_grad(loss)(ps)
        old = packed if mode == "join" else [packed[s:s + n].reshape(p.shape) for p, s, n in zip(ps, starts, sizes)]
        moms = [MOMENTUM * m + g for m, g in zip(old, grads)]
        if mode in ("concat", "join"):
            packed = jnp.concatenate([m.ravel() for m in moms])
        elif mode == "dus":
            for m, s in zip(moms, starts):
                packed = jax.lax.dynamic_update_slice(packed, m.ravel(), (s,))
        else:
            packed = moms
        return [p - LR * m for p, m in zip(ps, moms)], packed, value

    momenta = [jnp.zeros_like(p) for p in params] if mode == "join" else jnp.zeros(sum(sizes), jnp.float32)
    return jax.jit(step, donate_argnums=(0, 1)), (params, momenta)


def measure(program, args: tuple, calls: int) -> tuple:
    """Compile seconds, XLA's memory figure, and calling-thread CPU and wall microseconds per step (None
    for ``calls=0``)."""
    from benchmarks.common import back_to_back, chained
    start = time.perf_counter()
    compiled = program.lower(*args).compile()
    seconds = time.perf_counter() - start
    memory = compiled.memory_analysis()
    figure = (memory.temp_size_in_bytes + memory.argument_size_in_bytes + memory.output_size_in_bytes
              - memory.alias_size_in_bytes)
    if not calls:
        return seconds, figure, None, None
    copies = tuple([a + 0 for a in arg] if isinstance(arg, list) else arg + 0 for arg in args)  # donated
    cpu, wall = back_to_back(chained(lambda last: program(*last[:2]), copies), calls)
    return seconds, figure, cpu, wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=100)
    parser.add_argument("--modes", nargs="+", default=["concat", "dus", "slices", "join"],
                        choices=["concat", "dus", "slices", "join"])
    args = parser.parse_args()
    from benchmarks.bench_recorded_step import limit_step
    _, limit, limit_args = limit_step()
    print("compile s, XLA memory bytes, then called back to back: calling-thread CPU us and wall us per step")
    rows = {"limit": measure(limit, limit_args, args.calls)}
    rows.update({mode: measure(*packed_step(mode), args.calls if mode in ("concat", "dus") else 0)
                 for mode in args.modes})
    for name, (seconds, figure, cpu, wall) in rows.items():
        timed = f"{cpu:7.0f} {wall:7.0f}" if cpu is not None else "      -       -"
        print(f"  {name:7s} {seconds:6.2f} {figure:10d} {timed}")


if __name__ == "__main__":
    main()
