"""Graph passes on vs off, measured side by side in one run.

    python benchmarks/bench_passes.py [--repeats 20] [--rounds 5] [--json out.json]

1. Speed: each model hybridized twice with the same parameters, ``passes=[]`` (off) and the default
   pipeline (on); calls are interleaved and the median is reported. ``speedup = off / on``. Ablation
   rows compare other pass lists the same way (one pass alone, the default minus one pass, ...).
2. XLA's ``cost_analysis()`` bytes accessed of the compiled programs, off and on.
3. Compile cost: time of the pass pipeline against trace + XLA compile time.
4. Scale: the pipeline on a synthetic graph of about 10,000 nodes.
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
sys.path.insert(0, str(ROOT / "tests"))  # the model corpus shared with the differential tests

import hybrid  # noqa: E402
from hybrid import autograd, graph, loss, nn  # noqa: E402
from hybrid.graph import layer_ops  # noqa: E402

import corpus  # noqa: E402
from common import block, interleaved_medians, table  # noqa: E402


def small_cnn():
    """conv-BN-ReLU x3 with pooling on 64x3x32x32 (the benchmark suite's small CNN)."""
    net = nn.HybridSequential()
    for channels in (32, 64, 128):
        net.add(nn.Conv2D(channels, 3, padding=1), nn.BatchNorm(), nn.Activation("relu"), nn.MaxPool2D(2))
    net.add(nn.Dense(10))
    return net, (np.random.default_rng(0).standard_normal((64, 3, 32, 32)).astype(np.float32),)


def mobilenet_block_net():
    """Depthwise-separable blocks (3x3 depthwise conv-BN-ReLU, 1x1 conv-BN-ReLU), MobileNet style."""
    net = nn.HybridSequential()
    net.add(nn.Conv2D(32, 3, padding=1), nn.BatchNorm(), nn.Activation("relu"))
    channels = 32
    for out_channels in (64, 64, 128, 128):
        net.add(nn.Conv2D(channels, 3, padding=1, groups=channels), nn.BatchNorm(), nn.Activation("relu"),
                nn.Conv2D(out_channels, 1), nn.BatchNorm(), nn.Activation("relu"))
        channels = out_channels
    net.add(nn.GlobalAvgPool2D(), nn.Dense(10))
    return net, (np.random.default_rng(1).standard_normal((32, 3, 32, 32)).astype(np.float32),)


def transformer_block():
    """The corpus transformer block (hand-written attention) at a benchmark size."""
    block = corpus.TransformerBlock(units=128, heads=4)
    return block, (np.random.default_rng(2).standard_normal((16, 64, 128)).astype(np.float32),)


def large_classifier():
    """An MLP classifier over 8192 classes with its softmax cross-entropy inside the graph."""
    block = corpus.Classifier(classes=8192)
    rng = np.random.default_rng(3)
    return block, (rng.standard_normal((256, 64)).astype(np.float32), rng.integers(0, 8192, 256).astype(np.int32))


DEFAULT = graph.default_passes()


def without(*names: str) -> list[str]:
    return [p for p in DEFAULT if p not in names]


def with_horizontal_fusion() -> list[str]:
    return [p for p in graph.DEFAULT_PASSES if p in DEFAULT or p == "horizontal_fusion"]


# name -> (model factory, mode, passes of the "off" variant, passes of the "on" variant);
# ``None`` is this backend's default pipeline.
MODELS = {
    "small_cnn (default passes)": (small_cnn, "infer", [], None),
    "small_cnn: bn_fold alone": (small_cnn, "infer", [], ["bn_fold"]),
    "small_cnn: bn_fold within default": (small_cnn, "infer", without("bn_fold"), None),
    "mobilenet blocks (default passes)": (mobilenet_block_net, "infer", [], None),
    "transformer block (default passes)": (transformer_block, "infer", [], None),
    "transformer block, train step": (transformer_block, "train", [], None),
    "transformer: + horizontal_fusion": (transformer_block, "infer", None, with_horizontal_fusion()),
    "classifier 8192 classes (fused CE)": (large_classifier, "infer", [], None),
    "classifier 8192 classes, train step": (large_classifier, "train", [], None),
}
MODELS.update({f"corpus: {name}": (make, "infer", [], None) for name, make in corpus.CORPUS.items()})
MODELS.update({f"corpus: {name}, train step": (make, "train", [], None) for name, make in corpus.CORPUS.items()})


def pair(make, off_passes, on_passes):
    """Two hybridized copies of a model with equal parameters, one per pass list."""
    off, inputs = make()
    on, _ = make()
    for net in (off, on):
        net.initialize(hybrid.init.Xavier())
        with autograd.pause():
            net(*inputs)
    for p, q in zip(off.collect_params().values(), on.collect_params().values()):
        q.set_data(np.asarray(p.data()))
    off.hybridize(passes=off_passes)
    on.hybridize(passes=on_passes)
    return off, on, tuple(jnp.asarray(x) for x in inputs)


def inner_calls(fn, target_s: float = 2e-3) -> int:
    """How many calls make one timing sample last about ``target_s`` (microsecond-scale models
    would otherwise be timed at the resolution of the clock and the loop)."""
    block(fn())
    start = time.perf_counter()
    block(fn())
    return max(1, int(target_s / max(time.perf_counter() - start, 1e-7)))


def step_fn(net, inputs, mode):
    if mode == "infer":
        return lambda: net(*inputs)

    def train():
        with autograd.record():
            out = net(*inputs)
        autograd.backward(out)
        return [p.grad() for p in net.collect_params().values() if p.grad_req != "null"]
    return train


def compiled_entry(net, inputs):
    """The compiled forward of the net's inference signature, a fresh XLA compile of it, and the
    seconds that compile took (lowering the graph to HLO included)."""
    with autograd.pause():
        net(*inputs)
    entry = next(e for k, e in net._cached_op.entries.items() if not k[1])
    params = [p.data() for p in entry.params]
    start = time.perf_counter()
    compiled = jax.jit(lambda *a: entry.forward(*a)).lower(params, list(inputs), ()).compile()  # new function: no cache hit
    return entry, compiled, time.perf_counter() - start


def bytes_accessed(compiled) -> float:
    analysis = compiled.cost_analysis()
    if isinstance(analysis, (list, tuple)):
        analysis = analysis[0]
    return float(analysis.get("bytes accessed", float("nan")))


def speed_section(repeats: int, rounds: int) -> list[dict]:
    rows = []
    for name, (make, mode, off_passes, on_passes) in MODELS.items():
        off, on, inputs = pair(make, off_passes, on_passes)
        fns = {"off": step_fn(off, inputs, mode), "on": step_fn(on, inputs, mode)}
        inner = inner_calls(fns["off"])
        # odd rounds run "on" first: whichever variant runs second in a pair pays for the first's frees
        orders = [fns, dict(reversed(list(fns.items())))]
        per_round = [interleaved_medians(orders[r % 2], repeats=repeats, inner=inner) for r in range(rounds)]
        ratios = sorted(m["off"] / m["on"] for m in per_round)
        row = {"model": name, "off_ms": statistics.median(m["off"] for m in per_round) * 1e3,
               "on_ms": statistics.median(m["on"] for m in per_round) * 1e3,
               "speedup": statistics.median(ratios), "spread": f"{ratios[0]:.2f}-{ratios[-1]:.2f}"}
        if mode == "infer":
            entry_off, compiled_off, _ = compiled_entry(off, inputs)
            entry_on, compiled_on, compile_s = compiled_entry(on, inputs)
            row.update(bytes_off_mb=bytes_accessed(compiled_off) / 1e6, bytes_on_mb=bytes_accessed(compiled_on) / 1e6,
                       nodes=f"{len(entry_on.traced_graph)}->{len(entry_on.graph)}",
                       passes_ms=entry_on.pass_seconds * 1e3, xla_compile_ms=compile_s * 1e3,
                       pass_share=entry_on.pass_seconds / (entry_on.pass_seconds + compile_s))
        rows.append(row)
        print(f"  measured {name}: speedup {row['speedup']:.3f}", flush=True)
    return rows


def synthetic_graph(target_nodes: int = 10_000):
    """A deep chain of dense layers with elementwise work and softmaxes (many patterns to match)."""
    layers = max(1, target_nodes // 18)

    def fn(x, *weights):
        h = x
        for w in weights:
            h = layer_ops.dense(h, w)
            h = jax.nn.relu(h * 1.0 + 0.0)
            h = jnp.tanh(h) * 0.5 + h
            h = jax.nn.softmax(h, axis=-1) * 2.0 + h
        return h

    weights = [np.ones((8, 8), np.float32)] * layers
    return graph.trace(fn, np.ones((4, 8), np.float32), *weights)


def scale_section() -> dict:
    g = synthetic_graph()
    start = time.perf_counter()
    optimised, stats = graph.run_passes(g, graph.DEFAULT_PASSES)
    seconds = time.perf_counter() - start
    return {"nodes_before": len(g), "nodes_after": len(optimised), "seconds": seconds,
            "per_pass_ms": {s.name: round(s.seconds * 1e3, 2) for s in stats}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=20, help="interleaved samples per round")
    parser.add_argument("--rounds", type=int, default=5, help="the speedup is the median of the rounds' ratios")
    parser.add_argument("--json", type=str, default=None, help="also write the results to this file")
    args = parser.parse_args()
    print(f"jax {jax.__version__} on {jax.devices()[0].platform}; {args.rounds} rounds of {args.repeats} "
          "interleaved samples; speedup = median of the rounds' ratios, spread = their range")
    rows = speed_section(args.repeats, args.rounds)
    print()
    print(table(rows, [("model", "model"), ("off_ms", "passes off ms"), ("on_ms", "passes on ms"),
                       ("speedup", "speedup"), ("spread", "spread"), ("bytes_off_mb", "MB accessed off"), ("bytes_on_mb", "MB on"),
                       ("nodes", "nodes"), ("passes_ms", "passes ms"), ("xla_compile_ms", "XLA compile ms"),
                       ("pass_share", "passes/compile")]))
    scale = scale_section()
    print(f"\n10k-node graph: {scale['nodes_before']} -> {scale['nodes_after']} nodes in {scale['seconds']:.3f} s")
    print("  per pass (ms):", scale["per_pass_ms"])
    if args.json:
        Path(args.json).write_text(json.dumps({"speed": rows, "scale": scale}, indent=2))


if __name__ == "__main__":
    main()
