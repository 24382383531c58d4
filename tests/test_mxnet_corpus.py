"""Real MXNet code, unchanged, under ``hybrid.mxnet.install()``: the corpus of ``tests/mxnet_corpus``.

Each case (the MXNet cells of a d2l-en section, ...) runs in a fresh interpreter through the harness,
which replays MXNet 1.9.1's random draws, parameter inits and data order from the case's reference, and
must give MXNet's values for every cell and MXNet's loss at every ``backward()`` (rtol 1e-4). A case whose
training amplifies float32 rounding until MXNet reseeded ends elsewhere too (``harness.CHAOTIC``, with the
measured spread) compares its first steps so and then its final losses within that spread.
"""
import glob
import json
import os
import subprocess
import sys

import pytest

CORPUS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "mxnet_corpus")
with open(os.path.join(CORPUS, "scripts", "arguments.json")) as _f:  # whole scripts, with their command lines
    SCRIPT_CASES = sorted("scripts/" + name for name in json.load(_f))
CASES = sorted(os.path.relpath(p, CORPUS)[:-3] for p in glob.glob(os.path.join(CORPUS, "d2l", "*", "*.py"))) \
    + SCRIPT_CASES
# Cases whose replay takes more than a minute on one busy core (pytest -m "not slow" leaves them out).
SLOW = {"d2l/chapter_optimization/minibatch-sgd", "d2l/chapter_optimization/rmsprop", "d2l/chapter_optimization/adam",
        "d2l/chapter_optimization/adadelta", "d2l/chapter_optimization/momentum",
        "d2l/chapter_convolutional-modern/batch-norm"}


def reference_of(case):
    return os.path.join(CORPUS, "references", case.split("/", 1)[1].replace("/", "__") + ".npz")


def test_every_case_has_an_mxnet_reference():
    assert len(CASES) >= 7
    missing = [c for c in CASES
               if not os.path.exists(reference_of(c)) or not os.path.exists(os.path.join(CORPUS, c + ".py"))]
    assert not missing, f"record them with MXNet: python harness.py record <case> <reference> ({missing})"


@pytest.mark.parametrize("case", SCRIPT_CASES)
def test_a_script_ran_to_its_end_under_mxnet(case):
    """A script's reference is one run of the whole script: MXNet raised nothing and trained."""
    sys.path.insert(0, CORPUS)
    import harness
    reference = harness.load_reference(reference_of(case))
    assert reference["errors"] == [] and reference["observed"] == ["-"] and reference["losses"]


@pytest.mark.parametrize("case", [pytest.param(c, marks=pytest.mark.slow) if c in SLOW else c for c in CASES])
def test_case_runs_unchanged_and_gives_mxnets_numbers(case, tmp_path):
    env = dict(os.environ, MPLBACKEND="Agg")
    result = subprocess.run([sys.executable, os.path.join(CORPUS, "harness.py"), "replay",
                             os.path.join(CORPUS, case + ".py"), reference_of(case)],
                            capture_output=True, text=True, env=env, timeout=900, cwd=tmp_path)  # the files a case writes land there
    assert result.returncode == 0, result.stderr[-3000:]
    lines = result.stdout.splitlines()
    start = max(i for i, line in enumerate(lines) if line.startswith("["))
    problems = json.loads("\n".join(lines[start:]))
    assert problems == [], "\n".join(problems)


def test_the_alias_page_lists_every_case():
    """docs/mxnet-alias.md's corpus table is written by tests/mxnet_corpus/report.py: it must name each case."""
    with open(os.path.join(CORPUS, "..", "..", "docs", "mxnet-alias.md")) as f:
        text = f.read()
    table = text[text.index("<!-- corpus table"):text.index("<!-- end of corpus table -->")]
    listed = sorted(["d2l/" + line.split("`")[1] for line in table.splitlines() if line.startswith("| d2l-en")]
                    + ["scripts/example_gluon/" + line.split("`")[3].split(".py")[0]
                       for line in table.splitlines() if line.startswith("| MXNet 1.9.1")])
    assert listed == CASES, "run python tests/mxnet_corpus/report.py"
