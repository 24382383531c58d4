"""The corpus's cases, in the groups the test files run (one file a group, so that pytest's workers share
them), and the replay of one case in a fresh interpreter."""
import glob
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
with open(os.path.join(HERE, "scripts", "arguments.json")) as _f:  # whole scripts, with their command lines
    SCRIPT_CASES = sorted("scripts/" + name for name in json.load(_f))
CASES = sorted(os.path.relpath(p, HERE)[:-3] for p in glob.glob(os.path.join(HERE, "d2l", "*", "*.py"))) \
    + SCRIPT_CASES
# test file -> the d2l chapters (or "scripts") whose cases it runs; a section named on its own
# ("chapter/section") goes to that file rather than its chapter's
GROUPS = {
    "test_mxnet_corpus.py": ("chapter_preliminaries", "chapter_linear-regression", "chapter_linear-classification",
                             "chapter_multilayer-perceptrons", "chapter_builders-guide", "scripts"),
    "test_mxnet_corpus_vision.py": ("chapter_convolutional-neural-networks", "chapter_convolutional-modern"),
    "test_mxnet_corpus_sequences.py": ("chapter_recurrent-neural-networks", "chapter_recurrent-modern",
                                       "chapter_attention-mechanisms-and-transformers"),
    "test_mxnet_corpus_optimization.py": ("chapter_optimization", "chapter_computational-performance"),
    "test_mxnet_corpus_adaptive.py": ("chapter_optimization/rmsprop", "chapter_optimization/adam",
                                      "chapter_optimization/adadelta", "chapter_optimization/adagrad"),
}
# Cases whose replay takes more than a minute on one busy core (pytest -m "not slow" leaves them out).
SLOW = {"d2l/chapter_optimization/minibatch-sgd", "d2l/chapter_optimization/rmsprop", "d2l/chapter_optimization/adam",
        "d2l/chapter_optimization/adadelta", "d2l/chapter_optimization/momentum",
        "d2l/chapter_convolutional-modern/batch-norm", "d2l/chapter_recurrent-modern/gru",
        "d2l/chapter_recurrent-neural-networks/rnn-scratch"}


def file_of(case):
    """The test file that runs ``case``."""
    parts = case.split("/")
    names = [parts[0]] if parts[0] == "scripts" else ["/".join(parts[1:3]), parts[1]]
    for name in names:
        for test_file, groups in GROUPS.items():
            if name in groups:
                return test_file
    return None


def cases_of(test_file):
    """The cases ``test_file`` runs."""
    return [c for c in CASES if file_of(c) == test_file]


def reference_of(case):
    return os.path.join(HERE, "references", case.split("/", 1)[1].replace("/", "__") + ".npz")


def replay(case, cwd):
    """Replay ``case`` under hybrid.mxnet in a fresh interpreter (files it writes land in ``cwd``); returns
    (exit status, stderr's tail, the list of differences from MXNet's reference)."""
    env = dict(os.environ, MPLBACKEND="Agg")
    result = subprocess.run([sys.executable, os.path.join(HERE, "harness.py"), "replay",
                             os.path.join(HERE, case + ".py"), reference_of(case)],
                            capture_output=True, text=True, env=env, timeout=900, cwd=cwd)
    if result.returncode != 0:
        return result.returncode, result.stderr[-3000:], None
    lines = result.stdout.splitlines()
    start = max(i for i, line in enumerate(lines) if line.startswith("["))
    return 0, "", json.loads("\n".join(lines[start:]))


def parameters(test_file):
    """pytest's parameters for the cases ``test_file`` runs, the slow ones marked."""
    import pytest
    return [pytest.param(c, marks=pytest.mark.slow) if c in SLOW else c for c in cases_of(test_file)]


def check(case, cwd):
    """Assert that ``case`` replays under hybrid.mxnet with MXNet's numbers (for the corpus test files)."""
    status, stderr, problems = replay(case, cwd)
    assert status == 0, stderr
    assert problems == [], "\n".join(problems)
