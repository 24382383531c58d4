"""The benchmark suite: every model as train step and inference, in every framework, in ONE run.

    python benchmarks/run_suite.py [--models mlp33 cnn] [--frameworks hybrid_eager jax_handwritten]
                                   [--repeats 15] [--budget 90] [--quick] [--out benchmarks/results/suite-cpu]

For each model, one worker process per framework (benchmarks/suite/worker.py) builds the model from the
shared canonical parameters; MXNet workers run on the MXNet virtual environment's interpreter. The runner
times the first call of every worker one after another (compile time, undisturbed), then takes timed
samples round-robin over the workers (interleaved, so load changes on a shared machine hit every framework
alike) and reports per-call medians, the ratio to hand-written JAX, the first-call time, the process RSS
high-water marks, and the first train-step losses next to hand-written JAX's (a check that the models
really are the same). Writes <out>.json, <out>.txt and, where matplotlib is available, <out>.png.
Set up the peers first with benchmarks/setup_peers.sh; missing frameworks are reported, never fatal.
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import select
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.common import table  # noqa: E402
from benchmarks.suite import FRAMEWORKS, LIMIT  # noqa: E402
from benchmarks.suite.spec import DEFAULT_BATCH, MODELS  # noqa: E402

VENVS = ROOT / "benchmarks" / ".venvs"
MODES = ("train", "infer")
LOSS_STEPS = 3  # train losses compared with the limit's: the first call and two warm-up calls
REPLY_TIMEOUT_S = 900


def interpreter(framework: str) -> str | None:
    """The Python that runs ``framework``: the MXNet venv for MXNet, else the peers venv or this one.
    HYBRID_BENCH_PYTHON / HYBRID_BENCH_MXNET_PYTHON override; None when the MXNet venv is missing."""
    if framework.startswith("mxnet"):
        python = os.environ.get("HYBRID_BENCH_MXNET_PYTHON") or VENVS / "mxnet" / "bin" / "python"
        return str(python) if Path(python).exists() else None
    python = os.environ.get("HYBRID_BENCH_PYTHON") or VENVS / "peers" / "bin" / "python"
    return str(python) if Path(python).exists() else sys.executable


class WorkerProcess:
    """A running worker; ``ask`` sends one request and waits for its JSON reply."""

    def __init__(self, framework: str, python: str, cpus: int):
        self.framework = framework
        self.log = tempfile.TemporaryFile(mode="w+")
        env = dict(os.environ, PYTHONPATH=str(ROOT), HYBRID_BENCH_CPUS=str(cpus))
        if cpus > 0:
            env.update({name: str(cpus) for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")})
        self.proc = subprocess.Popen([python, "-m", "benchmarks.suite.worker", framework], cwd=ROOT, env=env,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log, text=True)

    def ask(self, cmd: str, **args) -> dict:
        try:
            self.proc.stdin.write(json.dumps(dict(cmd=cmd, **args)) + "\n")
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError):
            return self._died()
        ready, _, _ = select.select([self.proc.stdout], [], [], REPLY_TIMEOUT_S)
        line = self.proc.stdout.readline() if ready else ""
        if not line:
            return self._died("no reply within %d s" % REPLY_TIMEOUT_S if not ready else None)
        return json.loads(line)

    def _died(self, why: str | None = None) -> dict:
        self.close()
        self.log.seek(0)
        tail = self.log.read()[-800:].strip()
        return {"status": "error", "reason": (why or "worker exited (code %s)" % self.proc.returncode)
                + (": " + tail if tail else "")}

    def close(self) -> None:
        if self.proc.poll() is None:
            try:
                self.proc.stdin.write('{"cmd": "exit"}\n')
                self.proc.stdin.flush()
                self.proc.wait(timeout=30)
            except (OSError, subprocess.TimeoutExpired):
                self.proc.kill()
                self.proc.wait()


def start_workers(model: str, batch: int, frameworks: list[str], rows: dict, cpus: int) -> dict[str, WorkerProcess]:
    """One worker per framework with ``model`` built; failures go straight into ``rows``."""
    workers = {}
    for framework in frameworks:
        python = interpreter(framework)
        base = {"model": model, "framework": framework, "batch": batch}
        if python is None:
            for mode in MODES:
                rows[(model, mode, framework)] = dict(base, mode=mode, status="not installed",
                                                      reason="no MXNet venv: run benchmarks/setup_peers.sh")
            continue
        worker = WorkerProcess(framework, python, cpus)
        reply = worker.ask("build", model=model, batch=batch)
        for mode in MODES:
            rows[(model, mode, framework)] = dict(base, mode=mode, **reply)
        if reply.get("status") == "ok":
            workers[framework] = worker
        else:
            worker.close()
        print("  %-24s %s" % (framework, reply.get("status") if reply.get("status") != "ok"
                                else "built in %.2f s" % reply["build_s"]), flush=True)
    return workers


def measure_mode(model: str, mode: str, workers: dict, rows: dict, repeats: int, budget: float,
                 sample_s: float) -> None:
    """First calls one worker at a time, then interleaved timed samples, then peak memory."""
    inner, samples, losses = {}, {}, {}
    for framework, worker in list(workers.items()):
        row = rows[(model, mode, framework)]
        first = worker.ask("first", mode=mode)
        warm = worker.ask("warmup", mode=mode, n=LOSS_STEPS - 1 if mode == "train" else 2) \
            if first.get("status") != "error" else first
        if warm.get("status") == "error":
            row.update(status="error", reason=warm["reason"])
            continue
        row.update(first_s=first["first_s"], first_peak_mb=first["first_peak_mb"])
        losses[framework] = ([first["loss"]] + warm["losses"]) if mode == "train" else []
        estimate = max(min(warm["times"]), 1e-6)
        inner[framework] = max(1, min(200, round(sample_s / estimate)))
        samples[framework] = []
        worker.ask("memory", reset=True)
    active = list(samples)
    start = time.perf_counter()
    for r in range(repeats):
        order = active[r % len(active):] + active[:r % len(active)] if active else []
        for framework in order:
            reply = workers[framework].ask("time", mode=mode, n=inner[framework])
            if reply.get("status") == "error":
                rows[(model, mode, framework)].update(status="error", reason=reply["reason"])
                active.remove(framework)
                continue
            samples[framework].append(reply["seconds"])
            if mode == "train":
                rows[(model, mode, framework)]["last_loss"] = reply["loss"]
        if r >= 2 and time.perf_counter() - start > budget:
            break
    for framework in active:
        row = rows[(model, mode, framework)]
        memory = workers[framework].ask("memory")
        times = samples[framework]
        row.update(median_ms=statistics.median(times) * 1e3, min_ms=min(times) * 1e3, samples=len(times),
                   calls_per_sample=inner[framework], peak_mb=memory.get("peak_mb"),
                   peak_above_import_mb=_minus(memory.get("peak_mb"), row.get("rss_import_mb")),
                   losses=losses[framework])
    limit = rows.get((model, mode, LIMIT), {})
    for framework in active:
        row = rows[(model, mode, framework)]
        if "median_ms" in limit:
            row["ratio"] = row["median_ms"] / limit["median_ms"]
        if mode == "train" and limit.get("losses"):
            diffs = [abs(a - b) / max(abs(b), 1e-6) for a, b in zip(row["losses"], limit["losses"])]
            row["loss_rel_diff"] = max(diffs)


def _minus(a, b):
    return None if a is None or b is None else round(a - b, 1)


def run(models: list[str], frameworks: list[str], repeats: int, budget: float, sample_s: float,
        batches: dict, cpus: int) -> dict:
    rows: dict = {}
    for model in models:
        print("%s (batch %d): %s" % (model, batches[model], MODELS[model]), flush=True)
        workers = start_workers(model, batches[model], frameworks, rows, cpus)
        try:
            for mode in MODES:
                measure_mode(model, mode, workers, rows, repeats, budget, sample_s)
                done = [f for f in frameworks if "median_ms" in rows[(model, mode, f)]]
                print("  %s: measured %d framework(s)" % (mode, len(done)), flush=True)
        finally:
            for worker in workers.values():
                worker.close()
    return {"rows": list(rows.values())}


def render(rows: list[dict]) -> str:
    """The results as a text table, one row per model, mode and framework."""
    shown = []
    for row in rows:
        cells = dict(row)
        if "median_ms" not in row:
            cells["median_ms"] = row.get("status", "?")
            if row.get("status") == "ok":
                cells["median_ms"] = "error"
        cells["peak"] = "" if row.get("peak_mb") is None else "%.0f (+%.0f)" % (
            row["peak_mb"], row.get("peak_above_import_mb") or 0)
        if "loss_rel_diff" in row:
            cells["loss_check"] = "%.0e" % row["loss_rel_diff"]
        shown.append(cells)
    return table(shown, [("model", "model"), ("mode", "mode"), ("framework", "framework"),
                         ("median_ms", "median ms"), ("ratio", "x limit"), ("first_s", "first call s"),
                         ("peak", "peak RSS MB (+above import)"), ("samples", "n"),
                         ("loss_check", "loss vs limit")])


def write_chart(results_path: Path, chart_path: Path) -> str:
    """Draw the chart with any interpreter that has matplotlib: this one, else the peers venv's."""
    for python in (sys.executable, str(VENVS / "peers" / "bin" / "python")):
        if not Path(python).exists():
            continue
        done = subprocess.run([python, "-m", "benchmarks.suite.chart", str(results_path), str(chart_path)],
                              cwd=ROOT, env=dict(os.environ, PYTHONPATH=str(ROOT)), capture_output=True, text=True)
        if done.returncode == 0:
            return "chart: %s" % chart_path
    return "chart skipped (matplotlib not installed; benchmarks/setup_peers.sh installs it)"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", nargs="+", choices=list(MODELS), default=list(MODELS))
    parser.add_argument("--frameworks", nargs="+", choices=list(FRAMEWORKS), default=list(FRAMEWORKS))
    parser.add_argument("--repeats", type=int, help="interleaved timed samples per case, at most (default 15)")
    parser.add_argument("--budget", type=float, help="seconds of timed samples per model and mode, after which "
                        "sampling stops once 3 rounds are taken (default 90)")
    parser.add_argument("--sample-ms", type=float, help="target length of one timed sample (default 50)")
    parser.add_argument("--batch", action="append", default=[], metavar="MODEL=N",
                        help="override a model's batch size (repeatable)")
    parser.add_argument("--cpus", type=int, default=1,
                        help="pin every worker to this many CPUs and size OpenMP/MKL/OpenBLAS pools to match "
                             "(default 1: the same compute for every framework on a shared machine; 0: the "
                             "frameworks' own defaults, unpinned)")
    parser.add_argument("--quick", action="store_true",
                        help="smoke run: defaults of 3 rounds, 10 s budget, 10 ms samples")
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "suite-cpu"),
                        help="output path prefix for .json, .txt and .png")
    args = parser.parse_args()
    for name, (full, quick) in {"repeats": (15, 3), "budget": (90.0, 10.0), "sample_ms": (50.0, 10.0)}.items():
        if getattr(args, name) is None:
            setattr(args, name, quick if args.quick else full)
    batches = dict(DEFAULT_BATCH)
    for item in args.batch:
        name, _, value = item.partition("=")
        if name not in batches or not value.isdigit():
            parser.error("--batch expects MODEL=N with MODEL in %s, got %r" % (list(batches), item))
        batches[name] = int(value)
    frameworks = list(dict.fromkeys(args.frameworks + ([LIMIT] if LIMIT not in args.frameworks else [])))
    meta = {"date": datetime.datetime.now().isoformat(timespec="seconds"), "host": platform.node(),
            "platform": platform.platform(), "cpus": os.cpu_count(), "loadavg_start": os.getloadavg(),
            "cpus_per_worker": args.cpus, "repeats": args.repeats, "budget_s": args.budget,
            "sample_ms": args.sample_ms, "batches": batches}
    print("benchmark suite, %s, %d CPUs, load average %s" % (meta["date"], meta["cpus"],
                                                             " ".join("%.2f" % v for v in meta["loadavg_start"])))
    start = time.perf_counter()
    results = run(args.models, frameworks, args.repeats, args.budget, args.sample_ms / 1e3, batches, args.cpus)
    meta.update(loadavg_end=os.getloadavg(), wall_s=round(time.perf_counter() - start, 1))
    results["meta"] = meta
    text = render(results["rows"])
    footer = "load average at start %s, at end %s; %.0f s in all" % (
        " ".join("%.2f" % v for v in meta["loadavg_start"]), " ".join("%.2f" % v for v in meta["loadavg_end"]),
        meta["wall_s"])
    print("\n" + text + "\n" + footer)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".json").write_text(json.dumps(results, indent=1))
    out.with_suffix(".txt").write_text(text + "\n" + footer + "\n")
    print("results: %s" % out.with_suffix(".json"))
    print(write_chart(out.with_suffix(".json"), out.with_suffix(".png")))


if __name__ == "__main__":
    main()
