"""One benchmark worker: a process that holds one (framework, model) and times its steps on request.

    python -m benchmarks.suite.worker FRAMEWORK     (from the repository root)

The runner starts one worker per framework and model, so each process's resident-set high-water mark
(Linux ``VmHWM``) belongs to one framework and one model. Requests and replies are JSON lines on
stdin/stdout; anything the framework prints goes to stderr. Runs on Python 3.8 (the MXNet venv).
"""
from __future__ import annotations

import json
import os
import re
import sys
import time
import traceback

from benchmarks import suite
from benchmarks.suite import spec

_VERSIONED = ("numpy", "jax", "jaxlib", "flax", "equinox", "optax", "torch", "mxnet")


def memory_mb():
    """(current RSS, RSS high-water mark) of this process in MiB; (None, None) where /proc is missing."""
    try:
        with open("/proc/self/status") as status:
            text = status.read()
    except OSError:
        return None, None
    rss, hwm = (int(re.search(name + r":\s+(\d+)", text).group(1)) / 1024 for name in ("VmRSS", "VmHWM"))
    return round(rss, 1), round(hwm, 1)


def reset_peak():
    """Restart the RSS high-water mark from the current RSS (Linux 4.0+); False where not possible."""
    try:
        with open("/proc/self/clear_refs", "w") as clear:
            clear.write("5")
        return True
    except OSError:
        return False


class Worker:
    def __init__(self, framework):
        self.framework = framework
        self.case = None

    def build(self, model, batch):
        start = time.perf_counter()
        try:
            module_name, _ = suite.FRAMEWORKS[self.framework]
            __import__("benchmarks.suite." + module_name)
        except ImportError as exc:
            return {"status": "not installed", "reason": str(exc)}
        import_s = time.perf_counter() - start
        rss_import, _ = memory_mb()
        start = time.perf_counter()
        try:
            self.case = suite.build(self.framework, model, batch)
        except spec.Unavailable as exc:
            return {"status": "unavailable", "reason": str(exc)}
        versions = {name: getattr(sys.modules[name], "__version__", "?") for name in _VERSIONED
                    if name in sys.modules}
        return {"status": "ok", "import_s": import_s, "build_s": time.perf_counter() - start,
                "rss_import_mb": rss_import, "n_params": self.case.n_params, "n_state": self.case.n_state,
                "notes": self.case.notes, "versions": versions, "python": sys.version.split()[0]}

    def _fn(self, mode):
        return self.case.train_step if mode == "train" else self.case.infer

    def first(self, mode):
        """Time the first call (tracing and compiling included) and the peak RSS it reached."""
        reset_peak()
        start = time.perf_counter()
        out = self._fn(mode)()
        seconds = time.perf_counter() - start
        reply = {"first_s": seconds, "first_peak_mb": memory_mb()[1]}
        if mode == "train":
            reply["loss"] = spec.to_float(out)
        return reply

    def warmup(self, mode, n):
        """``n`` single calls: their times and (train) losses."""
        times, losses = [], []
        for _ in range(n):
            start = time.perf_counter()
            out = self._fn(mode)()
            times.append(time.perf_counter() - start)
            if mode == "train":
                losses.append(spec.to_float(out))
        return {"times": times, "losses": losses}

    def time(self, mode, n):
        """Seconds per call of ``n`` back-to-back calls."""
        fn = self._fn(mode)
        start = time.perf_counter()
        for _ in range(n):
            out = fn()
        seconds = (time.perf_counter() - start) / n
        reply = {"seconds": seconds}
        if mode == "train":
            reply["loss"] = spec.to_float(out)
        return reply

    def memory(self, reset=False):
        rss, hwm = memory_mb()
        reply = {"rss_mb": rss, "peak_mb": hwm}
        if reset:
            reply["reset"] = reset_peak()
        return reply


def pin_cpus():
    """Restrict this process to the first HYBRID_BENCH_CPUS allowed CPUs (0 or unset: no restriction).
    Done before any framework is imported, so thread pools that size themselves by the CPUs they may use
    (XLA's among them, which ignores OMP_NUM_THREADS) get that many threads."""
    count = int(os.environ.get("HYBRID_BENCH_CPUS", "0"))
    if count > 0 and hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, sorted(os.sched_getaffinity(0))[:count])


def serve(make_worker):
    """Answer JSON-line requests ``{"cmd": METHOD, ...keyword arguments}`` on stdin by calling the method of
    ``make_worker()`` and writing its reply on stdout, until ``{"cmd": "exit"}``; a failure is replied as
    ``{"status": "error", "reason": ...}`` with its traceback on stderr."""
    reply_stream = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)  # stray prints of the frameworks must not corrupt the replies
    sys.stdout = sys.stderr
    worker = make_worker()
    for line in sys.stdin:
        request = json.loads(line)
        command = request.pop("cmd")
        if command == "exit":
            break
        try:
            reply = getattr(worker, command)(**request)
        except Exception as exc:  # noqa: BLE001 - every failure is reported to the runner
            traceback.print_exc()
            reply = {"status": "error", "reason": "%s: %s" % (type(exc).__name__, exc)}
        reply_stream.write(json.dumps(reply) + "\n")
        reply_stream.flush()


def main():
    framework = sys.argv[1]
    pin_cpus()
    serve(lambda: Worker(framework))


if __name__ == "__main__":
    main()
