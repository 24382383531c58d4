"""The one entry point of the benchmarks: list them, run one or all, and keep one results file per
benchmark and machine in ``benchmarks/results/``, overwritten in place (git keeps the history).

    python3 benchmarks/run.py --list                 # every benchmark: what it measures, targets, results file
    python3 benchmarks/run.py recorded-step          # run it with its recorded arguments, write its results file
    python3 benchmarks/run.py recorded-step -- --rounds 3   # extra arguments go to the script
    python3 benchmarks/run.py fit --no-write         # print only
    python3 benchmarks/run.py --all                  # every benchmark this machine can run, one after another
    python3 benchmarks/run.py --show recorded-step   # print the current results file

The machine is ``cpu`` when JAX's default device is a CPU (the project's figures come from a 2-core x86-64
machine) and ``gpu-<model>`` on an accelerator (``gpu-h100``); ``--machine NAME`` overrides it. A results
file starts with a line naming the command, the machine, the date, jax's version, the load average and the
commit measured. Scripts run with hybrid's persistent compilation cache off (``HYBRID_COMPILATION_CACHE=0``)
unless the environment sets it, so that first calls are compiled (``first-step`` manages its own caches).
Exit status: the script's, or 2 for an unknown benchmark or one this machine cannot run.
"""
from __future__ import annotations

import argparse
import datetime
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
MXNET_PYTHON = Path("/work/mxnet-env/bin/python")


@dataclass(frozen=True)
class Benchmark:
    """One benchmark. ``results`` is the results file's name with ``{machine}`` in it (or a fixed name for a
    check whose outcome does not depend on the machine, or "" when nothing is kept); ``writes`` says who
    writes it: ``"stdout"`` (this runner, from the script's output), ``"out"`` (the script, given
    ``--out <results>``: its report without progress lines), ``"prefix"`` (the script, given
    ``--out <results without extension>``) or ``"script"`` (the script, at a path of its own). This runner
    puts its provenance line first in all but the last."""
    name: str
    script: str
    measures: str
    targets: str = ""
    results: str = "{name}-{machine}.txt"
    args: tuple[str, ...] = ()
    writes: str = "stdout"
    gpu_args: tuple[str, ...] | None = None  # arguments on an accelerator, when they differ

    def results_name(self, machine: str) -> str:
        return self.results.format(name=self.name, machine=machine)


SUITE_LOOP = ("--frameworks", "jax_handwritten", "jax_handwritten_oihw", "hybrid_eager", "hybrid_hybridized",
              "hybrid_compiled", "hybrid_gluon_loop", "hybrid_mean_head", "--quick", "--repeats", "31")

BENCHMARKS = {b.name: b for b in [
    Benchmark("suite", "run_suite.py",
              "five models (mlp33, mlp784, cnn, resnet18, transformer) as train step and inference in hybrid "
              "and its peers (hand-written JAX, Flax NNX, Equinox, PyTorch, MXNet), one worker process each",
              results="{name}-{machine}.txt", writes="prefix"),
    Benchmark("suite-recorded", "run_suite.py",
              "the same five models in hybrid's loops only (eager, hybridized, Gluon loop, l.mean() head, "
              "hybrid.compile) against hand-written JAX with HWIO and with OIHW kernels",
              "Gluon loop <= 1.05x of the limit on the models other than mlp33 (issue 29)",
              args=SUITE_LOOP, writes="prefix"),
    Benchmark("recorded-step", "bench_recorded_step.py",
              "the mlp33 recorded Gluon loop, its l.mean() head, keep_grads=False, eager and hybrid.compile "
              "against the donated one-program JAX step: time, calling thread's CPU time and preemptions, first step, "
              "memory",
              "Gluon loop and mean_head <= 1.3x, eager <= 1.5x, hybrid.compile <= 1.05x, first step <= 1.3x, "
              "memory with kept gradients <= 1.2x; on a GPU loop <= 1.6x, hybrid.compile <= 1.15x (issue 29)",
              args=("--rounds", "18")),
    Benchmark("fit", "bench_fit.py", "Estimator.fit against the hand-written Gluon loop, with and without "
              "per-batch metrics", "fit within the loop's noise", args=("--rounds", "21")),
    Benchmark("amp", "bench_amp.py", "bfloat16 and float16 (loss scaling) against float32 on the digits data: "
              "held-out accuracy, step time, step memory (needs the examples extra)",
              args=("--steps", "500", "--rounds", "9")),
    Benchmark("hybrid-forward", "bench_hybrid_forward.py", "Gluon 1.x hybrid_forward(F, ...) blocks against "
              "the same networks written with forward", "hybridized inference and the Gluon loop <= 1.05x "
              "(issue 28)", writes="out"),
    Benchmark("passes", "bench_passes.py", "graph passes on against off: speed, bytes accessed, pipeline cost, "
              "a 10,000-node graph"),
    Benchmark("memory", "bench_memory.py", "training memory and step time without and with "
              "rematerialisation, byte budgets; on an accelerator ResNet-50 in bfloat16",
              "ResNet-50 activation memory >= 4x smaller and transient >= 3x with remat='sqrt' (issue 27)",
              args=("--repeats", "5"), gpu_args=("--gpu", "--repeats", "5")),
    Benchmark("memory-plan", "bench_memory_plan.py", "memory plans of training graphs against the max-live "
              "bound, and planning time on 10,000 nodes (discussed in docs/memory-planning.md)"),
    Benchmark("scaling", "bench_scaling.py", "training-step time on 1, 2 and 4 data-parallel devices, "
              "simulated CPU devices by default (discussed in docs/distributed.md)"),
    Benchmark("gluoncv-import", "gluoncv_models.py", "GluonCV networks exported by MXNet 1.9.1, imported "
              "with SymbolBlock.imports and compared with MXNet's outputs (after --export with MXNet's "
              "Python)", "every network MXNet exports matches (rtol 1e-3)", results="gluoncv-import.txt",
              args=("--check",), writes="script"),
    Benchmark("gluoncv-files", "gluoncv_files.py", "GluonCV's own model files run unchanged through "
              "hybrid.mxnet, compared with MXNet's outputs", "the issue's ten networks match (issue 28)",
              results="gluoncv-files.txt", args=("--all",), writes="script"),
    Benchmark("prefetch", "bench_prefetch.py", "time a training loop waits for data, with and without "
              "data.prefetch_to_device", "<= 10% of the loop's time waiting beyond the pipeline's own rate "
              "(issue 31)", args=("--rounds", "11"), writes="out"),
    Benchmark("image-pipeline", "bench_image_pipeline.py", "images per second of a JPEG training pipeline "
              "(RandomResizedCrop, flip, ToTensor, Normalize; 2 workers): hybrid's folder and .rec datasets "
              "against torchvision's ImageFolder and DataLoader", ">= 1.0x torchvision's images/s (issue 31)",
              writes="out"),
    Benchmark("image-decode", "probe_image_decode.py", "decoding cost per JPEG of ImageFolderDataset's samples "
              "against torchvision's loader and Pillow's decode alone", writes="out"),
    Benchmark("first-step", "bench_first_step.py", "first and steady steps as a new user meets them (fresh "
              "processes and home directories; d2l's LeNet, the d2l chapters cold and warm beside MXNet "
              "eager, the README example)", "loss block made inside the step: steady <= 1.2x made once; "
              "first step <= 1.5x a hand-written jax.jit step's; warm cache's first step <= 0.35x; warm "
              "d2l chapter <= 1.5x MXNet eager's total (issue 30)", args=("--repeats", "3"), writes="out"),
    Benchmark("deployment-flips", "probe_deployment_flips.py", "one-bit flips of a forged deployment file: "
              "refused or loaded in bounded time, no process left behind",
              "every load <= 30 s, none left behind (issue 31)", writes="out"),
    Benchmark("mxnet-alias", "bench_mxnet_alias.py", "the MXNet alias: eager handle operations against "
              "jax.numpy, a scratch step on handles against the Gluon loop, the corpus beside MXNet 1.9.1",
              "handle op <= 1.2x jnp; scratch step <= 1.3x and no more programs (issue 41)", results=""),
]}


def machine_name() -> str:
    """``cpu``, or ``gpu-<model>`` (``gpu-h100``) from JAX's first device."""
    import jax
    device = jax.devices()[0]
    if device.platform == "cpu":
        return "cpu"
    model = re.search(r"\b([A-Z]+\d+)\b", getattr(device, "device_kind", ""))
    return f"{device.platform}-{model.group(1).lower()}" if model else device.platform


def provenance(command: str, machine: str) -> str:
    """The first line of a results file: command, machine, date, jax version, load average, commit."""
    import jax
    commit = subprocess.run(["git", "describe", "--always", "--dirty"], cwd=ROOT, capture_output=True,
                            text=True).stdout.strip() or "unknown"
    load = " ".join(f"{v:.1f}" for v in os.getloadavg())
    date = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    return (f"# {command}   (machine {machine}, {os.cpu_count()} CPUs, {date}, jax {jax.__version__}, "
            f"load average {load} at the start; commit {commit})")


def cannot_run(bench: Benchmark, machine: str) -> str:
    """Why ``bench`` cannot run here, or ""."""
    if bench.name == "gluoncv-import" and not MXNET_PYTHON.exists():
        return f"needs MXNet's exports, made with {MXNET_PYTHON} (not found)"
    if not (ROOT / "benchmarks" / bench.script).exists():
        return f"benchmarks/{bench.script} is missing"
    return ""


def run(bench: Benchmark, extra: list[str], machine: str, write: bool, results_dir: Path) -> int:
    """Run ``bench``'s script, echo its output, and (``write``) overwrite its results file."""
    why = cannot_run(bench, machine)
    if why:
        print(f"{bench.name}: skipped, {why}", file=sys.stderr)
        return 2
    on_gpu = machine.startswith("gpu") and bench.gpu_args is not None
    args = list(bench.gpu_args if on_gpu else bench.args) + extra
    results = results_dir / bench.results_name(machine) if bench.results else None
    if write and results is not None:
        results.parent.mkdir(parents=True, exist_ok=True)
    if bench.writes in ("out", "prefix") and write and results is not None:
        out = results.relative_to(ROOT) if results.is_relative_to(ROOT) else results  # the script runs in ROOT
        args += ["--out", str(out.with_suffix("") if bench.writes == "prefix" else out)]
    if bench.writes == "script" and not write:
        args += ["--no-write"]
    command = " ".join(["python3", f"benchmarks/{bench.script}", *args])
    print(f"== {bench.name}: {command}", flush=True)
    header = provenance(command, machine)
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    env.setdefault("HYBRID_COMPILATION_CACHE", "0")  # first calls compile, whatever earlier runs left cached
    proc = subprocess.Popen([sys.executable, str(ROOT / "benchmarks" / bench.script), *args], cwd=ROOT,
                            stdout=subprocess.PIPE, text=True, env=env)
    lines = []
    for line in proc.stdout:
        sys.stdout.write(line)
        lines.append(line)
    status = proc.wait()
    if status != 0 or not write or results is None:
        return status
    if bench.writes == "stdout":
        results.write_text(header + "\n" + "".join(lines))
    elif bench.writes in ("out", "prefix"):
        text = results.read_text()
        results.write_text(header + "\n" + text)
    print(f"results: {results.relative_to(ROOT) if results.is_relative_to(ROOT) else results}")
    return 0


def listing(machine: str) -> str:
    """Every benchmark: name, command, what it measures, its targets and its results file(s) here."""
    out = []
    for bench in BENCHMARKS.values():
        results = "none kept (printed)"
        if bench.results:
            results = "benchmarks/results/" + bench.results_name(machine)
            if bench.writes == "prefix":
                results = results.replace(".txt", ".{txt,json,png}")
        command = " ".join(["benchmarks/" + bench.script, *bench.args])
        out += [f"{bench.name}  ({command})", f"    measures: {bench.measures}",
                f"    targets:  {bench.targets or 'none'}", f"    results:  {results}"]
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    extra = argv[argv.index("--") + 1:] if "--" in argv else []
    argv = argv[:argv.index("--")] if "--" in argv else argv
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("name", nargs="?", help="the benchmark to run (see --list)")
    parser.add_argument("--list", action="store_true", help="list the benchmarks")
    parser.add_argument("--all", action="store_true", help="run every benchmark this machine can run")
    parser.add_argument("--show", metavar="NAME", help="print NAME's current results file on this machine")
    parser.add_argument("--no-write", action="store_true", help="print only; leave the results file as it is")
    parser.add_argument("--machine", help="the machine's name in results files (default: cpu or gpu-<model>)")
    parser.add_argument("--results-dir", default=str(RESULTS), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    chosen = args.name or args.show
    if chosen is not None and chosen not in BENCHMARKS:
        print(f"unknown benchmark {chosen!r}; known: {', '.join(BENCHMARKS)}", file=sys.stderr)
        return 2
    machine = args.machine or machine_name()
    results_dir = Path(args.results_dir)
    if args.list:
        print(listing(machine))
        return 0
    if args.show:
        bench = BENCHMARKS[args.show]
        path = results_dir / bench.results_name(machine) if bench.results else None
        if path is None or not path.exists():
            print(f"{args.show}: no results file for machine {machine}", file=sys.stderr)
            return 2
        print(path.read_text(), end="")
        return 0
    if args.all and extra:
        parser.error("arguments after -- go to one benchmark's script, not to --all")
    if args.all:
        failed = [b.name for b in BENCHMARKS.values()
                  if not cannot_run(b, machine) and run(b, extra, machine, not args.no_write, results_dir)]
        print(f"failed: {', '.join(failed)}" if failed else "all done")
        return 1 if failed else 0
    if args.name is None:
        parser.print_usage(sys.stderr)
        return 2
    return run(BENCHMARKS[args.name], extra, machine, not args.no_write, results_dir)


if __name__ == "__main__":
    sys.exit(main())
