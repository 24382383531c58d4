"""docs/porting-from-gluon.md covers hybrid's Gluon-facing names (the API pages of the site, built by
tests/test_docs_site.py, cover every public name)."""
import os
import re

import pytest

import hybrid

DOCS = os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, "docs")


def _read(name):
    with open(os.path.join(DOCS, name), encoding="utf-8") as f:
        return f.read()


GLUON_MODULES = [hybrid.nn, hybrid.rnn, hybrid.loss, hybrid.lr_scheduler, hybrid.metric, hybrid.init,
                 hybrid.autograd, hybrid.data, hybrid.data.vision, hybrid.data.vision.transforms,
                 hybrid.data.batchify, hybrid.utils, hybrid.estimator, hybrid.amp]


@pytest.mark.parametrize("module", GLUON_MODULES, ids=lambda m: m.__name__)
def test_porting_page_covers_every_name(module):
    text = _read("porting-from-gluon.md")
    missing = [n for n in module.__all__ if not re.search(rf"(?<!\w){re.escape(n)}\b", text)]
    assert not missing, f"add {missing} of {module.__name__} to docs/porting-from-gluon.md"


def test_porting_page_covers_optimizers_models_and_core():
    text = _read("porting-from-gluon.md")
    names = [f"'{n}'" for n in hybrid.optimizer.optimizer._REGISTRY] + hybrid.model_zoo.get_model_list() + \
        ["Block", "HybridBlock", "SymbolBlock", "Parameter", "Constant", "Trainer", "hybrid.compile"]
    missing = [n for n in names if n not in text]
    assert not missing, f"add {missing} to docs/porting-from-gluon.md"
