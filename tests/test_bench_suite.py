"""The benchmark suite's models are the same model in hybrid and in hand-written JAX (the frameworks CI has):
equal parameter counts, equal losses over training steps from the canonical initial parameters, and a
NumPy reference of one SGD-momentum step of the 33-layer MLP. Also: the runner end to end on one model, the
memory benchmark's smoke run, benchmarks/run.py (its registry, results files, listing) and docs/benchmarks.md
quoting results files verbatim."""
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import hybrid
from benchmarks import suite
from benchmarks.suite import spec
from benchmarks.suite.worker import Worker

ROOT = Path(__file__).resolve().parents[1]

# Counted by hand from the architectures (weights + biases; BatchNorm gamma/beta trainable, running stats not).
EXPECTED_COUNTS = {
    "mlp33": (32 * (64 * 64 + 64) + 64 * 10 + 10, 0),
    "mlp784": (784 * 512 + 512 + 3 * (512 * 512 + 512) + 512 * 10 + 10, 0),
    "cnn": (3 * 32 * 9 + 32 * 64 * 9 + 64 * 128 * 9 + 2 * (32 + 64 + 128) + 2048 * 10 + 10, 2 * (32 + 64 + 128)),
    "resnet18": (11_173_962, 9_600),  # the CIFAR ResNet-18 with 10 classes
    "transformer": (4 * ((128 * 384 + 384) + (128 * 128 + 128) + (128 * 512 + 512) + (512 * 128 + 128) + 4 * 128)
                    + 128 * 10 + 10, 0),
}


@pytest.mark.parametrize("model", list(spec.MODELS))
def test_parameter_counts_agree(model):
    from benchmarks.suite import hybrid_models, jax_handwritten
    net = hybrid_models.make_net(model)
    params = net.collect_params().values()
    hybrid_counts = (sum(int(np.prod(p.shape)) for p in params if p.grad_req != "null"),
                     sum(int(np.prod(p.shape)) for p in params if p.grad_req == "null"))
    assert spec.count(model) == EXPECTED_COUNTS[model]
    assert hybrid_counts == EXPECTED_COUNTS[model]
    if model != "resnet18":  # building compiles nothing, but keep the large model's arrays out of the fast path
        case = jax_handwritten.build(model, 2)
        assert (case.n_params, case.n_state) == EXPECTED_COUNTS[model]


def losses(framework, model, batch, steps=2):
    case = suite.build(framework, model, batch)
    return [spec.to_float(case.train_step()) for _ in range(steps)], np.asarray(case.infer())


@pytest.mark.parametrize("model", ["mlp784", "cnn", "transformer"])
def test_hybrid_and_handwritten_jax_train_alike(model, monkeypatch):
    """Two steps (the second loss depends on the first update) and inference after them, on narrower
    versions of the models (every module reads the sizes from spec) to keep compile times short."""
    monkeypatch.setattr(spec, "MLP784_SIZES", (784, 32, 32))
    monkeypatch.setattr(spec, "CNN_CHANNELS", (4, 8, 8))
    monkeypatch.setattr(spec, "TRANSFORMER", {"layers": 1, "units": 16, "heads": 2, "ffn": 32, "length": 8})
    expected, expected_out = losses("jax_handwritten", model, 2)
    frameworks = ["hybrid_hybridized", "hybrid_compiled"] + (["jax_handwritten_oihw"] if model == "cnn" else [])
    for framework in frameworks:
        got, out = losses(framework, model, 2)
        np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-6, err_msg=framework)
        np.testing.assert_allclose(out, expected_out, rtol=1e-4, atol=1e-5, err_msg=framework)
    assert expected[1] < expected[0]  # the step really trains


def numpy_mlp_steps(params, x, y, steps):
    """Losses of ``steps`` SGD-momentum steps of a ReLU MLP on mean softmax cross-entropy (float64)."""
    names = [n[:-len(".weight")] for n in params if n.endswith(".weight")]
    w = {k: v.astype(np.float64) for k, v in params.items()}
    mom = {k: np.zeros_like(v) for k, v in w.items()}
    onehot = np.eye(spec.CLASSES)[y]
    out = []
    for _ in range(steps):
        acts = [x.astype(np.float64)]
        for i, name in enumerate(names):
            z = acts[-1] @ w[name + ".weight"].T + w[name + ".bias"]
            acts.append(np.maximum(z, 0) if i < len(names) - 1 else z)
        logits = acts[-1] - acts[-1].max(axis=1, keepdims=True)
        probs = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
        out.append(float(-np.mean(np.log(probs[np.arange(len(y)), y]))))
        delta = (probs - onehot) / len(y)
        grads = {}
        for i in reversed(range(len(names))):
            grads[names[i] + ".weight"] = delta.T @ acts[i]
            grads[names[i] + ".bias"] = delta.sum(axis=0)
            delta = (delta @ w[names[i] + ".weight"]) * (acts[i] > 0)
        for k in w:
            mom[k] = spec.MOMENTUM * mom[k] - spec.LEARNING_RATE * grads[k]
            w[k] += mom[k]
    return out


def test_mlp_steps_match_numpy_reference():
    x, y = spec.data("mlp33", 4)
    expected = numpy_mlp_steps(spec.init_params("mlp33"), x, y, steps=3)
    frameworks = ["jax_handwritten", "hybrid_eager", "hybrid_hybridized"]
    frameworks += ["hybrid_compiled"] if hasattr(hybrid, "compile") else []
    for framework in frameworks:
        got, _ = losses(framework, "mlp33", 4, steps=3)
        np.testing.assert_allclose(got, expected, rtol=1e-5, err_msg=framework)


def test_worker_reports_missing_frameworks(monkeypatch):
    monkeypatch.setitem(suite.FRAMEWORKS, "absent", ("no_such_framework_module", None))
    assert Worker("absent").build("mlp33", 2)["status"] == "not installed"
    reply = Worker("hybrid_compiled").build("mlp33", 2)
    assert reply["status"] == ("ok" if hasattr(hybrid, "compile") else "unavailable")


def test_runner_end_to_end(tmp_path):
    """The suite's runner through benchmarks/run.py: the runner writes <results>.json and .txt at the prefix
    run.py gives it, and run.py puts its provenance line at the top of the table."""
    out = tmp_path / "suite-testbox"
    env = dict(os.environ, HYBRID_BENCH_PYTHON=sys.executable, HYBRID_BENCH_MXNET_PYTHON=str(tmp_path / "none"))
    done = subprocess.run([sys.executable, "benchmarks/run.py", "suite", "--machine", "testbox", "--results-dir",
                           str(tmp_path), "--", "--quick", "--models", "mlp33",
                           "--frameworks", "jax_handwritten", "mxnet_gluon_eager", "--repeats", "2",
                           "--sample-ms", "1", "--batch", "mlp33=4"],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr[-2000:]
    rows = {(r["framework"], r["mode"]): r for r in json.loads(out.with_suffix(".json").read_text())["rows"]}
    for mode in ("train", "infer"):
        limit = rows[("jax_handwritten", mode)]
        assert limit["ratio"] == 1.0 and limit["samples"] == 2
        assert limit["median_ms"] > 0 and limit["first_s"] > 0 and limit["peak_mb"] > limit["rss_import_mb"] > 0
    assert len(rows[("jax_handwritten", "train")]["losses"]) == 3
    assert rows[("mxnet_gluon_eager", "infer")]["status"] == "not installed"
    header, table = out.with_suffix(".txt").read_text().split("\n", 1)
    assert header.startswith("# python3 benchmarks/run_suite.py --quick --models mlp33") and "machine testbox" in header
    assert "jax_handwritten" in table


def test_memory_bench_measures_remat_and_budgets(tmp_path):
    """benchmarks/bench_memory.py on a small MLP: one row per remat setting and step kind with XLA's figures,
    where remat lowers the activation memory, and the byte-budget table: a reachable budget's plan fits, an
    unreachable one uses the least memory of the plans tried."""
    out = subprocess.run([sys.executable, "benchmarks/bench_memory.py", "--models", "mlp12", "--batch", "512",
                          "--repeats", "1", "--budgets", "mlp12", "--budget-fractions", "0.7,0.3",
                          "--json", str(tmp_path / "memory.json")],
                         cwd=ROOT, capture_output=True, text=True, check=True, timeout=900).stdout
    assert "mlp12, Gluon loop" in out and "mlp12, hybrid.compile" in out and "byte budgets" in out
    results = json.loads((tmp_path / "memory.json").read_text())
    for kind in ("loop", "compiled"):
        rows = {row["remat"]: row for row in results[f"mlp12-{kind}"]}
        assert set(rows) == {"none", "sqrt", "auto"} and rows["none"]["activation_x"] == 1.0
        assert rows["sqrt"]["activation_mb"] < rows["none"]["activation_mb"] > rows["auto"]["activation_mb"]
        assert all(row["step_s"] > 0 and row["first_call_s"] > 0 for row in rows.values())
    reachable, unreachable = [row for row in results["mlp12-budgets"] if row["budget"].startswith("budget")]
    assert reachable["fits"] and reachable["xla_mb"] <= reachable["budget_mb"]
    assert not unreachable["fits"] and unreachable["xla_mb"] <= 1.02 * unreachable["least_tried_mb"]


def results_pattern(bench) -> re.Pattern:
    """The names a benchmark's results may have: its results file on any machine (``cpu``, ``gpu-h100``),
    with the JSON and chart beside it for the suite's runs."""
    name = re.escape(bench.results).replace(re.escape("{name}"), re.escape(bench.name))
    name = name.replace(re.escape("{machine}"), r"(cpu|gpu-[a-z0-9]+)")
    if bench.writes == "prefix":
        name = name.replace(r"\.txt", r"\.(txt|json|png)")
    return re.compile(name + "$")


def test_every_script_is_registered_and_every_results_file_belongs_to_one_benchmark():
    """benchmarks/run.py lists every script that measures something, and benchmarks/results/ holds only the
    current files of registered benchmarks: one per benchmark and machine, no history kept in file names."""
    from benchmarks.run import BENCHMARKS
    tracked = subprocess.run(["git", "ls-files", "benchmarks/*.py"], cwd=ROOT, capture_output=True, text=True)
    scripts = {Path(p).name for p in tracked.stdout.split() if "/" not in p[len("benchmarks/"):]}
    scripts = (scripts or {p.name for p in (ROOT / "benchmarks").glob("*.py")}) - {"run.py", "common.py"}
    registered = {b.script for b in BENCHMARKS.values()}
    assert scripts <= registered, f"register {scripts - registered} in benchmarks/run.py's BENCHMARKS"
    assert all((ROOT / "benchmarks" / script).exists() for script in registered)
    patterns = [results_pattern(b) for b in BENCHMARKS.values() if b.results]
    files = sorted(p.name for p in (ROOT / "benchmarks" / "results").iterdir())
    assert files and not [f for f in files if not any(p.match(f) for p in patterns)]
    assert (ROOT / "benchmarks" / "results" / "recorded-step-cpu.txt").exists()


def test_run_writes_the_results_file_in_place_with_its_provenance(tmp_path):
    """``run.py NAME -- ARGS`` runs the script with its recorded arguments and ARGS, echoes its output, and
    overwrites the results file with a first line naming the command, machine and commit."""
    stale = tmp_path / "fit-testbox.txt"
    stale.write_text("an earlier run\n")
    done = subprocess.run([sys.executable, "benchmarks/run.py", "fit", "--machine", "testbox", "--results-dir",
                           str(tmp_path), "--", "--rounds", "1", "--epochs", "1"],
                          cwd=ROOT, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr[-2000:]
    lines = stale.read_text().splitlines()
    assert lines[0].startswith("# python3 benchmarks/bench_fit.py --rounds 21 --rounds 1 --epochs 1")
    assert "machine testbox" in lines[0] and "commit " in lines[0]
    assert [line.split()[0] for line in lines[2:]] == ["loop", "loop+metrics", "fit"]
    assert "\n".join(lines[1:]) in done.stdout and "an earlier run" not in stale.read_text()
    assert [p.name for p in tmp_path.iterdir()] == ["fit-testbox.txt"]


def test_run_lists_benchmarks_and_refuses_unknown_names(capsys):
    from benchmarks import run
    assert run.main(["--list", "--machine", "cpu"]) == 0
    listing = capsys.readouterr().out
    for bench in run.BENCHMARKS.values():
        assert f"{bench.name}  (benchmarks/{bench.script}" in listing
    assert "benchmarks/results/recorded-step-cpu.txt" in listing and "<= 1.3x" in listing
    assert run.main(["no-such-bench", "--machine", "cpu"]) == 2
    assert "unknown benchmark 'no-such-bench'" in capsys.readouterr().err
    assert run.main(["--show", "fit", "--machine", "cpu"]) == 0
    assert capsys.readouterr().out == (ROOT / "benchmarks" / "results" / "fit-cpu.txt").read_text()


def test_benchmarks_page_quotes_results_files_verbatim():
    """Every ```text block of docs/benchmarks.md is a run of consecutive lines of a file in benchmarks/results/
    (pasted from a script's output, never typed)."""
    results = [[line.rstrip() for line in p.read_text().splitlines()]
               for p in (ROOT / "benchmarks" / "results").glob("*.txt")]
    page = (ROOT / "docs" / "benchmarks.md").read_text()
    blocks = re.findall(r"^```text\n(.*?)^```", page, flags=re.S | re.M)
    assert len(blocks) >= 3
    for block in blocks:
        lines = [line.rstrip() for line in block.rstrip("\n").splitlines()]
        assert any(lines == f[i:i + len(lines)] for f in results for i in range(len(f))), (
            "docs/benchmarks.md quotes output found in no file of benchmarks/results/ (paste the current "
            "`python3 benchmarks/run.py --show NAME` instead):\n" + block[:300])
