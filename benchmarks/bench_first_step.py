"""First steps as a new user meets them: every figure comes from a fresh process with a fresh home directory.

Part 1, d2l's LeNet (sigmoid, average pooling; batch 128 of 1x28x28, SGD, not hybridized, as d2l writes it).
Each variant runs in its own process; "first" is the first training step (forward, loss, backward, update,
the loss read with ``float``, deferred initialisation and every compile included), "steady" the median of the
next ``--steps`` steps after three more:

  (a) jit        a hand-written ``jax.jit`` step in pure JAX (the compile floor; no hybrid imported)
  (b) once       hybrid, the loss block made once before the loop
  (c) inline     hybrid, ``loss.SoftmaxCrossEntropyLoss()(net(X), y)`` inside the step
  (d) warm       (b) again in a second process with the same home: the persistent cache, nothing configured
  (e) nocache    (b) with ``HYBRID_COMPILATION_CACHE=0``: the cost of writing the cache in (b)
  (m) mxnet      MXNet 1.9.1 eager, when ``/work/mxnet-env/bin/python`` exists

Part 2, the d2l chapters run as a user would (``python examples/d2l/<chapter>.py`` with the book's settings),
cold (fresh home) then warm (the same home again), beside the same chapter written for MXNet 1.9.1
(``benchmarks/d2l_mxnet/``, same model, data, batch size, epochs and evaluation). "first loss" is the wall
time from starting the process to its first printed loss line; "total" the process's wall time. The README
example (100 hybridized steps) is timed the same way.

    python3 benchmarks/bench_first_step.py [--steps 20] [--repeats 3] [--chapters lenet mlp_concise ...]
                                           [--out benchmarks/results/first-step-cpu.txt]
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MXNET_PYTHON = Path("/work/mxnet-env/bin/python")
BATCH = 128

# chapter script -> its command-line arguments (the book's settings, or the examples README's for ResNet)
CHAPTERS = {
    "linear_regression_scratch": [],
    "softmax_regression_concise": [],
    "mlp_concise": [],
    "lenet": [],
    "resnet": ["--width", "16", "--resize", "28", "--epochs", "2"],
}


# ---------------------------------------------------------------- part 1: the LeNet step, one process each
def _lenet_data():
    import numpy as np
    rng = np.random.default_rng(0)
    return rng.random((BATCH, 1, 28, 28), dtype=np.float32), rng.integers(0, 10, BATCH).astype(np.float32)


def _timed_steps(step, steps: int) -> dict:
    start = time.perf_counter()
    step()
    first = time.perf_counter() - start
    for _ in range(3):
        step()
    times = []
    for _ in range(steps):
        start = time.perf_counter()
        step()
        times.append(time.perf_counter() - start)
    return {"first": first, "steady": statistics.median(times)}


def child_jit(steps: int) -> dict:
    """A hand-written LeNet training step: one ``jax.jit`` program, parameters donated."""
    import jax
    import jax.numpy as jnp
    import numpy as np
    X, y = _lenet_data()
    rng = np.random.default_rng(1)

    def glorot(*shape):
        fan_in, fan_out = np.prod(shape[1:]), shape[0] * np.prod(shape[2:])
        return jnp.asarray(rng.uniform(-1, 1, shape) * np.sqrt(6 / (fan_in + fan_out)), jnp.float32)

    params = [glorot(6, 1, 5, 5), jnp.zeros(6), glorot(16, 6, 5, 5), jnp.zeros(16), glorot(120, 400),
              jnp.zeros(120), glorot(84, 120), jnp.zeros(84), glorot(10, 84), jnp.zeros(10)]

    def conv(x, w, b, pad):
        out = jax.lax.conv_general_dilated(x, w, (1, 1), [(pad, pad)] * 2, dimension_numbers=("NCHW", "OIHW", "NCHW"))
        return jax.nn.sigmoid(out + b[None, :, None, None])

    def pool(x):
        return jax.lax.reduce_window(x, 0.0, jax.lax.add, (1, 1, 2, 2), (1, 1, 2, 2), "VALID") / 4

    def loss(p, x, y):
        x = pool(conv(x, p[0], p[1], 2))
        x = pool(conv(x, p[2], p[3], 0)).reshape(x.shape[0], -1)
        x = jax.nn.sigmoid(x @ p[4].T + p[5])
        x = jax.nn.sigmoid(x @ p[6].T + p[7])
        logits = x @ p[8].T + p[9]
        return -jnp.take_along_axis(jax.nn.log_softmax(logits), y.astype(jnp.int32)[:, None], 1)[:, 0].sum()

    def sgd_step(p, x, y):
        value, grads = jax.value_and_grad(loss)(p, x, y)
        return [w - 0.9 / BATCH * g for w, g in zip(p, grads)], value

    step = jax.jit(sgd_step, donate_argnums=0)
    state = {"p": params}

    def run():
        state["p"], value = step(state["p"], X, y)
        float(value)

    return _timed_steps(run, steps)


def child_hybrid(steps: int, inline: bool) -> dict:
    """d2l's eager loop on LeNet; ``inline`` makes the loss block inside every step."""
    sys.path.insert(0, str(ROOT / "examples" / "d2l"))
    import hybrid
    from hybrid import autograd, init, loss
    from lenet import lenet
    X, y = _lenet_data()
    hybrid.random.seed(0)
    net = lenet()
    net.initialize(init.Xavier())
    trainer = hybrid.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.9})
    loss_fn = loss.SoftmaxCrossEntropyLoss()

    def run():
        with autograd.record():
            l = (loss.SoftmaxCrossEntropyLoss() if inline else loss_fn)(net(X), y)
        l.backward()
        trainer.step(BATCH)
        float(l.sum())

    return _timed_steps(run, steps)


def _run_child(args: list[str], home: Path, env_extra: dict | None = None, python: str = sys.executable) -> dict:
    env = _fresh_env(home)
    env.update(env_extra or {})
    out = subprocess.run([python, *args], env=env, cwd=ROOT, capture_output=True, text=True, timeout=900)
    if out.returncode != 0:
        raise RuntimeError(f"{' '.join(args)} failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def _fresh_env(home: Path) -> dict:
    env = {k: v for k, v in os.environ.items()
           if k not in ("HYBRID_COMPILATION_CACHE", "JAX_COMPILATION_CACHE_DIR", "XDG_CACHE_HOME")}
    env.update(HOME=str(home), PYTHONPATH=str(ROOT))
    return env


def lenet_steps(steps: int, work: Path, repeats: int = 1) -> dict:
    """Every variant ``repeats`` times, round-robin, each round with fresh homes; medians per figure."""
    me = [str(Path(__file__).resolve())]
    rounds = []
    for r in range(repeats):
        home_b = work / f"home-once-{r}"
        row = {
            "jit": _run_child(me + ["--child", "jit", "--steps", str(steps)], work / f"home-jit-{r}"),
            "once": _run_child(me + ["--child", "once", "--steps", str(steps)], home_b),
            "inline": _run_child(me + ["--child", "inline", "--steps", str(steps)], work / f"home-inline-{r}"),
            "warm": _run_child(me + ["--child", "once", "--steps", str(steps)], home_b),
            "nocache": _run_child(me + ["--child", "once", "--steps", str(steps)], work / f"home-nocache-{r}",
                                  {"HYBRID_COMPILATION_CACHE": "0"}),
        }
        if MXNET_PYTHON.exists():
            row["mxnet"] = _run_child([str(ROOT / "benchmarks" / "d2l_mxnet" / "lenet_step.py"), "--steps",
                                       str(steps)], work / f"home-mxnet-{r}", python=str(MXNET_PYTHON))
        rounds.append(row)
    return _medians(rounds)


def _medians(rounds: list[dict]) -> dict:
    """``{variant: {figure: median over rounds}}`` of rounds shaped ``{variant: {figure: seconds}}``."""
    return {variant: {figure: statistics.median(r[variant][figure] for r in rounds)
                      for figure in rounds[0][variant] if isinstance(rounds[0][variant][figure], float)}
            for variant in rounds[0]}


# ---------------------------------------------------------------- part 2: whole chapters, as a user runs them
LOSS_LINE = re.compile(r"\bloss\b", re.IGNORECASE)


def _time_script(cmd: list[str], home: Path, env_extra: dict | None = None) -> dict:
    """Wall seconds to the first printed loss line and to the end of ``cmd``."""
    env = _fresh_env(home)
    env.update(env_extra or {})
    env["PYTHONUNBUFFERED"] = "1"
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, env=env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    first = None
    lines = []
    for line in proc.stdout:
        lines.append(line)
        if first is None and LOSS_LINE.search(line):
            first = time.perf_counter() - start
    err = proc.stderr.read()
    proc.wait()
    total = time.perf_counter() - start
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{err[-3000:]}")
    return {"first_loss": first if first is not None else total, "total": total, "last": lines[-1].strip()}


def _fashion_npz(work: Path) -> Path:
    """The synthetic Fashion-MNIST that hybrid's chapters build, saved for the MXNet chapters."""
    os.environ["HYBRID_COMPILATION_CACHE"] = "0"  # this process compiles nothing worth keeping
    sys.path[:0] = [str(ROOT), str(ROOT / "examples" / "d2l")]
    import numpy as np
    from d2l_utils import synthetic_fashion_mnist
    path = work / "fashion.npz"
    (xtr, ytr), (xte, yte) = synthetic_fashion_mnist(6000, seed=0), synthetic_fashion_mnist(1000, seed=1)
    np.savez(path, train_x=xtr, train_y=ytr, test_x=xte, test_y=yte)
    return path


def chapters(names: list[str], work: Path, repeats: int = 1) -> dict:
    data = _fashion_npz(work) if MXNET_PYTHON.exists() and names else None
    rounds = {name: [] for name in names}
    for r in range(repeats):
        for name in names:
            home = work / f"home-{name}-{r}"
            script = ["examples/d2l/" + name + ".py", *CHAPTERS[name]]
            row = {"cold": _time_script([sys.executable, *script], home),
                   "warm": _time_script([sys.executable, *script], home)}
            mx_script = ROOT / "benchmarks" / "d2l_mxnet" / f"{name}.py"
            if data is not None and mx_script.exists():
                row["mxnet"] = _time_script([str(MXNET_PYTHON), str(mx_script), *CHAPTERS[name], "--data",
                                             str(data)], work / f"home-mx-{name}-{r}")
            rounds[name].append(row)
            print(f"  round {r + 1} {name}: {json.dumps({k: round(v['total'], 2) for k, v in row.items()})}",
                  flush=True)
    return {name: _medians(rows) for name, rows in rounds.items()}


def readme_example(work: Path, repeats: int = 1) -> dict:
    """The README's first code block as a script, cold and warm."""
    text = (ROOT / "README.md").read_text()
    code = re.search(r"```python\n(.*?)```", text, re.S).group(1)
    script = work / "readme_example.py"
    script.write_text(code + "\nprint('loss', float(batch_loss.mean()))\n")
    rounds = []
    for r in range(repeats):
        home = work / f"home-readme-{r}"
        rounds.append({"cold": _time_script([sys.executable, str(script)], home),
                       "warm": _time_script([sys.executable, str(script)], home)})
    return _medians(rounds)


# ---------------------------------------------------------------- report
def report(lenet: dict, chapter_rows: dict, readme: dict | None, repeats: int = 1) -> str:
    out = ["# First steps in fresh processes (bench_first_step.py)", ""]
    if repeats > 1:
        out += [f"medians of {repeats} rounds", ""]
    out.append(f"LeNet, batch {BATCH} of 1x28x28, SGD, eager (seconds; steady = median step)")
    out.append(f"{'variant':<44}{'first':>9}{'steady':>10}")
    names = {"jit": "(a) hand-written jax.jit step", "once": "(b) hybrid, loss block made once",
             "inline": "(c) hybrid, loss block made in the step", "warm": "(d) (b) in a second process (warm cache)",
             "nocache": "(e) (b) with HYBRID_COMPILATION_CACHE=0", "mxnet": "(m) MXNet 1.9.1 eager"}
    for key, label in names.items():
        if key in lenet:
            out.append(f"{label:<44}{lenet[key]['first']:>9.3f}{lenet[key]['steady'] * 1e3:>8.1f}ms")
    a, b, c, d = (lenet[k] for k in ("jit", "once", "inline", "warm"))
    out += ["", "ratios (target):",
            f"  (c) steady / (b) steady = {c['steady'] / b['steady']:.2f}x (<= 1.2x)",
            f"  (b) first / (a) first   = {b['first'] / a['first']:.2f}x (<= 1.5x)",
            f"  (d) first / (b) first   = {d['first'] / b['first']:.2f}x (<= 0.35x)",
            f"  (e) first / (b) first   = {lenet['nocache']['first'] / b['first']:.2f}x (cost of writing the cache)"]
    if chapter_rows or readme:
        out += ["", "Chapters run as scripts (seconds from process start: first loss line / total)",
                f"{'chapter':<28}{'cold':>15}{'warm':>15}{'MXNet eager':>15}{'warm/MXNet':>12}"]
        rows = dict(chapter_rows)
        if readme:
            rows["README example"] = readme
        for name, row in rows.items():
            cells = [f"{row[k]['first_loss']:6.2f}/{row[k]['total']:6.2f}" if k in row else f"{'-':>13}"
                     for k in ("cold", "warm", "mxnet")]
            ratio = f"{row['warm']['total'] / row['mxnet']['total']:.2f}x" if "mxnet" in row else "-"
            out.append(f"{name:<28}" + "".join(f"{c:>15}" for c in cells) + f"{ratio:>12}")
        out.append("target: warm total <= 1.5x MXNet eager's")
    return "\n".join(out) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--chapters", nargs="*", default=list(CHAPTERS), choices=list(CHAPTERS))
    parser.add_argument("--repeats", type=int, default=1, help="rounds of everything; medians are reported")
    parser.add_argument("--no-readme", action="store_true")
    parser.add_argument("--out", help="write the report here too")
    parser.add_argument("--json", help="write the raw figures here")
    parser.add_argument("--child", choices=["jit", "once", "inline"], help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        figures = child_jit(args.steps) if args.child == "jit" else child_hybrid(args.steps, args.child == "inline")
        print(json.dumps(figures))
        return
    work = Path(tempfile.mkdtemp(prefix="bench-first-step-"))
    try:
        lenet = lenet_steps(args.steps, work, args.repeats)
        chapter_rows = chapters(args.chapters, work, args.repeats)
        readme = None if args.no_readme else readme_example(work, args.repeats)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    text = report(lenet, chapter_rows, readme, args.repeats)
    print(text, end="")
    if args.out:
        Path(args.out).write_text(text)
    if args.json:
        Path(args.json).write_text(json.dumps({"lenet": lenet, "chapters": chapter_rows, "readme": readme}, indent=1))


if __name__ == "__main__":
    main()
