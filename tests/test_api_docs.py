"""Generated docs stay in step with the code: docs/api-reference.md is the script's output, it names every
public object, and docs/porting-from-gluon.md covers hybrid's Gluon-facing names with working links."""
import importlib.util
import os
import re

import pytest

import hybrid

DOCS = os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, "docs")


def _generator():
    spec = importlib.util.spec_from_file_location("gen_api_reference", os.path.join(DOCS, "gen_api_reference.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _read(name):
    with open(os.path.join(DOCS, name), encoding="utf-8") as f:
        return f.read()


def test_api_reference_is_up_to_date():
    assert _read("api-reference.md") == _generator().render(), \
        "docs/api-reference.md is out of date: run python docs/gen_api_reference.py and commit the result"


def test_api_reference_names_every_public_object():
    generator, text = _generator(), _read("api-reference.md")
    modules = generator.walk_modules()
    assert {"hybrid.nn", "hybrid.rnn", "hybrid.model_zoo", "hybrid.data.vision.transforms"} <= \
        {m.__name__ for m in modules}
    for module in modules:
        assert f"\n## {module.__name__}\n" in text
        for name in generator.public_names(module):
            if not isinstance(getattr(module, name), type(hybrid)):
                assert f"### `{module.__name__}.{name}`" in text or f"`{name}` (see `" in text, (module, name)
    assert "### `hybrid.model_zoo.get_model`\n\n```python\nget_model(name: str, **kwargs: Any) -> HybridBlock" in text
    assert "`SoftmaxCELoss` (see `hybrid.loss.SoftmaxCrossEntropyLoss`)" in text


def test_signatures_have_no_memory_addresses():
    generator = _generator()
    assert generator.signature(hybrid.Block.initialize).startswith("(self, init: Any = Uniform(scale=0.07),")
    assert " at 0x" not in _read("api-reference.md")


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


@pytest.mark.parametrize("page", ["porting-from-gluon.md", "api-reference.md"])
def test_relative_links_resolve(page):
    anchor = _generator().anchor
    for target, fragment in re.findall(r"\]\(([\w.-]*)(?:#([\w-]+))?\)", _read(page)):
        path = os.path.join(DOCS, target or page)
        assert os.path.exists(path), f"{page} links to missing {target}"
        if fragment:
            headings = re.findall(r"^#+ (.+)$", _read(os.path.basename(path)), re.M)
            assert fragment in {anchor(h) for h in headings}, f"{page}: no heading #{fragment} in {target or page}"
