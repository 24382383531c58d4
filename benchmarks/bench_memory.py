"""Training memory with and without rematerialisation, measured side by side in one run.

    python benchmarks/bench_memory.py [--models resnet50,resnet152,transformer24,mlp48]
                                      [--steps loop,compiled] [--repeats 5] [--budgets mlp48,transformer24]
                                      [--json out.json]
    python benchmarks/bench_memory.py --gpu          # ResNet-50, batch 128, bfloat16, on the accelerator

1. For every model and step kind (the Gluon loop: ``record`` / ``backward`` / ``trainer.step``, and
   ``hybrid.compile`` of the same step; SGD with momentum), one worker process per ``remat`` setting
   (None, ``'sqrt'``, ``'auto'``) builds the network, times its first step (trace, plan, compile, run),
   and reports XLA's figures for the step's program (``hybrid.memory_report()``): the step's memory,
   and the activation memory: XLA's temporaries, the step's memory beyond what it reads (weights,
   optimizer states, batch) and returns (new weights and states over the old ones, kept gradients). The workers then time their steps
   in interleaved rounds (medians), and report the transient memory of a steady step: the process's
   peak RSS during two steps after the warm-up, above its RSS at rest between steps (freed heap, e.g.
   of compiling, handed back to the system with ``malloc_trim`` first); and how much memory training
   keeps between steps above the built network (optimizer states, gradients, programs).
2. Byte budgets (``--budgets``): for budgets of 50% and 30% of the un-rematerialised training memory of
   the network (XLA's figure for its forward and backward pass), the plan ``hybridize(remat=budget)``
   chooses, and the other plans tried (``'sqrt'``, ``'auto'``, ``RematPlan(k)``): each one's XLA figure
   and step time, interleaved in one process; the chosen plan should fit and be the fastest that fits.
3. ``--gpu``: ResNet-50 v1 at batch 128 in bfloat16 (``amp.init('bfloat16')``), without remat and with
   ``'auto'``: XLA's figures, the device's peak, images per second, and the largest batch that fits (XLA's
   figure at batches 128 and 256 extrapolated to the device's memory, then run in a fresh process).
"""
from __future__ import annotations

import argparse
import ctypes
import json
import os
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.common import sgd_step, table  # noqa: E402

MB = 2 ** 20
SPECS = ("none", "sqrt", "auto")


# -- models -------------------------------------------------------------------------------------
def build_model(name: str, batch: int | None = None):
    """(network, input batch, labels) of a benchmark model; ``batch`` overrides the default batch."""
    import jax.numpy as jnp
    import numpy as np

    import hybrid
    from hybrid import nn

    rng = np.random.default_rng(0)
    if name.startswith("resnet"):
        depth = int(name[len("resnet"):])
        batch = batch or 8
        net = hybrid.model_zoo.get_model(f"resnet{depth}_v1", classes=10)
        x = rng.standard_normal((batch, 3, 224, 224)).astype(np.float32)
    elif name.startswith("transformer"):
        layers = int(name[len("transformer"):])
        batch = batch or 4
        net = hybrid.model_zoo.transformer.TransformerClassifier(
            vocab_size=1000, classes=10, units=512, hidden_size=2048, num_heads=8, num_layers=layers, max_length=256)
        x = rng.integers(0, 1000, (batch, 256)).astype(np.int32)
    elif name.startswith("mlp"):
        layers = int(name[len("mlp"):])
        batch, width = batch or 4096, 256
        net = nn.HybridSequential()
        for _ in range(layers):
            net.add(nn.Dense(width, activation="relu"))
        net.add(nn.Dense(10))
        x = rng.standard_normal((batch, width)).astype(np.float32)
    else:
        raise ValueError(f"unknown model {name!r}")
    y = rng.integers(0, 10, batch).astype(np.int32)
    return net, jnp.asarray(x), jnp.asarray(y)


def parse_remat(text: str):
    import hybrid
    if text == "none":
        return None
    if text.startswith("segments="):
        return hybrid.RematPlan(int(text.split("=")[1]))
    return int(text) if text.isdigit() else text


def training_step(net, x, y, compiled: bool):
    """One SGD-momentum step of ``net`` on (x, y), as a function of nothing returning the loss."""
    step, _ = sgd_step(net, compiled)
    return lambda: step(x, y)


# -- one worker per (model, remat, step kind) -------------------------------------------------
def rss_mb() -> tuple[float, float]:
    """(current RSS, RSS high-water mark) of this process in MiB."""
    text = Path("/proc/self/status").read_text()
    return tuple(int(re.search(name + r":\s+(\d+)", text).group(1)) / 1024 for name in ("VmRSS", "VmHWM"))


def trimmed_rss_mb() -> float:
    """The RSS after freed heap memory is handed back to the system."""
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except OSError:
        pass
    return rss_mb()[0]


def reset_peak_rss() -> None:
    Path("/proc/self/clear_refs").write_text("5")


class Case:
    """A built network and its step, answering the runner's requests."""

    def __init__(self, model: str, remat: str, compiled: bool, batch: int | None, bfloat16: bool = False):
        import jax

        import hybrid
        from hybrid import autograd

        if bfloat16:
            hybrid.amp.init("bfloat16")
        self.net, x, y = build_model(model, batch)
        self.net.initialize()
        with autograd.pause():
            self.net(x[:1])
        self.net.hybridize(remat=parse_remat(remat))
        self.built_rss = trimmed_rss_mb()
        self.step = training_step(self.net, x, y, compiled)
        start = time.perf_counter()
        jax.block_until_ready(self.step())
        self.first_call = time.perf_counter() - start
        self.batch = x.shape[0]

    def built(self) -> dict:
        import jax

        import hybrid
        jax.block_until_ready(self.step())  # the second step: optimizer states exist from now on
        hybrid.reset_memory_report()
        jax.block_until_ready(self.step())
        report = hybrid.memory_report()
        program = report.programs[0]
        entry = next(iter(self.net._cached_op.entries.values()))
        stat = next((s for s in entry.pass_stats if s.name == "remat"), None)
        details = stat.details if stat else {}
        return {"first_call_s": self.first_call, "plan": details.get("plan", "-"),
                "planning_s": details.get("planning_seconds", 0.0), "xla_mb": program.total / MB,
                "arguments_mb": program.arguments / MB, "temporaries_mb": program.temporaries / MB,
                "activation_mb": program.temporaries / MB, "programs": len(report.programs),
                "device_peak_mb": None if report.device_peak_bytes is None else report.device_peak_bytes / MB}

    def time_step(self) -> float:
        import jax
        start = time.perf_counter()
        jax.block_until_ready(self.step())
        return time.perf_counter() - start

    def transient(self) -> dict:
        """The peak RSS of two steady steps above the RSS at rest between steps (``transient_mb``), and how
        much that rest is above the built network before its first step (``kept_mb``: optimizer states,
        gradients, compiled programs)."""
        import jax
        rest = trimmed_rss_mb()  # freed heap (e.g. of compiling) handed back first
        reset_peak_rss()
        for _ in range(2):
            jax.block_until_ready(self.step())
        return {"transient_mb": rss_mb()[1] - rest, "kept_mb": rest - self.built_rss}


def worker_main() -> None:
    """Serve JSON requests on stdin: build, then time / transient; one reply line each."""
    case = None
    for line in sys.stdin:
        request = json.loads(line)
        try:
            if request["do"] == "build":
                case = Case(request["model"], request["remat"], request["compiled"], request.get("batch"),
                            request.get("bfloat16", False))
                reply = case.built()
            elif request["do"] == "time":
                reply = {"seconds": case.time_step()}
            elif request["do"] == "transient":
                reply = case.transient()
            else:
                reply = {"error": f"unknown request {request}"}
        except Exception as exc:  # reported to the runner, which prints it
            reply = {"error": f"{type(exc).__name__}: {exc}"[:2000]}
        print(json.dumps(reply), flush=True)


class Worker:
    def __init__(self):
        env = dict(os.environ, PYTHONPATH=str(ROOT))
        self.proc = subprocess.Popen([sys.executable, __file__, "--worker"], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True, env=env, cwd=ROOT)

    def ask(self, **request) -> dict:
        self.proc.stdin.write(json.dumps(request) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"worker ended (exit code {self.proc.wait()}) on {request}")
        reply = json.loads(line)
        if "error" in reply:
            raise RuntimeError(f"{request}: {reply['error']}")
        return reply

    def close(self) -> None:
        self.proc.stdin.close()
        self.proc.wait()


def remat_rows(model: str, compiled: bool, repeats: int, batch: int | None = None, specs=SPECS,
               bfloat16: bool = False) -> list[dict]:
    """One row per remat setting: XLA's figures, first call, interleaved step-time medians, transient RSS."""
    workers = {spec: Worker() for spec in specs}
    try:
        rows = {}
        for spec, worker in workers.items():  # first calls one after another: compile time undisturbed
            rows[spec] = dict(remat=spec, **worker.ask(do="build", model=model, remat=spec, compiled=compiled,
                                                       batch=batch, bfloat16=bfloat16))
        times = {spec: [] for spec in workers}
        for _ in range(repeats):
            for spec, worker in workers.items():
                times[spec].append(worker.ask(do="time")["seconds"])
        for spec, worker in workers.items():
            rows[spec]["step_s"] = statistics.median(times[spec])
            rows[spec].update(worker.ask(do="transient"))
    finally:
        for worker in workers.values():
            worker.close()
    base = rows[specs[0]]
    for row in rows.values():
        row["activation_x"] = base["activation_mb"] / row["activation_mb"]
        row["transient_x"] = base["transient_mb"] / max(row["transient_mb"], 1e-9)
        row["time_x"] = row["step_s"] / base["step_s"]
        row["first_call_x"] = row["first_call_s"] / base["first_call_s"]
        row["images_per_s"] = (batch or 0) / row["step_s"] if batch else None
    return list(rows.values())


REMAT_COLUMNS = [("remat", "remat"), ("plan", "plan"), ("xla_mb", "step MiB"), ("activation_mb", "activation MiB"),
                 ("activation_x", "activation /"), ("transient_mb", "transient MiB"), ("transient_x", "transient /"),
                 ("kept_mb", "kept between steps MiB"),
                 ("step_s", "step s"), ("time_x", "time x"), ("first_call_s", "first call s"),
                 ("first_call_x", "first call x"), ("planning_s", "planning s")]


# -- byte budgets --------------------------------------------------------------------------------
def budget_rows(model: str, fractions=(0.5, 0.3), repeats: int = 5, batch: int | None = None) -> list[dict]:
    """For each budget: the chosen plan and every plan tried, with XLA's training-memory figure and the
    step time (interleaved medians, one process)."""
    import jax

    import hybrid
    from hybrid import autograd

    def built(remat):
        net, x, y = build_model(model, batch)
        hybrid.random.seed(0)
        net.initialize()
        with autograd.pause():
            net(x[:1])
        net.hybridize(remat=remat)
        step = training_step(net, x, y, compiled=False)
        jax.block_until_ready(step())
        entry = next(iter(net._cached_op.entries.values()))
        return step, entry

    _, plain = built(None)
    baseline = plain.training_memory(plain.graph)
    tried = {"sqrt": "sqrt", "auto": "auto", **{f"segments={k}": hybrid.RematPlan(k) for k in (2, 3, 4, 6, 8, 12, 16)}}
    steps, memory, chosen = {}, {}, {}
    for name, spec in tried.items():
        steps[name], entry = built(spec)
        memory[name] = entry.training_memory(entry.train_graph)
    for fraction in fractions:
        budget = int(fraction * baseline)
        name = f"budget {fraction:.0%}"
        start = time.perf_counter()
        steps[name], entry = built(budget)
        chosen[name] = (budget, time.perf_counter() - start)
        memory[name] = entry.training_memory(entry.train_graph)
    times = {name: [] for name in steps}
    for _ in range(repeats):
        for name, step in steps.items():
            start = time.perf_counter()
            jax.block_until_ready(step())
            times[name].append(time.perf_counter() - start)
    medians = {name: statistics.median(t) for name, t in times.items()}
    rows = []
    for name, (budget, seconds) in chosen.items():
        fits = {n: medians[n] for n in tried if memory[n] <= budget}
        fastest = min(fits, key=fits.get) if fits else None
        rows.append({"model": model, "budget": name, "budget_mb": budget / MB, "xla_mb": memory[name] / MB,
                     "fits": memory[name] <= budget, "step_s": medians[name], "first_call_s": seconds,
                     "fitting_tried": len(fits), "fastest_tried": fastest or "-",
                     "fastest_tried_s": fits[fastest] if fastest else None,
                     "vs_fastest": medians[name] / fits[fastest] if fastest else None,
                     "least_tried_mb": min(memory[n] for n in tried) / MB})
    for name in tried:
        rows.append({"model": model, "budget": f"(tried) {name}", "xla_mb": memory[name] / MB, "step_s": medians[name]})
    rows.insert(0, {"model": model, "budget": "(none)", "xla_mb": baseline / MB, "step_s": None})
    return rows


BUDGET_COLUMNS = [("model", "model"), ("budget", "plan"), ("budget_mb", "budget MiB"), ("xla_mb", "XLA MiB"),
                  ("fits", "fits"), ("step_s", "step s"), ("first_call_s", "first call s"),
                  ("fitting_tried", "tried plans that fit"), ("fastest_tried", "fastest of them"),
                  ("vs_fastest", "time / fastest")]


# -- accelerator ----------------------------------------------------------------------------------
def fits(model: str, batch: int, remat: str) -> bool:
    """Whether one bfloat16 training step of ``model`` at ``batch`` runs, in a fresh process."""
    script = (f"import sys; sys.path.insert(0, {str(ROOT)!r}); from benchmarks.bench_memory import Case; "
              f"Case({model!r}, {remat!r}, False, {batch}, bfloat16=True)")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT)
    return done.returncode == 0


def largest_batch(model: str, remat: str, figures: dict[int, float], limit_mb: float) -> int:
    """The largest batch whose step runs: XLA's step memory at two batches, extrapolated linearly to the
    device's memory, then checked by running it (backing off by 10% up to three times)."""
    (small, low), (large, high) = sorted(figures.items())
    per_sample = (high - low) / (large - small)
    batch = int(large + 0.95 * (limit_mb - high) / per_sample)
    for _ in range(3):
        if fits(model, batch, remat):
            return batch
        batch = int(batch * 0.9)
    return 0


def gpu_section(repeats: int) -> list[dict]:
    """ResNet-50 at batch 128 in bfloat16, without remat and with 'auto': figures, images/s, largest batch."""
    import jax
    rows = remat_rows("resnet50", False, repeats, batch=128, specs=("none", "auto"), bfloat16=True)
    limit_mb = jax.devices()[0].memory_stats()["bytes_limit"] / MB
    for row in rows:
        worker = Worker()
        try:
            at_256 = worker.ask(do="build", model="resnet50", remat=row["remat"], compiled=False, batch=256,
                                bfloat16=True)["xla_mb"]
        finally:
            worker.close()
        row["largest_batch"] = largest_batch("resnet50", row["remat"], {128: row["xla_mb"], 256: at_256}, limit_mb)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", default="resnet50,resnet152,transformer24,mlp48")
    parser.add_argument("--steps", default="loop,compiled", help="loop, compiled or both")
    parser.add_argument("--batch", type=int, default=None, help="override every model's batch")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--budgets", default="mlp48,transformer24", help="models of the budget section ('' for none)")
    parser.add_argument("--budget-fractions", default="0.5,0.3",
                        help="budgets as fractions of the un-rematerialised training memory")
    parser.add_argument("--gpu", action="store_true", help="only the accelerator section")
    parser.add_argument("--json", default=None)
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        return worker_main()
    import jax
    print(f"jax {jax.__version__} on {jax.devices()[0].device_kind} ({jax.devices()[0].platform})", flush=True)
    results: dict = {}
    if args.gpu:
        results["gpu"] = rows = gpu_section(args.repeats)
        print("\nResNet-50 v1, batch 128, bfloat16, Gluon loop")
        print(table(rows, REMAT_COLUMNS + [("images_per_s", "images/s"), ("device_peak_mb", "device peak MiB"),
                                           ("largest_batch", "largest batch")]))
    else:
        for model in filter(None, args.models.split(",")):
            for kind in filter(None, args.steps.split(",")):
                start = time.perf_counter()
                rows = remat_rows(model, kind == "compiled", args.repeats, args.batch)
                results[f"{model}-{kind}"] = rows
                print(f"\n{model}, {'hybrid.compile' if kind == 'compiled' else 'Gluon loop'} "
                      f"({time.perf_counter() - start:.0f} s)")
                print(table(rows, REMAT_COLUMNS), flush=True)
        for model in filter(None, args.budgets.split(",")):
            fractions = [float(f) for f in args.budget_fractions.split(",")]
            rows = budget_rows(model, fractions, repeats=args.repeats, batch=args.batch)
            results[f"{model}-budgets"] = rows
            print(f"\n{model}: byte budgets on the training memory (forward and backward)")
            print(table(rows, BUDGET_COLUMNS), flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2, default=str))


if __name__ == "__main__":
    main()
