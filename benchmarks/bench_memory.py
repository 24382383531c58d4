"""Memory targets of hybrid, measured with XLA's own numbers in one run.

    python benchmarks/bench_memory.py [--repeats 9] [--json out.json]

1. Rematerialisation of a 48-layer MLP (width 256, batch 4096): compiled memory of the training step
   (temp + arguments + outputs - aliased, from ``compiled.memory_analysis()``) and step time, without
   remat, with ``remat='sqrt'`` and with ``remat='auto'``; the step is ``hybrid.compile`` of the Gluon
   loop (forward, backward and SGD-momentum update in one program).
2. Byte budgets on MLP, BatchNorm-MLP and transformer training graphs: the plan chosen for budgets of
   90%, 70% and 50% of the un-rematerialised memory, and XLA's figure for it.
3. Donation: alias bytes of Trainer.step's update program and of the compiled training step.
4. Planner quality and speed are measured by benchmarks/bench_memory_plan.py.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

import hybrid  # noqa: E402
from hybrid import autograd, loss, nn  # noqa: E402

from corpus import TransformerBlock  # noqa: E402
from common import compiled_sgd_step, table  # noqa: E402


def xla_bytes(compiled) -> int:
    m = compiled.memory_analysis()
    return int(m.temp_size_in_bytes + m.argument_size_in_bytes + m.output_size_in_bytes - m.alias_size_in_bytes)


def deep_mlp(layers: int = 48, width: int = 256):
    net = nn.HybridSequential()
    for _ in range(layers):
        net.add(nn.Dense(width, activation="relu"))
    net.add(nn.Dense(10))
    return net


def compiled_step(net, batch):
    """``hybrid.compile`` of one SGD-momentum training step of ``net`` and its XLA executable."""
    step, trainer = compiled_sgd_step(net)
    x, y = batch
    step(x, y)  # compiles
    (program,) = step._programs.values()
    args = ([g() for g in program.donated_getters], [g() for g in program.kept_getters], [x, y],
            [c() for c in program.host_computes])
    compiled = program.jitted.lower(*args).compile()
    return step, compiled, trainer


def remat_section(repeats: int) -> list[dict]:
    rng = np.random.default_rng(0)
    x = jnp.asarray(rng.standard_normal((4096, 256)).astype(np.float32))
    y = jnp.asarray(rng.integers(0, 10, 4096).astype(np.int32))
    rows, steps = [], {}
    for remat in (None, "sqrt", "auto"):
        hybrid.random.seed(0)
        net = deep_mlp()
        net.initialize()
        with autograd.pause():
            net(x[:2])
        net.hybridize(remat=remat)
        start = time.perf_counter()
        step, compiled, _ = compiled_step(net, (x, y))
        first_call = time.perf_counter() - start
        steps[remat] = step
        entry = next(iter(net._cached_op.entries.values()))
        rows.append({"remat": str(remat), "plan": entry.remat_plan.describe() if entry.remat_plan else "-",
                     "xla_mb": xla_bytes(compiled) / 1e6, "first_call_s": first_call})
    for step in steps.values():  # warm-up: first executions allocate and page in the buffers
        jax.block_until_ready(step(x, y))
    times = {key: [] for key in steps}
    for _ in range(repeats):  # interleaved, medians
        for key, step in steps.items():
            start = time.perf_counter()
            jax.block_until_ready(step(x, y))
            times[key].append(time.perf_counter() - start)
    base_mem, base_time = rows[0]["xla_mb"], statistics.median(times[None])
    for row, key in zip(rows, steps):
        row["step_s"] = statistics.median(times[key])
        row["memory_reduction"] = base_mem / row["xla_mb"]
        row["time_ratio"] = row["step_s"] / base_time
    return rows


def bn_mlp():
    net = nn.HybridSequential()
    for _ in range(16):
        net.add(nn.Dense(512), nn.BatchNorm(), nn.Activation("relu"))
    net.add(nn.Dense(10))
    return net


def transformer():
    net = nn.HybridSequential()
    for _ in range(8):
        net.add(TransformerBlock(128, 4))
    return net


BUDGET_MODELS = {
    "MLP 48x256, batch 1024": (lambda: deep_mlp(48, 256), (1024, 256)),
    "BatchNorm MLP 16x512, batch 1024": (bn_mlp, (1024, 256)),
    "transformer 8x128, 16x64 tokens": (transformer, (16, 64, 128)),
}


def budget_section() -> list[dict]:
    rows = []
    rng = np.random.default_rng(1)
    for name, (make, shape) in BUDGET_MODELS.items():
        x = jnp.asarray(rng.standard_normal(shape).astype(np.float32))
        net = make()
        net.initialize()
        with autograd.pause():
            net(x)
        baseline = hybrid.memory_plan(net, x).xla_bytes
        for fraction in (0.9, 0.7, 0.5):
            budget = int(fraction * baseline)
            net.hybridize(remat=budget)
            start = time.perf_counter()
            with autograd.pause(train_mode=True):
                net(x)
            planning = time.perf_counter() - start
            entry = next(iter(net._cached_op.entries.values()))
            details = next(s for s in entry.pass_stats if s.name == "remat").details
            measured = entry.training_memory(entry.graph)
            rows.append({"model": name, "budget_mb": budget / 1e6, "plan": entry.remat_plan.describe()
                         if entry.remat_plan else "none", "xla_mb": measured / 1e6,
                         "vs_budget": measured / budget, "unoptimised_mb": baseline / 1e6,
                         "plan_s": planning, "note": details.get("note", "")})
            print(f"  {name} at {fraction:.0%}: {measured / budget:.3f} of budget", flush=True)
    return rows


def donation_section() -> list[dict]:
    rng = np.random.default_rng(2)
    net = bn_mlp()
    net.initialize()
    x = jnp.asarray(rng.standard_normal((256, 256)).astype(np.float32))
    y = jnp.asarray(rng.integers(0, 10, 256).astype(np.int32))
    with autograd.pause():
        net(x)
    net.hybridize()
    trainer = hybrid.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.01, "momentum": 0.9})
    loss_fn = loss.SoftmaxCrossEntropyLoss()
    with autograd.record():
        out = loss_fn(net(x), y)
    autograd.backward(out)
    trainer.step(256)
    with autograd.record():
        out = loss_fn(net(x), y)
    autograd.backward(out)
    (update,) = trainer._programs.values()
    params = trainer._trainable()
    lowered = update.lower([p.data() for p in params], [p.grad() for p in params],
                           [trainer._states[p] for p in params], np.float32(0.01), np.float32(1 / 256))
    m_update = lowered.compile().memory_analysis()
    _, compiled, _ = compiled_step(net, (x, y))
    m_step = compiled.memory_analysis()
    state_bytes = sum(p.data().nbytes for p in params) * 2  # weights and momentum
    return [{"program": "Trainer.step update", "alias_mb": m_update.alias_size_in_bytes / 1e6,
             "weights_and_states_mb": state_bytes / 1e6},
            {"program": "hybrid.compile training step", "alias_mb": m_step.alias_size_in_bytes / 1e6,
             "weights_and_states_mb": state_bytes / 1e6}]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=9)
    parser.add_argument("--json", type=str, default=None)
    args = parser.parse_args()
    print(f"jax {jax.__version__} on {jax.devices()[0].platform}")
    remat = remat_section(args.repeats)
    print("\n48-layer MLP (width 256, batch 4096), training step (hybrid.compile, SGD momentum)")
    print(table(remat, [("remat", "remat"), ("plan", "plan"), ("xla_mb", "XLA MB"),
                        ("memory_reduction", "memory /"), ("step_s", "step s"), ("time_ratio", "time x"),
                        ("first_call_s", "first call s")]))
    budgets = budget_section()
    print("\nbyte budgets (XLA's figure for forward+backward)")
    print(table(budgets, [("model", "model"), ("budget_mb", "budget MB"), ("plan", "plan"), ("xla_mb", "XLA MB"),
                          ("vs_budget", "/ budget"), ("unoptimised_mb", "no remat MB"), ("plan_s", "planning s"),
                          ("note", "note")]))
    donation = donation_section()
    print("\ndonation")
    print(table(donation, [("program", "program"), ("alias_mb", "aliased MB"),
                           ("weights_and_states_mb", "weights+momentum MB")]))
    if args.json:
        Path(args.json).write_text(json.dumps({"remat": remat, "budgets": budgets, "donation": donation}, indent=2))


if __name__ == "__main__":
    main()
