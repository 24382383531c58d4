"""Real MXNet code, unchanged, under ``hybrid.mxnet.install()``: the corpus of ``tests/mxnet_corpus``.

Each case (the MXNet cells of a d2l-en section, ...) runs in a fresh interpreter through the harness,
which replays MXNet 1.9.1's random draws, parameter inits and data order from the case's reference, and
must give MXNet's values for every cell and MXNet's loss at every ``backward()`` (rtol 1e-4). A case whose
training amplifies float32 rounding until MXNet reseeded ends elsewhere too (``harness.CHAOTIC``, with the
measured spread) compares its first steps so and then its final losses within that spread.
"""
import os
import sys

import pytest

CORPUS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "mxnet_corpus")
sys.path.insert(0, CORPUS)
import catalogue  # noqa: E402
from catalogue import CASES, SCRIPT_CASES, reference_of  # noqa: E402


def test_every_case_has_an_mxnet_reference():
    assert len(CASES) >= 7
    missing = [c for c in CASES
               if not os.path.exists(reference_of(c)) or not os.path.exists(os.path.join(CORPUS, c + ".py"))]
    assert not missing, f"record them with MXNet: python harness.py record <case> <reference> ({missing})"


@pytest.mark.parametrize("case", SCRIPT_CASES)
def test_a_script_ran_to_its_end_under_mxnet(case):
    """A script's reference is one run of the whole script: MXNet raised nothing and trained."""
    import harness
    reference = harness.load_reference(reference_of(case))
    assert reference["errors"] == [] and reference["observed"] == ["-"] and reference["losses"]


def test_every_case_is_run_by_a_test_file():
    assert [c for c in CASES if catalogue.file_of(c) is None] == []
    here = os.path.dirname(os.path.abspath(__file__))
    assert all(os.path.exists(os.path.join(here, f)) for f in catalogue.GROUPS)


@pytest.mark.parametrize("case", catalogue.parameters(os.path.basename(__file__)))
def test_case_runs_unchanged_and_gives_mxnets_numbers(case, tmp_path):
    catalogue.check(case, tmp_path)


def test_the_alias_page_lists_every_case():
    """docs/mxnet-alias.md's corpus table is written by tests/mxnet_corpus/report.py: it must name each case."""
    with open(os.path.join(CORPUS, "..", "..", "docs", "mxnet-alias.md")) as f:
        text = f.read()
    table = text[text.index("<!-- corpus table"):text.index("<!-- end of corpus table -->")]
    listed = sorted(["d2l/" + line.split("`")[1] for line in table.splitlines() if line.startswith("| d2l-en")]
                    + ["scripts/example_gluon/" + line.split("`")[3].split(".py")[0]
                       for line in table.splitlines() if line.startswith("| MXNet 1.9.1")])
    assert listed == CASES, "run python tests/mxnet_corpus/report.py"
