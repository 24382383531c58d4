"""XLA:CPU's library options (oneDNN, XNNPACK, YNNPACK) on the convolutional models: time, numerics, code.

    python3 benchmarks/bench_cpu_flags.py                        # cnn and resnet18, every setting
    python3 benchmarks/bench_cpu_flags.py --models cnn --settings none onednn --rounds 3

XLA reads ``XLA_FLAGS`` once, when its CPU backend starts, so every setting (``SETTINGS``: a name and
its flags) runs in its own fresh worker process (this script with ``--worker``). A worker builds the
suite's models (``benchmarks/suite``) three ways: ``compiled`` (the Gluon step under ``hybrid.compile``),
``gluon_loop`` (record / backward / ``trainer.step`` with the net hybridized) and ``limit`` (hand-written
JAX), each timed as a training step and as inference. Then, per model:

1. one worker per setting is built, one at a time; it records the logits before training, the losses of
   three training steps and the gradients at the initial parameters (hybrid's recorded backward and
   ``jax.grad`` of the hand-written model), compared afterwards with the no-flag worker's (largest
   difference over the largest magnitude, per array);
2. every worker dumps XLA's optimised HLO (``--xla_dump_to``, which changes nothing in the code) and
   reports which library runs each convolution and matrix product, and whether its code is the same as
   the no-flag worker's;
3. timed rounds: in each, every setting gives one sample of every case, in an order rotated from round to
   round; the tables give the median per call, the spread (interquartile range over the median) and the
   ratio to the no-flag setting (median of the per-round ratios, with their range);
4. the model's convolutions are timed alone, forward and forward + backward, in the ``--conv-settings``
   workers and in PyTorch (its CPU convolutions are oneDNN's), when PyTorch is installed;
5. the no-flag worker's steps are profiled (``jax.profiler``): the share of XLA's run time per kind of
   operation (thunk events, which overlap when XLA runs independent operations on several threads).

Which settings crash, change the generated code, or change the numbers is printed with the times. Workers
are pinned to one CPU by default (``--cpus``), as in ``benchmarks/run_suite.py``.
"""
from __future__ import annotations

import argparse
import collections
import glob
import hashlib
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
if __name__ == "__main__" and {"--worker", "--torch-worker"} & set(sys.argv):  # pinned before jax is imported
    from benchmarks.suite.worker import pin_cpus
    pin_cpus()

from benchmarks.common import table  # noqa: E402
from benchmarks.run_suite import WorkerProcess  # noqa: E402
from benchmarks.suite import spec  # noqa: E402
from benchmarks.suite.worker import serve  # noqa: E402

YNN_OFF = "--xla_cpu_experimental_ynn_fusion_type="
ONEDNN = "--xla_cpu_use_onednn=true"
ONEDNN_CALL = "--xla_cpu_experimental_onednn_custom_call=true"
ONEDNN_FUSION = ONEDNN + " --xla_cpu_experimental_onednn_fusion_type=dot,eltwise,reduce"
XNN = "--xla_cpu_use_xnnpack=true"
XNN_FUSION = XNN + " --xla_cpu_experimental_xnn_fusion_type=dot,eltwise,reduce"
XNN_GRAPH = XNN + " --xla_cpu_experimental_xnn_graph_fusion_mode=XNN_GRAPH_FUSION_MODE_GREEDY"
YNN_MORE = "--xla_cpu_experimental_ynn_fusion_type=+eltwise"
SETTINGS = collections.OrderedDict([
    ("none", ""),
    ("onednn", ONEDNN),
    ("onednn_call", ONEDNN_CALL),
    ("onednn_fusion", ONEDNN_FUSION),
    ("xnnpack", XNN),
    ("xnn_fusion", XNN_FUSION),
    ("xnn_graph", XNN_GRAPH),
    ("onednn+xnn", " ".join([ONEDNN, ONEDNN_CALL, XNN_FUSION, XNN_GRAPH.split(" ", 1)[1]])),
    ("ynn+eltwise", YNN_MORE),
    ("ynn+eltwise+dot", YNN_MORE + ",+dot"),
    ("ynn_off", YNN_OFF),
    ("ynn_off+onednn", " ".join([YNN_OFF, ONEDNN_FUSION, ONEDNN_CALL])),
    ("ynn_off+xnn", " ".join([YNN_OFF, XNN_FUSION, XNN_GRAPH.split(" ", 1)[1]])),
])
VARIANTS = collections.OrderedDict([("compiled", "hybrid_compiled"), ("gluon_loop", "hybrid_gluon_loop"),
                                    ("limit", "jax_handwritten")])
MODES = ("train", "infer")
CELLS = [(variant, mode) for mode in MODES for variant in VARIANTS]
LOSS_STEPS = 3
LIBRARIES = (("__ynn_fusion", "ynn"), ("__onednn_fusion", "onednn"), ("__xnn_fusion", "xnn"))


# -- optimised HLO: which library runs what ------------------------------------------------------

def _computations(text: str) -> dict[str, list[str]]:
    """Instruction lines of an HLO module's text, by computation name."""
    out, current = {}, None
    for line in text.splitlines():
        head = re.match(r"^(?:ENTRY )?%?([\w.\-]+) .*\{\s*$", line)
        if head:
            current = out.setdefault(head.group(1), [])
        elif current is not None and line.startswith("  "):
            current.append(line.strip())
    return out


def _opcode(line: str) -> str:
    found = re.search(r"= (?:\([^=]*\)|\S+) ([\w\-]+)\(", re.sub(r"/\*.*?\*/", "", line))
    return found.group(1) if found else "?"


def _library(line: str) -> str | None:
    for marker, name in LIBRARIES:
        if marker in line:
            return name
    target = re.search(r'custom_call_target="([^"]+)"', line)
    return target.group(1) if target else None


MOVES = {"copy", "transpose", "concatenate", "slice", "pad", "reshape", "reverse", "dynamic-slice",
         "dynamic-update-slice"}


def _what(ops: set) -> str:
    ops = ops - {"parameter", "constant", "bitcast", "broadcast", "tuple", "get-tuple-element"}
    for op, what in (("convolution", "conv"), ("dot", "dot"), ("reduce-window", "pool"),
                     ("select-and-scatter", "pool"), ("reduce", "reduce")):
        if op in ops:
            return what
    if ops and ops <= MOVES:
        return "copy"
    return "elementwise" if ops else "other"


def classify(text: str) -> dict[str, tuple[str, int]]:
    """``{instruction name: (kind, n)}`` for every instruction of an optimised HLO module. The kind says
    what it computes (``conv``, ``dot``, ``pool``, ``reduce``, ``copy`` (copies, transposes, concatenations,
    slices), ``elementwise``, ``other``) and which library runs it (``ynn`` = YNNPACK, ``onednn``, ``xnn`` =
    XNNPACK, a custom-call target, or ``xla``: XLA's own code), e.g. ``'conv ynn'``; ``n`` counts the
    convolutions and matrix products in it. Fusions are classified by the operations of their computations."""
    comps = _computations(text)
    kinds = {}
    for lines in comps.values():
        for line in lines:
            name = line.split(" = ")[0].replace("ROOT ", "").lstrip("%")
            called = re.search(r"calls=%([\w.\-]+)", line)
            ops = [_opcode(inner) for inner in (comps.get(called.group(1), []) if called else [line])]
            kind = "%s %s" % (_what(set(ops)), _library(line) or "xla")
            kinds[name] = (kind, sum(op in ("convolution", "dot") for op in ops))
    return kinds


def _entry_kinds(text: str) -> collections.Counter:
    """Counts of convolution and dot kinds among the instructions that run (entry and while bodies)."""
    counts = collections.Counter()
    called = set(re.findall(r"calls=%([\w.\-]+)", text))
    kinds = classify(text)
    for comp, lines in _computations(text).items():
        if comp in called:
            continue
        for line in lines:
            kind = kinds[line.split(" = ")[0].replace("ROOT ", "").lstrip("%")][0]
            if kind.split()[0] in ("conv", "dot", "pool") or kind.split()[1] != "xla":
                counts[kind] += 1
    return counts


def _normalised(text: str) -> str:
    """The computations of a module's text, without the source-location tables and metadata."""
    code = [line for line in text.splitlines() if line[:1] in ("%", " ", "}") or line.startswith("ENTRY")]
    return re.sub(r", metadata=\{[^}]*\}", "", "\n".join(code))


def summarise_dump(paths: list[str]) -> dict:
    """What the optimised modules in ``paths`` run: library counts and a digest of their code."""
    counts, digest = collections.Counter(), hashlib.sha256()
    for path in sorted(paths, key=lambda p: re.sub(r"module_\d+\.", "", os.path.basename(p))):
        text = Path(path).read_text()
        counts.update(_entry_kinds(text))
        digest.update(_normalised(text).encode())
    return {"counts": dict(counts), "digest": digest.hexdigest()[:12], "modules": len(paths)}


def describe_counts(counts: dict) -> str:
    order = sorted(counts, key=lambda k: (k.split()[0] not in ("conv", "dot"), k))
    return ", ".join("%d %s" % (counts[k], k) for k in order) or "-"


# -- the worker -----------------------------------------------------------------------------------

def _limit_grads(model: str, batch: int) -> dict[str, np.ndarray]:
    """``jax.grad`` of the hand-written model's loss at the canonical parameters, by canonical name."""
    import jax
    from benchmarks.suite import jax_handwritten
    init = spec.init_params(model)
    kinds = {n: k for n, _, k in spec.param_spec(model)}
    values = {n: jax.numpy.asarray(spec.channels_last(model, n, v)) for n, v in init.items()}
    trained = {n: v for n, v in values.items() if not kinds[n].startswith("state")}
    x, y = spec.data(model, batch)
    x = jax.numpy.asarray(x.transpose(0, 2, 3, 1))

    def loss(params):
        logits, _ = jax_handwritten.forward(model, dict(values, **params), x, True)
        return jax_handwritten.cross_entropy(logits, y)

    return {n: np.asarray(g) for n, g in jax.jit(jax.grad(loss))(trained).items()}


def _hybrid_grads(model: str, batch: int) -> dict[str, np.ndarray]:
    """Gradients of the mean loss of the hybridized hybrid model at the canonical parameters, recorded."""
    import jax.numpy as jnp
    from hybrid import autograd, loss
    from benchmarks.suite import hybrid_models
    net = hybrid_models.make_net(model)
    net.hybridize(static_alloc=True, static_shape=True)
    x, y = (jnp.asarray(a) for a in spec.data(model, batch))
    with autograd.record():
        mean_loss = loss.SoftmaxCELoss()(net(x), y).mean()
    autograd.backward(mean_loss)
    return {n: np.asarray(p.grad()) for n, p in net.collect_params().items() if p.grad_req != "null"}


def conv_layers(model: str) -> list[tuple[tuple[int, int, int, int, int], int]]:
    """The distinct convolutions of ``model`` as ``((c_in, size, c_out, kernel, stride), count)``, in order;
    ``size`` is the input's height and width. The first one needs no input gradient in training."""
    if model == "cnn":
        chans = (3,) + spec.CNN_CHANNELS
        shapes = [(chans[i], 32 >> i, chans[i + 1], 3, 1) for i in range(len(spec.CNN_CHANNELS))]
    else:
        shapes, size = [(3, 32, 64, 3, 1)], 32
        for _, c_in, c_out, stride in spec.resnet_blocks():
            shapes += [(c_in, size, c_out, 3, stride), (c_out, size // stride, c_out, 3, 1)]
            if spec.has_downsample(c_in, c_out, stride):
                shapes.append((c_in, size, c_out, 1, stride))
            size //= stride
    return list(collections.Counter(shapes).items())


def _best_per_call(fn, reps: int) -> float:
    """Seconds per call: the median of ``reps`` samples of enough back-to-back calls to last 20 ms."""
    fn()
    start = time.perf_counter()
    fn()
    n = max(1, round(0.02 / max(time.perf_counter() - start, 1e-6)))
    samples = []
    for _ in range(reps):
        start = time.perf_counter()
        for _ in range(n):
            fn()
        samples.append((time.perf_counter() - start) / n)
    return statistics.median(samples)


def jax_conv_times(model: str, batch: int, reps: int) -> dict[str, list[float]]:
    """Per distinct convolution of ``model`` (NHWC, as XLA runs hybrid's): seconds of the forward pass and
    of a training step's work (the output, the input and weight gradients; no input gradient for the first
    layer)."""
    import jax
    from jax import lax
    rng = np.random.default_rng(0)
    out = {}
    for i, ((c_in, size, c_out, k, stride), _) in enumerate(conv_layers(model)):
        x = jax.numpy.asarray(rng.standard_normal((batch, size, size, c_in), dtype=np.float32))
        w = jax.numpy.asarray(rng.standard_normal((k, k, c_in, c_out), dtype=np.float32))

        def conv(x, w, stride=stride, pad=k // 2):
            return lax.conv_general_dilated(x, w, (stride, stride), [(pad, pad)] * 2,
                                            dimension_numbers=("NHWC", "HWIO", "NHWC"))

        dy = jax.numpy.ones(jax.eval_shape(conv, x, w).shape, np.float32)
        forward = jax.jit(conv)
        def both(x, w, dy, conv=conv, first=i == 0):
            y, pullback = jax.vjp(conv, x, w)
            return (y,) + pullback(dy)[1 if first else 0:]

        both = jax.jit(both)
        out[str(i)] = [_best_per_call(lambda: forward(x, w).block_until_ready(), reps),
                       _best_per_call(lambda: jax.block_until_ready(both(x, w, dy)), reps)]
    return out


def torch_conv_times(model: str, batch: int, reps: int) -> dict[str, list[float]]:
    """The same as :func:`jax_conv_times` in PyTorch (NCHW, its CPU convolutions: oneDNN)."""
    import torch
    torch.set_num_threads(max(1, len(os.sched_getaffinity(0))))
    out = {}
    for i, ((c_in, size, c_out, k, stride), _) in enumerate(conv_layers(model)):
        x = torch.randn(batch, c_in, size, size, requires_grad=i > 0)
        w = torch.randn(c_out, c_in, k, k, requires_grad=True)

        def forward(x=x, w=w, stride=stride, pad=k // 2):
            with torch.no_grad():
                return torch.nn.functional.conv2d(x, w, stride=stride, padding=pad)

        dy = torch.ones_like(forward())

        def both(x=x, w=w, stride=stride, pad=k // 2, dy=dy):
            x.grad = w.grad = None
            torch.nn.functional.conv2d(x, w, stride=stride, padding=pad).backward(dy)

        out[str(i)] = [_best_per_call(forward, reps), _best_per_call(both, reps)]
    return out


class TorchWorker:
    """Times PyTorch's convolutions (``--torch-worker``)."""

    def convs(self, model: str, batch: int, reps: int) -> dict:
        return torch_conv_times(model, batch, reps)


class FlagsWorker:
    """Holds the three variants of one model in a process started with one setting's XLA_FLAGS."""

    def __init__(self, dump_dir: str):
        self.dump_dir = dump_dir
        self.cases, self.files = {}, {}

    def _dumped(self) -> set:
        return set(glob.glob(os.path.join(self.dump_dir, "*after_optimizations.txt")))

    def build(self, model: str, batch: int, checks: str) -> dict:
        from benchmarks import suite
        arrays, reply = {}, {"variants": {}}
        for variant, framework in VARIANTS.items():
            before = self._dumped()
            start = time.perf_counter()
            case = self.cases[variant] = suite.build(framework, model, batch)
            arrays[variant + "/logits"] = np.asarray(case.infer())
            losses = [spec.to_float(case.train_step()) for _ in range(LOSS_STEPS)]
            arrays[variant + "/losses"] = np.asarray(losses)
            arrays[variant + "/logits_trained"] = np.asarray(case.infer())
            first_s = time.perf_counter() - start
            warm = {}
            for mode in MODES:
                fn = case.train_step if mode == "train" else case.infer
                start = time.perf_counter()
                fn()
                warm[mode] = time.perf_counter() - start
            self.files[variant] = sorted(self._dumped() - before)
            reply["variants"][variant] = {"first_s": first_s, "warm_s": warm,
                                          "hlo": summarise_dump(self.files[variant])}
        for prefix, grads in (("gluon_loop", _hybrid_grads(model, batch)), ("limit", _limit_grads(model, batch))):
            arrays.update({"%s/grad/%s" % (prefix, n): g for n, g in grads.items()})
        np.savez(checks, **arrays)
        from benchmarks.suite.worker import memory_mb
        reply["rss_mb"] = memory_mb()[0]
        try:  # compiling leaves freed memory resident; a dozen idle workers must fit next to each other
            import ctypes
            ctypes.CDLL("libc.so.6").malloc_trim(0)
        except (OSError, AttributeError):
            pass
        reply["rss_trimmed_mb"] = memory_mb()[0]
        return reply

    def time(self, variant: str, mode: str, n: int) -> dict:
        case = self.cases[variant]
        fn = case.train_step if mode == "train" else case.infer
        start = time.perf_counter()
        for _ in range(n):
            fn()
        return {"seconds": (time.perf_counter() - start) / n}

    def convs(self, model: str, batch: int, reps: int) -> dict:
        return jax_conv_times(model, batch, reps)

    def profile(self, variant: str, mode: str, n: int, trace_dir: str) -> dict:
        """XLA's run time per kind of operation over ``n`` calls (thunk events of XLA's CPU threads)."""
        import jax
        from jax._src.lib import _profile_data
        case = self.cases[variant]
        fn = case.train_step if mode == "train" else case.infer
        kinds = {}
        for path in self.files[variant]:
            text = Path(path).read_text()
            module = re.match(r"HloModule ([\w.\-]+)", text).group(1)
            for name, kind in classify(text).items():
                kinds.setdefault((module, name), kind)
        jax.profiler.start_trace(trace_dir)
        for _ in range(n):
            fn()
        jax.profiler.stop_trace()
        trace = sorted(glob.glob(os.path.join(trace_dir, "**", "*.xplane.pb"), recursive=True))[-1]
        per_kind, per_op = collections.Counter(), collections.Counter()
        for plane in _profile_data.ProfileData.from_file(trace).planes:
            for line in plane.lines:
                if not line.name.startswith("tf_XLA"):
                    continue
                for event in line.events:
                    stats = dict(event.stats)
                    key = (stats.get("hlo_module"), stats.get("hlo_op"))
                    if key in kinds:
                        per_kind[kinds[key][0]] += event.duration_ns / n
                        per_op[key] += event.duration_ns / n
        return {"per_kind_ms": {k: v / 1e6 for k, v in per_kind.items()},
                "top_ops": [(op, "%s, %d conv/dot" % kinds[(module, op)], v / 1e6)
                            for (module, op), v in per_op.most_common(6)]}


def worker_main(torch_worker: bool = False) -> None:
    serve(lambda: TorchWorker() if torch_worker else FlagsWorker(os.environ["BENCH_DUMP_DIR"]))


class FlagsProcess(WorkerProcess):
    """A worker process started with ``flags`` in XLA_FLAGS (plus HLO dumping into ``dump_dir``)."""

    def __init__(self, setting: str, flags: str | None, dump_dir: str, cpus: int):
        self.framework = setting
        self.log = tempfile.TemporaryFile(mode="w+")
        dump = "--xla_dump_to=%s --xla_dump_hlo_as_text" % dump_dir
        env = dict(os.environ, PYTHONPATH=str(ROOT), HYBRID_BENCH_CPUS=str(cpus), BENCH_DUMP_DIR=dump_dir,
                   XLA_FLAGS=((flags or "") + " " + dump).strip())
        if cpus > 0:
            env.update({name: str(cpus) for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")})
        mode = "--torch-worker" if flags is None else "--worker"
        self.proc = subprocess.Popen([sys.executable, str(Path(__file__).resolve()), mode], cwd=ROOT,
                                     env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log,
                                     text=True)


# -- the parent -----------------------------------------------------------------------------------

def max_rel_diff(a: np.ndarray, b: np.ndarray) -> float:
    """Largest absolute difference over the largest magnitude of ``b``."""
    return float(np.max(np.abs(a - b)) / max(float(np.max(np.abs(b))), 1e-30))


def compare(checks: str, reference: str) -> dict[str, float]:
    """Per variant, the largest relative difference (per array) from the reference run of: the logits before
    training (``logits``), the losses of the first steps and the logits after them (``trained``), and the
    gradients at the initial parameters (``grads``)."""
    names = {"logits": "logits", "losses": "trained", "logits_trained": "trained", "grad": "grads"}
    out = collections.defaultdict(float)
    with np.load(checks) as got, np.load(reference) as ref:
        for key in ref.files:
            variant, what = key.split("/")[:2]
            column = "%s %s" % (variant, names[what])
            out[column] = max(out[column], max_rel_diff(got[key], ref[key]))
    return dict(out)


def rounding_reference(model: str, checks: str) -> dict[str, float]:
    """How far float32 rounding alone moves the results: hybrid against hand-written JAX in one run (the
    same model computed in a different order), in :func:`compare`'s columns."""
    with np.load(checks) as run:
        grads = max(max_rel_diff(spec.channels_last(model, key.split("/", 2)[2], run[key]),
                                 run[key.replace("gluon_loop/", "limit/", 1)])
                    for key in run.files if key.startswith("gluon_loop/grad/"))
        return {"gluon_loop logits": max_rel_diff(run["gluon_loop/logits"], run["limit/logits"]),
                "gluon_loop trained": max_rel_diff(run["gluon_loop/losses"], run["limit/losses"]),
                "gluon_loop grads": grads}


def _spread(values: list[float]) -> float:
    if len(values) < 4:
        return (max(values) - min(values)) / statistics.median(values)
    q = statistics.quantiles(values, n=4)
    return (q[2] - q[0]) / statistics.median(values)


def measure(model: str, batch: int, settings: list[str], args, tmp: str) -> str:
    """Build, check, time and profile ``model`` under every setting; the report as text."""
    lines = ["", "== %s (batch %d): %s" % (model, batch, spec.MODELS[model])]
    workers, builds = {}, {}
    try:
        for setting in settings:
            dump_dir = os.path.join(tmp, "%s-%s" % (model, setting))
            worker = FlagsProcess(setting, SETTINGS[setting], dump_dir, args.cpus)
            reply = worker.ask("build", model=model, batch=batch, checks=os.path.join(tmp, "%s-%s.npz" % (
                model, setting)))
            if reply.get("status") == "error":
                lines.append("%s: %s" % (setting, reply["reason"]))
                worker.close()
                continue
            workers[setting], builds[setting] = worker, reply
            print("  %s %-15s built in %.1f s, %s MB resident (%s MB after malloc_trim)" % (
                model, setting, sum(v["first_s"] for v in reply["variants"].values()), reply.get("rss_mb"),
                reply.get("rss_trimmed_mb")), flush=True)
        if "none" not in workers:
            return "\n".join(lines + ["the no-flag worker failed; nothing to compare with"])
        live = list(workers)
        inner = {cell: max(1, round(args.sample_ms / 1e3 / builds["none"]["variants"][cell[0]]["warm_s"][cell[1]]))
                 for cell in CELLS}
        samples = {(s, cell): [] for s in live for cell in CELLS}
        for r in range(args.rounds):
            for cell in CELLS:
                for setting in live[r % len(live):] + live[:r % len(live)]:
                    reply = workers[setting].ask("time", variant=cell[0], mode=cell[1], n=inner[cell])
                    samples[(setting, cell)].append(reply.get("seconds", float("nan")))
            print("  %s round %d/%d done, load %.2f" % (model, r + 1, args.rounds, os.getloadavg()[0]), flush=True)
        convs = conv_comparison(model, batch, workers, args, tmp)
        profiles = {}
        for setting in args.profile:
            if setting in workers:
                for cell in CELLS:
                    profiles[(setting, cell)] = workers[setting].ask(
                        "profile", variant=cell[0], mode=cell[1], n=args.profile_calls,
                        trace_dir=os.path.join(tmp, "trace-%s-%s-%s-%s" % ((model, setting) + cell)))
    finally:
        for worker in workers.values():
            worker.close()
    lines += report(model, live, builds, samples, inner, profiles, tmp, args.rounds)
    return "\n".join(lines + convs)


def conv_comparison(model: str, batch: int, workers: dict, args, tmp: str) -> list[str]:
    """Interleaved rounds timing the model's convolutions alone in the ``--conv-settings`` workers and in
    PyTorch (when installed); the table as lines."""
    import importlib.util
    procs = {s: workers[s] for s in args.conv_settings if s in workers}
    torch_proc = None
    if importlib.util.find_spec("torch") is not None:
        torch_proc = procs["pytorch"] = FlagsProcess("pytorch", None, os.path.join(tmp, "torch"), args.cpus)
    try:
        names, samples = list(procs), collections.defaultdict(list)
        for r in range(args.conv_rounds):
            for name in names[r % len(names):] + names[:r % len(names)]:
                reply = procs[name].ask("convs", model=model, batch=batch, reps=3)
                if reply.get("status") == "error":
                    return ["", "convolutions alone: %s failed: %s" % (name, reply["reason"])]
                for layer, times in reply.items():
                    samples[(name, layer)].append(times)
    finally:
        if torch_proc is not None:
            torch_proc.close()
    rows, totals = [], collections.defaultdict(float)
    for i, ((c_in, size, c_out, k, stride), count) in enumerate(conv_layers(model)):
        row = {"convolution": "%d->%d %dx%d/%d at %dx%d" % (c_in, c_out, k, k, stride, size, size), "n": count}
        for name in names:
            fwd, both = (statistics.median(t[j] for t in samples[(name, str(i))]) * 1e3 for j in (0, 1))
            row["fwd " + name], row["fwd+bwd " + name] = "%.2f" % fwd, "%.2f" % both
            totals["fwd " + name] += count * fwd
            totals["fwd+bwd " + name] += count * both
        rows.append(row)
    rows.append(dict({"convolution": "all, weighted by n"}, **{k: "%.1f" % v for k, v in totals.items()}))
    columns = [("convolution", "convolution"), ("n", "n")] + [(w + " " + n, w + " " + n) for w in ("fwd", "fwd+bwd")
                                                             for n in names]
    return ["", "convolutions alone, ms per call (median of %d interleaved rounds; NHWC in XLA, NCHW in PyTorch, "
            "%s thread(s); fwd+bwd: the output and the input and weight gradients, no input gradient for the "
            "first layer)"
            % (args.conv_rounds, args.cpus or "all"), table(rows, columns)]


def report(model, live, builds, samples, inner, profiles, tmp, rounds) -> list[str]:
    names = ["%s %s" % cell for cell in CELLS]
    ms_rows, ratio_rows, check_rows, code_rows = [], [], [], []
    for setting in live:
        ms_row, ratio_row = {"setting": setting}, {"setting": setting}
        for cell, name in zip(CELLS, names):
            times = samples[(setting, cell)]
            ms_row[name] = "%.2f ±%.0f%%" % (statistics.median(times) * 1e3, 100 * _spread(times))
            paired = [t / n for t, n in zip(times, samples[("none", cell)])]
            ratio_row[name] = "%.3f [%.2f-%.2f]" % (statistics.median(paired), min(paired), max(paired))
        ms_rows.append(ms_row)
        ratio_rows.append(ratio_row)
        diffs = compare(os.path.join(tmp, "%s-%s.npz" % (model, setting)), os.path.join(tmp, "%s-none.npz" % model))
        check_rows.append(dict({"setting": setting}, **{k: "%.0e" % v for k, v in diffs.items()}))
        if setting == "none":
            reference = rounding_reference(model, os.path.join(tmp, "%s-none.npz" % model))
            check_rows.append(dict({"setting": "(hybrid vs limit)"}, **{k: "%.0e" % v for k, v in reference.items()}))
        hlo = {v: builds[setting]["variants"][v]["hlo"] for v in VARIANTS}
        same = [v for v in VARIANTS if hlo[v]["digest"] == builds["none"]["variants"][v]["hlo"]["digest"]]
        code_rows.append({"setting": setting, "same code as none": ", ".join(same) or "none of them",
                          "compiled step + inference": describe_counts(hlo["compiled"]["counts"]),
                          "limit": describe_counts(hlo["limit"]["counts"])})
    columns = [("setting", "setting")] + [(n, n) for n in names]
    calls = ", ".join("%s %s: %d" % (cell + (inner[cell],)) for cell in CELLS)
    out = ["median ms per call over %d interleaved rounds (± interquartile range / median); calls per sample: %s"
           % (rounds, calls), table(ms_rows, columns), "",
           "ratio to the no-flag run: median of the per-round ratios [lowest-highest]", table(ratio_rows, columns), "",
           "numerics: largest |difference| / largest |value| of an array against the no-flag run (logits: before "
           "training; trained: the losses of %d steps and the logits after them; grads: at the initial parameters); "
           "'(hybrid vs limit)': the no-flag run's hybrid against its hand-written JAX, i.e. what float32 rounding "
           "alone does" % LOSS_STEPS,
           table(check_rows, [("setting", "setting")] + [(k, k) for k in check_rows[0] if k != "setting"]), "",
           "generated code: optimised HLO of each variant's programs; convolutions (conv) and matrix products (dot) "
           "by library that runs them (ynn = YNNPACK, xla = XLA's own emitter), other library fusions",
           table(code_rows, [(k, k) for k in code_rows[0]])]
    for (setting, cell), prof in sorted(profiles.items(), key=lambda kv: CELLS.index(kv[0][1])):
        if prof.get("status") == "error":
            out += ["", "profile %s %s %s: %s" % (setting, cell[0], cell[1], prof["reason"])]
            continue
        total = sum(prof["per_kind_ms"].values())
        shares = sorted(prof["per_kind_ms"].items(), key=lambda kv: -kv[1])
        out += ["", "profile (%s) %s %s: %.1f ms of XLA thunks per call: %s" % (
            setting, cell[0], cell[1], total, ", ".join("%s %.0f%%" % (k, 100 * v / total) for k, v in shares[:6])),
            "  largest: " + ", ".join("%s (%s) %.1f ms" % tuple(op) for op in prof["top_ops"][:4])]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--torch-worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--models", nargs="+", choices=["cnn", "resnet18"], default=["cnn", "resnet18"])
    parser.add_argument("--settings", nargs="+", choices=list(SETTINGS), default=list(SETTINGS),
                        help="settings to compare ('none' is always added)")
    parser.add_argument("--rounds", type=int, default=7, help="interleaved timed rounds (default 7)")
    parser.add_argument("--sample-ms", type=float, default=150.0,
                        help="target length of one timed sample, from the no-flag run's warm call (default 150)")
    parser.add_argument("--batch", action="append", default=[], metavar="MODEL=N",
                        help="override a model's batch size (default: the suite's, cnn 64, resnet18 16)")
    parser.add_argument("--cpus", type=int, default=1, help="CPUs per worker (default 1; 0: unpinned)")
    parser.add_argument("--profile", nargs="*", default=["none"], help="settings to profile (default: none)")
    parser.add_argument("--profile-calls", type=int, default=5)
    parser.add_argument("--conv-settings", nargs="*", default=["none", "ynn_off"],
                        help="settings whose convolutions are also timed alone, next to PyTorch's (default: none "
                             "ynn_off)")
    parser.add_argument("--conv-rounds", type=int, default=3)
    parser.add_argument("--out", help="also write the report to this file")
    args = parser.parse_args()
    if args.worker or args.torch_worker:
        return worker_main(args.torch_worker)
    batches = dict(spec.DEFAULT_BATCH)
    for item in args.batch:
        name, _, value = item.partition("=")
        if name not in batches or not value.isdigit():
            parser.error("--batch expects MODEL=N, got %r" % item)
        batches[name] = int(value)
    settings = list(dict.fromkeys(["none"] + args.settings))
    import jax
    import jaxlib
    load_start, start = os.getloadavg(), time.perf_counter()
    head = ["XLA:CPU library options, %s; jax %s, jaxlib %s; %d CPUs here, %s per worker; load average %s" % (
        time.strftime("%Y-%m-%d %H:%M"), jax.__version__, jaxlib.__version__, os.cpu_count(),
        args.cpus or "all", " ".join("%.2f" % v for v in load_start))]
    head += ["  %-15s %s" % (s, SETTINGS[s] or "(XLA_FLAGS without library options)") for s in settings]
    print("\n".join(head), flush=True)
    tmp = tempfile.mkdtemp(prefix="bench_cpu_flags-")
    try:
        body = [measure(model, batches[model], settings, args, tmp) for model in args.models]
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    foot = "load average at start %s, at end %s; %.0f s in all" % (
        " ".join("%.2f" % v for v in load_start), " ".join("%.2f" % v for v in os.getloadavg()),
        time.perf_counter() - start)
    text = "\n".join(head + body + ["", foot])
    print("\n".join(body + ["", foot]))
    if args.out:
        Path(args.out).write_text(text + "\n")


if __name__ == "__main__":
    main()
