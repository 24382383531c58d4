"""The corpus cases of d2l's recurrent and attention chapters (see tests/test_mxnet_corpus.py, which checks the corpus as a whole)."""
import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "mxnet_corpus"))
import catalogue  # noqa: E402


@pytest.mark.parametrize("case", catalogue.parameters(os.path.basename(__file__)))
def test_case_runs_unchanged_and_gives_mxnets_numbers(case, tmp_path):
    catalogue.check(case, tmp_path)
