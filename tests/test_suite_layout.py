"""The test suite's layout: test modules are organised by subject, share code only through helper
modules (helpers.py, conftest.py, references*.py, ...), and never import one another."""
import ast
from pathlib import Path

TESTS = Path(__file__).parent


def _test_module_imports(path, test_modules):
    """The imports in ``path`` (at any depth: module level, functions, classes) that name one of
    ``test_modules``, plainly (``test_x``), from the package (``tests.test_x``, ``tests.compat.test_x``)
    or relatively (``from . import test_x``, ``from .test_x import f``)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            names = [base] if base else []
            names += [f"{base}.{alias.name}" if base else alias.name for alias in node.names]
        else:
            continue
        for name in names:
            parts = name.split(".")
            while parts and parts[0] in ("tests", "compat"):
                parts = parts[1:]
            if parts and parts[0] in test_modules:
                found.add(parts[0])
    return found


CORPUS_CODE = (TESTS / "mxnet_corpus" / "d2l", TESTS / "mxnet_corpus" / "scripts")  # MXNet users' code, unchanged


def test_no_module_of_the_suite_imports_a_test_module():
    files = sorted(p for p in TESTS.rglob("*.py") if not any(folder in p.parents for folder in CORPUS_CODE))
    test_modules = {p.stem for p in files if p.name.startswith("test_")}
    assert {"test_layers", "test_loss", "test_passes"} <= test_modules
    offenders = [f"{path.relative_to(TESTS)} imports {', '.join(sorted(found))}" for path in files
                 if (found := _test_module_imports(path, test_modules))]
    assert not offenders, "move what they share into tests/helpers.py: " + "; ".join(offenders)


def test_the_scan_finds_every_form_of_import(tmp_path):
    source = tmp_path / "sample.py"
    source.write_text("import numpy, test_a\nfrom test_b import f\nfrom tests.compat.test_c import g\n"
                      "from . import test_d\nfrom .test_e import h\nimport helpers\n"
                      "def later():\n    import tests.test_f as f\n")
    modules = {f"test_{c}" for c in "abcdefg"}
    assert _test_module_imports(source, modules) == modules - {"test_g"}
    assert _test_module_imports(source, {"test_g"}) == set()


def test_no_leftover_modules():
    leftovers = sorted(str(p.relative_to(TESTS)) for p in TESTS.rglob("*_extra.py"))
    assert not leftovers, f"merge these into the modules of their subject: {leftovers}"
