"""Memory targets of hybrid, measured with XLA's own numbers in one run.

    python benchmarks/bench_memory.py [--models mlp48,resnet18,transformer] [--repeats 9] [--json out.json]

1. Rematerialisation of a 48-layer MLP (width 256, batch 4096), ResNet-18 (model zoo, CIFAR stem, batch
   32 of 3x32x32) and an 8-layer transformer encoder (width 256, 4 heads, batch 16 x 128 tokens):
   compiled memory of the training step (temp + arguments + outputs - aliased, from
   ``compiled.memory_analysis()``) and step time, without remat, with ``remat='sqrt'`` and with
   ``remat='auto'``; the step is ``hybrid.compile`` of the Gluon loop (forward, backward and SGD-momentum
   update in one program). Each model also gets a breakdown of that memory: the arguments (weights,
   momentum, BatchNorm statistics, batch), the gradients and the parameters stacked for the scan (from
   the parameter sizes), and the rest of XLA's temporaries (activations and working buffers).
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

MB = 1e6


def xla_bytes(compiled) -> int:
    m = compiled.memory_analysis()
    return int(m.temp_size_in_bytes + m.argument_size_in_bytes + m.output_size_in_bytes - m.alias_size_in_bytes)


def deep_mlp(layers: int = 48, width: int = 256):
    net = nn.HybridSequential()
    for _ in range(layers):
        net.add(nn.Dense(width, activation="relu"))
    net.add(nn.Dense(10))
    return net


def step_executable(step, x, y):
    """XLA's executable of the one program a ``hybrid.compile`` step has run."""
    (program,) = step._programs.values()
    args = ([g() for g in program.donated_getters], [g() for g in program.kept_getters], [x, y],
            [c() for c in program.host_computes])
    return program.jitted.lower(*args).compile()


def compiled_step(net, batch):
    """``hybrid.compile`` of one SGD-momentum training step of ``net`` and its XLA executable."""
    step, trainer = compiled_sgd_step(net)
    x, y = batch
    step(x, y)  # compiles
    return step, step_executable(step, x, y), trainer


class Encoder(hybrid.HybridBlock):
    """``layers`` TransformerBlocks (tests/corpus.py: attention, LayerNorm, ReLU feed-forward, dropout 0.1),
    mean over the tokens, Dense(classes). Input (B, T, units) float32; output (B, classes)."""

    def __init__(self, layers: int = 8, units: int = 256, heads: int = 4, classes: int = 10):
        super().__init__()
        self.layers = nn.HybridSequential()
        for _ in range(layers):
            self.layers.add(TransformerBlock(units, heads))
        self.output = nn.Dense(classes, in_units=units)

    def forward(self, x):
        return self.output(jnp.mean(self.layers(x), axis=1))


def resnet18():
    return hybrid.model_zoo.get_model("resnet18_v1", classes=10, stem="cifar")


# name: (title, model, input shape without the batch axis, batch, repeated blocks, why the chain is shorter or absent)
REMAT_MODELS = {
    "mlp48": ("48-layer MLP (width 256, batch 4096)", deep_mlp, (256,), 4096, 48, ""),
    "resnet18": ("ResNet-18 v1 (model zoo, CIFAR stem, batch 32 of 3x32x32)", resnet18, (3, 32, 32), 32, 8,
                 "each stage has 2 BasicBlocks and the first one of stages 2-4 differs from the second (stride-2 "
                 "3x3 convolution, 1x1 projection shortcut), so at most 2 consecutive blocks are alike; a chain "
                 "needs 3"),
    "transformer": ("transformer encoder (8 TransformerBlocks, width 256, 4 heads, batch 16 x 128 tokens)",
                    Encoder, (128, 256), 16, 8, ""),
}


def remat_scan_bytes(entry) -> int:
    """Bytes of the per-layer parameters that the graph's ``remat_scan`` nodes stack across layers."""
    total = 0
    for node in entry.graph.nodes:
        if node.kind == "remat_scan":
            total += sum(v.nbytes for v in node.inputs[1 + node.attrs["shared"]:])
    return total


def breakdown(net, compiled, entry, x, y) -> dict:
    """XLA's figure split by what the parameter sizes account for: arguments (weights, momentum,
    non-trainable states such as BatchNorm statistics, batch, anything else), outputs not aliased to an
    argument, and temporaries (gradients, the stacked weights and their stacked gradients, the rest:
    activations and working buffers)."""
    m = compiled.memory_analysis()
    params = list(net.collect_params().values())
    weights = sum(p.data().nbytes for p in params if p.grad_req != "null")
    states = sum(p.data().nbytes for p in params if p.grad_req == "null")
    batch = x.nbytes + y.nbytes
    stacked = 2 * remat_scan_bytes(entry)
    return {"args_mb": m.argument_size_in_bytes / MB, "weights_mb": weights / MB, "momentum_mb": weights / MB,
            "states_mb": states / MB, "batch_mb": batch / MB,
            "other_args_mb": (m.argument_size_in_bytes - 2 * weights - states - batch) / MB,
            "new_outputs_mb": (m.output_size_in_bytes - m.alias_size_in_bytes) / MB,
            "temp_mb": m.temp_size_in_bytes / MB, "grads_mb": weights / MB, "stacked_mb": stacked / MB,
            "rest_mb": (m.temp_size_in_bytes - weights - stacked) / MB}


def chain_text(entry) -> str:
    stat = next((s for s in entry.pass_stats if s.name == "remat"), None)
    if stat is None:
        return "-"
    chains = stat.details.get("chains", 0)
    if not chains:
        return "no chain"
    return f"{chains} chain{'s' if chains > 1 else ''}, {stat.details['layers']} layers"


def remat_rows(make, shape: tuple, batch: int, repeats: int) -> list[dict]:
    """One row per remat setting (None, 'sqrt', 'auto') for the model ``make()`` on a random batch."""
    rng = np.random.default_rng(0)
    x = jnp.asarray(rng.standard_normal((batch,) + shape).astype(np.float32))
    y = jnp.asarray(rng.integers(0, 10, batch).astype(np.int32))
    rows, steps = [], {}
    for remat in (None, "sqrt", "auto"):
        hybrid.random.seed(0)
        net = make()
        net.initialize()
        with autograd.pause():
            net(x[:2])
        net.hybridize(remat=remat)
        step, _ = compiled_sgd_step(net)
        start = time.perf_counter()
        jax.block_until_ready(step(x, y))  # traces, plans, compiles and runs
        first_call = time.perf_counter() - start
        compiled = step_executable(step, x, y)
        steps[remat] = step
        entry = next(iter(net._cached_op.entries.values()))
        rows.append({"remat": str(remat), "chains": chain_text(entry),
                     "plan": entry.remat_plan.describe() if entry.remat_plan else "-",
                     "xla_mb": xla_bytes(compiled) / MB, "first_call_s": first_call,
                     **breakdown(net, compiled, entry, x, y)})
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


def remat_section(models: list[str], repeats: int) -> dict[str, list[dict]]:
    """Print and return the remat table and the memory breakdown of each model in ``models``."""
    results = {}
    for name in models:
        title, make, shape, batch, layers, why = REMAT_MODELS[name]
        start = time.perf_counter()
        rows = remat_rows(make, shape, batch, repeats)
        results[name] = rows
        print(f"\n{title}, training step (hybrid.compile, SGD momentum)")
        print(table(rows, [("remat", "remat"), ("chains", "chains found"), ("plan", "plan"), ("xla_mb", "XLA MB"),
                           ("memory_reduction", "memory /"), ("step_s", "step s"), ("time_ratio", "time x"),
                           ("first_call_s", "first call s")]))
        found = rows[1]["chains"]
        if why and (found == "no chain" or not found.endswith(f" {layers} layers")):
            print(f"{found}: {why}")
        print("memory breakdown, MB: arguments = weights + momentum + BatchNorm statistics + batch (+ other); "
              "temp = gradients + stacked weights and gradients + rest (activations, working buffers)")
        print(table(rows, [("remat", "remat"), ("xla_mb", "XLA"), ("args_mb", "arguments"), ("weights_mb", "weights"),
                           ("momentum_mb", "momentum"), ("states_mb", "BN stats"), ("batch_mb", "batch"),
                           ("other_args_mb", "other"), ("new_outputs_mb", "outputs not aliased"),
                           ("temp_mb", "temp"), ("grads_mb", "gradients"), ("stacked_mb", "stacked"),
                           ("rest_mb", "rest of temp")]))
        print(f"({time.perf_counter() - start:.0f} s)", flush=True)
    return results


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
    (programs,) = trainer._programs.values()
    update = programs[0]  # the variant donating the weights and the states
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
    parser.add_argument("--models", type=str, default=",".join(REMAT_MODELS),
                        help=f"comma-separated models of the remat section, of: {', '.join(REMAT_MODELS)}")
    parser.add_argument("--repeats", type=int, default=9)
    parser.add_argument("--json", type=str, default=None)
    args = parser.parse_args()
    models = [m.strip() for m in args.models.split(",") if m.strip()]
    unknown = [m for m in models if m not in REMAT_MODELS]
    if unknown:
        parser.error(f"--models: unknown {', '.join(unknown)}; expected some of {', '.join(REMAT_MODELS)}")
    print(f"jax {jax.__version__} on {jax.devices()[0].platform}")
    remat = remat_section(models, args.repeats)
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
