"""Memory plans of training graphs: each strategy's arena against the max-live lower bound, and the
planning time on a graph of about 10,000 nodes.

    python benchmarks/bench_memory_plan.py [--json out.json] [--plot-dir DIR] [--no-xla]

1. MLP, CNN and transformer classifiers built from hybrid's layers (``tests/memory_models.py``),
   traced in training mode, forward plus backward (``hybrid.graph.memory.training_graph``).
   For each: bytes without sharing, the max-live lower bound (topological and memory-aware
   schedules), greedy-by-size and shared-objects arenas with their ratios to the bound, the exact
   arena, and for context the temporary bytes XLA allocates for the same step after its own fusion.
2. Planning time (best of 5) of ``plan_memory`` on a deep MLP training graph of ~10,000 nodes.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import jax
import jax.numpy as jnp

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))  # the models shared with the planner's tests

from hybrid.graph import layer_ops  # noqa: E402
from hybrid.graph.memory import format_bytes, plan_memory, training_graph, training_step  # noqa: E402

import memory_models  # noqa: E402
from common import table  # noqa: E402

MODELS = {
    "mlp 4x1024, batch 256": lambda: memory_models.mlp(batch=256, width=1024, depth=4, features=784),
    "cnn 32-64-128, 64x3x32x32": lambda: memory_models.cnn(batch=64, channels=(32, 64, 128), size=32),
    "transformer 4 layers, 16x128x256": lambda: memory_models.transformer(batch=16, length=128, units=256,
                                                                          heads=8, layers=4),
    "tiny mlp 1x16, batch 4": lambda: memory_models.mlp(batch=4, width=16, depth=1, features=8),
}


def xla_temp_bytes(objective, specs, names, wrt) -> int:
    """Temporary bytes of XLA's compiled program for the same training step."""
    step, step_specs, _ = training_step(objective, *specs, wrt=wrt, input_names=names)
    analysis = jax.jit(step).lower(*step_specs).compile().memory_analysis()
    return int(analysis.temp_size_in_bytes)


def model_row(name: str, make, with_xla: bool, plot_dir: str | None) -> dict:
    block, inputs = make()
    objective, specs, names, wrt = memory_models.block_objective(block, *inputs)
    graph = training_graph(objective, *specs, wrt=wrt, input_names=names)
    plan = plan_memory(graph)
    aware = plan_memory(graph, schedule="memory_aware", compare=False)
    bound = plan.max_live_bytes
    arenas = plan.arena_by_strategy
    row = {"model": name, "nodes": len(graph), "buffers": len(plan.offsets) - len(plan.inplace),
           "no_sharing": plan.no_sharing_bytes, "bound": bound, "aware_bound": aware.max_live_bytes,
           "greedy": arenas["greedy_by_size"], "greedy_ratio": arenas["greedy_by_size"] / bound,
           "shared": arenas["shared_objects"], "shared_ratio": arenas["shared_objects"] / bound,
           "exact_ratio": arenas["exact"] / bound if arenas["exact"] is not None else None}
    if with_xla:
        row["xla_temp"] = xla_temp_bytes(objective, specs, names, wrt)
    if plot_dir:
        plan.plot(str(Path(plot_dir) / f"memory_{name.split()[0]}.png"))
    return row


def deep_mlp(x, *weights):
    h = x
    for w in weights:
        h = layer_ops.activation(layer_ops.dense(h, w), act_type="relu")
        h = h * 0.5 + jnp.tanh(h)
    return jnp.sum(h ** 2)


def scale_section(target_nodes: int = 10_000, repeats: int = 5) -> dict:
    layers = target_nodes * 900 // 11_705  # 900 layers give 11,705 nodes
    weights = [jax.ShapeDtypeStruct((64, 64), jnp.float32)] * layers
    graph = training_graph(deep_mlp, jax.ShapeDtypeStruct((32, 64), jnp.float32), *weights)
    result = {"nodes": len(graph), "bound": plan_memory(graph, compare=False).max_live_bytes,
              "aware_bound": plan_memory(graph, schedule="memory_aware", compare=False).max_live_bytes}
    for label, kwargs in (("topological, greedy only", dict(compare=False)),
                          ("topological, all strategies", dict()),
                          ("memory_aware, greedy only", dict(schedule="memory_aware", compare=False))):
        times = []
        for _ in range(repeats):
            start = time.perf_counter()
            plan = plan_memory(graph, **kwargs)
            times.append(time.perf_counter() - start)
        result[label] = {"seconds": min(times), "values": len(plan.offsets),
                         "greedy_ratio": plan.arena_by_strategy["greedy_by_size"] / plan.max_live_bytes}
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--json", type=str, default=None, help="also write the results to this file")
    parser.add_argument("--plot-dir", type=str, default=None, help="write each model's memory-over-time chart here")
    parser.add_argument("--no-xla", action="store_true", help="skip compiling the steps with XLA")
    args = parser.parse_args()
    print(f"jax {jax.__version__} on {jax.devices()[0].platform}")
    rows = [model_row(name, make, not args.no_xla, args.plot_dir) for name, make in MODELS.items()]
    sizes = ("no_sharing", "bound", "aware_bound", "greedy", "shared", "xla_temp")
    shown = [{k: format_bytes(v) if k in sizes else ("n/a" if v is None else v) for k, v in row.items()}
             for row in rows]
    columns = [("model", "model"), ("nodes", "nodes"), ("buffers", "buffers"), ("no_sharing", "no sharing"),
               ("bound", "bound"), ("aware_bound", "bound, memory-aware"), ("greedy", "greedy-by-size"),
               ("greedy_ratio", "/bound"), ("shared", "shared objects"), ("shared_ratio", "/bound"),
               ("exact_ratio", "exact/bound")]
    if not args.no_xla:
        columns.append(("xla_temp", "XLA temp"))
    print(table(shown, columns))
    scale = scale_section()
    print(f"\nplanning a {scale['nodes']}-node training graph (bound {format_bytes(scale['bound'])}, "
          f"memory-aware {format_bytes(scale['aware_bound'])}), best of 5:")
    for label, entry in scale.items():
        if isinstance(entry, dict):
            print(f"  {label:<30} {entry['seconds']:.3f} s  ({entry['values']} values, "
                  f"greedy/bound {entry['greedy_ratio']:.3f})")
    if args.json:
        Path(args.json).write_text(json.dumps({"models": rows, "scale": scale}, indent=2))


if __name__ == "__main__":
    main()
