"""Fuzzing the readers: mutated files load with the same content or fail with FormatError, never otherwise.

Byte-level mutations (bit flips, overwritten bytes, boundary integers written over
length and size fields, insertions, deletions, truncation) hit hybrid's .npz
parameter files, sealed symbol files, checkpoint manifests and MXNet .params files.
Structure-level mutations replace values inside a symbol document (then re-seal it,
so the checksum does not hide the validators) and inside MXNet symbol JSON. The
byte readers must also never allocate much more memory than the file holds.
"""
import json
import os
import pathlib
import struct
import subprocess
import sys
import time
import tracemalloc

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import hybrid
from hybrid import SymbolBlock, nn, serialization
from hybrid.export import FormatError, load_checkpoint, load_parameter_file, parse_mxnet_params, save_checkpoint
from hybrid.formats.jsonfile import seal

from helpers import conv_symbol, conv_weights, mx_params, processes

ROOT = pathlib.Path(__file__).resolve().parent.parent

FUZZ = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
BOUNDARY = [0, 1, 0x7F, 0x80, 0xFF, 0xFFFF, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFF, 2 ** 63 - 1, 2 ** 64 - 1]


@st.composite
def mutations(draw, size):
    """A list of 1 to 4 edits, each (kind, position, argument)."""
    edits = []
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(["flip", "byte", "int", "insert", "delete", "truncate"]))
        position = draw(st.integers(0, max(size - 1, 0)))
        if kind == "flip":
            argument = 1 << draw(st.integers(0, 7))
        elif kind == "byte":
            argument = draw(st.integers(0, 255))
        elif kind == "int":
            argument = (draw(st.sampled_from(BOUNDARY)), draw(st.sampled_from([4, 8])))
        elif kind == "insert":
            argument = draw(st.binary(min_size=1, max_size=8))
        else:
            argument = draw(st.integers(1, 64))
        edits.append((kind, position, argument))
    return edits


def mutate(data: bytes, edits) -> bytes:
    data = bytearray(data)
    for kind, position, argument in edits:
        position = min(position, max(len(data) - 1, 0))
        if kind == "flip" and data:
            data[position] ^= argument
        elif kind == "byte" and data:
            data[position] = argument
        elif kind == "int":
            value, width = argument
            data[position:position + width] = (value % 2 ** (8 * width)).to_bytes(width, "little")
        elif kind == "insert":
            data[position:position] = argument
        elif kind == "delete":
            del data[position:position + argument]
        elif kind == "truncate":
            del data[position:]
    return bytes(data)


def peak_allocation(fn):
    tracemalloc.start()
    try:
        result = fn()
    finally:
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    return result, peak


def same_arrays(a, b):
    return sorted(a) == sorted(b) and all(a[k].dtype == b[k].dtype and np.array_equal(a[k], b[k]) for k in a)


@pytest.fixture(scope="module")
def npz_file(tmp_path_factory):
    hybrid.random.seed(0)
    net = nn.HybridSequential()
    net.add(nn.Dense(5, in_units=4), nn.BatchNorm(in_channels=5))
    net.initialize()
    path = tmp_path_factory.mktemp("npz") / "net.params"
    net.save_parameters(str(path))
    return path.read_bytes(), load_parameter_file(str(path))


@FUZZ
@given(data=st.data())
def test_fuzz_npz_parameter_files(npz_file, tmp_path, data):
    original, content = npz_file
    mutated = mutate(original, data.draw(mutations(len(original))))
    path = tmp_path / "m.params"
    path.write_bytes(mutated)
    try:
        loaded, peak = peak_allocation(lambda: load_parameter_file(str(path)))
    except FormatError:
        return
    assert same_arrays(loaded, content)
    assert peak < 4 * len(mutated) + (1 << 20)


@FUZZ
@given(data=st.data())
def test_fuzz_mxnet_parameter_files(data):
    original = mx_params({**conv_weights(), "arg:half": np.arange(4, dtype=np.float16)})
    mutated = mutate(original, data.draw(mutations(len(original))))
    try:
        loaded, peak = peak_allocation(lambda: parse_mxnet_params(mutated, "fuzz"))
    except FormatError:
        return
    assert all(isinstance(v, np.ndarray) for v in loaded.values())  # no checksum in MXNet's format: only sanity
    assert peak < 4 * len(mutated) + (1 << 20)


@pytest.fixture(scope="module")
def symbol_file(tmp_path_factory):
    hybrid.random.seed(0)
    net = nn.HybridSequential()
    net.add(nn.Dense(3, in_units=4, activation="tanh"), nn.BatchNorm(in_channels=3), nn.Dropout(0.5))
    net.initialize()
    net.hybridize()
    x = np.linspace(-1, 1, 8, dtype=np.float32).reshape(2, 4)
    net(x)
    sym, params = net.export(str(tmp_path_factory.mktemp("sym") / "net"))
    return open(sym, "rb").read(), params, x, np.asarray(net(x))


@FUZZ
@given(data=st.data())
def test_fuzz_symbol_file_bytes(symbol_file, tmp_path, data):
    original, params, x, expected = symbol_file
    mutated = mutate(original, data.draw(mutations(len(original))))
    path = tmp_path / "m-symbol.json"
    path.write_bytes(mutated)
    try:
        block = SymbolBlock.imports(str(path), None, params)
    except FormatError:
        return
    np.testing.assert_array_equal(np.asarray(block(x)), expected)  # only formatting changed


def json_values():
    scalars = st.one_of(st.none(), st.booleans(), st.integers(-2 ** 70, 2 ** 70), st.sampled_from(BOUNDARY),
                        st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=8),
                        st.sampled_from(["float32", "key<fry>", "%0", "data0", "0.weight", "dense", "tanh", "op",
                                         "prim", "object", "nan"]))
    return st.recursive(scalars, lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.sampled_from(
            ["float", "dtype", "enum", "struct", "fields", "list", "dict", "name", "shape", "value", "base64"]),
            inner, max_size=3)), max_leaves=8)


def paths(doc, prefix=()):
    """Every (container, key) location in a JSON document."""
    items = doc.items() if isinstance(doc, dict) else enumerate(doc) if isinstance(doc, list) else []
    for key, value in items:
        yield doc, key, prefix + (key,)
        yield from paths(value, prefix + (key,))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_fuzz_symbol_document_structure(symbol_file, tmp_path, data):
    original, params, x, _ = symbol_file
    doc = json.loads(original)
    for _ in range(data.draw(st.integers(1, 3))):
        locations = [loc for loc in paths(doc) if loc[2][0] not in ("checksum",)]
        container, key, _ = data.draw(st.sampled_from(locations))
        if data.draw(st.booleans()) and isinstance(container, dict):
            del container[key]
        else:
            container[key] = data.draw(json_values())
    path = tmp_path / "s-symbol.json"
    path.write_text(json.dumps(seal(doc)))
    try:
        block = SymbolBlock.imports(str(path), None, params)
    except FormatError:
        return
    except ValueError as exc:  # parameter file and symbol disagree (names, shapes): a clean refusal too
        assert "parameter" in str(exc) or "input_names" in str(exc)
        return
    block(x)  # a document that passes every check runs


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_fuzz_mxnet_symbol_structure(tmp_path, data):
    doc = conv_symbol()
    for _ in range(data.draw(st.integers(1, 3))):
        container, key, _ = data.draw(st.sampled_from(list(paths(doc))))
        container[key] = data.draw(json_values())
    (tmp_path / "w.params").write_bytes(mx_params(conv_weights()))
    path = tmp_path / "mx-symbol.json"
    path.write_text(json.dumps(doc))
    try:
        SymbolBlock.imports(str(path), "data", str(tmp_path / "w.params"))
    except (FormatError, ValueError):
        pass


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    directory = tmp_path_factory.mktemp("ckpt")
    hybrid.random.seed(0)
    net = nn.Dense(2, in_units=2)
    net.initialize()
    manifest = pathlib.Path(save_checkpoint(directory, net, step=7, extra={"note": "x"})) / "checkpoint.json"
    return directory, net, manifest, manifest.read_bytes()


@FUZZ
@given(data=st.data())
def test_fuzz_checkpoint_manifest(checkpoint, data):
    directory, net, manifest, original = checkpoint
    manifest.write_bytes(mutate(original, data.draw(mutations(len(original)))))
    try:
        meta = load_checkpoint(directory, net)
    except FormatError:
        return
    assert (meta["step"], meta["epoch"], meta["extra"]) == (7, 0, {"note": "x"})


def test_mutation_helper_applies_edits():
    assert mutate(b"\x00\x01\x02", [("flip", 0, 1)]) == b"\x01\x01\x02"
    assert mutate(b"abcd", [("truncate", 2, 1)]) == b"ab"
    assert mutate(b"abcd", [("int", 0, (2 ** 32 - 1, 4))]) == b"\xff\xff\xff\xff"
    assert mutate(b"abcd", [("insert", 1, b"zz"), ("delete", 0, 1)]) == b"zzbcd"
    assert struct.unpack("<Q", mutate(bytes(8), [("int", 0, (2 ** 64 - 1, 8))]))[0] == 2 ** 64 - 1


def test_member_flagged_as_encrypted_is_rejected(tmp_path):
    """Found by the fuzz test: zipfile raises RuntimeError for members marked encrypted."""
    path = tmp_path / "net.params"
    serialization.save_arrays(path, {"w": np.ones(3, np.float32)})
    data = bytearray(path.read_bytes())
    data[data.index(b"PK\x01\x02") + 8] |= 1
    data[data.index(b"PK\x03\x04") + 6] |= 1
    path.write_bytes(bytes(data))
    with pytest.raises(serialization.FormatError, match="encrypted"):
        serialization.load_arrays(path)


@pytest.fixture(scope="module")
def deployment(tmp_path_factory):
    from hybrid.export import export_deployment
    directory = tmp_path_factory.mktemp("deploy")
    net = nn.Dense(2, in_units=3)
    net.initialize()
    path = str(directory / "net.jaxexport")
    export_deployment(net, path, np.ones((1, 3), np.float32))
    return path, open(path, "rb").read()


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_fuzz_forged_deployment_with_a_matching_checksum(deployment, data):
    """A damaged module whose checksum file was recomputed (a forgery) is refused or runs; loading never
    takes the process down (each load compiles in a checking child process first)."""
    from hybrid.export import load_deployment
    from hybrid.formats.jsonfile import sha256_hex
    path, original = deployment
    forged = mutate(original, data.draw(mutations(len(original))))
    forged_path = path + ".forged"
    with open(forged_path, "wb") as handle:
        handle.write(forged)
    with open(forged_path + ".sha256", "w") as handle:
        handle.write(f"{sha256_hex(forged)}  {os.path.basename(forged_path)}\n")
    try:
        run = load_deployment(forged_path)
    except FormatError:
        return
    try:
        run(np.ones((1, 3), np.float32))
    except Exception:  # noqa: BLE001 - a module that compiled may still reject inputs; it must not crash
        pass


def test_a_deployment_that_crashes_the_compiler_is_refused(deployment, monkeypatch):
    from hybrid.export import deploy
    monkeypatch.setattr(deploy, "_CHILD", "import os, signal; os.kill(os.getpid(), signal.SIGSEGV)")
    with pytest.raises(FormatError, match=r"crashed the compiler \(SIGSEGV\).*damaged or forged"):
        deploy.load_deployment(deployment[0])


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_fuzz_export_pair(tmp_path_factory, data):
    """Damaged parameter files beside their symbol file are refused with FormatError (or load the same)."""
    directory = tmp_path_factory.mktemp("pair")
    net = nn.Dense(2, in_units=3)
    net.initialize()
    net.hybridize()
    net(np.ones((1, 3), np.float32))
    sym, params = net.export(str(directory / "net"))
    original = open(params, "rb").read()
    damaged = mutate(original, data.draw(mutations(len(original))))
    with open(params, "wb") as handle:
        handle.write(damaged)
    try:
        imported = SymbolBlock.imports(sym, "data", params)
    except FormatError:
        assert damaged != original
        return
    assert damaged == original
    np.testing.assert_array_equal(np.asarray(imported(np.ones((1, 3), np.float32))),
                                  np.asarray(net(np.ones((1, 3), np.float32))))


def test_a_deployment_whose_check_spins_is_refused_within_its_time_limit(deployment, monkeypatch):
    from hybrid.export import deploy
    monkeypatch.setattr(deploy, "_CHILD", "while True: pass")
    monkeypatch.setattr(deploy, "CHECK_BASE_SECONDS", 3.0)
    start = time.monotonic()
    with pytest.raises(FormatError, match=r"did not finish in 3 s .*damaged or forged"):
        deploy.load_deployment(deployment[0])
    assert time.monotonic() - start < 15


def test_the_check_time_limit_grows_with_the_module_size():
    from hybrid.export import deploy
    assert deploy.check_timeout(4096) < 25
    assert deploy.check_timeout(50 * 2 ** 20) > deploy.check_timeout(2 ** 20) > deploy.check_timeout(4096)
    assert deploy.check_timeout(10 ** 12) == 600


def _children_of(pid: int) -> list[int]:
    return [child for child, (parent, _, _) in processes().items() if parent == pid]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc to find the checking process")
def test_the_checking_process_dies_with_the_loading_process(deployment):
    """Killing a process while its load waits on the compile check leaves no checking process behind."""
    script = (f"import sys; sys.path.insert(0, {str(ROOT)!r})\n"
              "from hybrid.export import deploy\n"
              "deploy._CHILD = 'while True: pass'\n"
              f"deploy.load_deployment({deployment[0]!r})\n")
    loader = subprocess.Popen([sys.executable, "-c", script])
    try:
        deadline = time.monotonic() + 60
        while not _children_of(loader.pid):
            assert loader.poll() is None and time.monotonic() < deadline, "the load never started its check"
            time.sleep(0.1)
        checker = _children_of(loader.pid)[0]
        time.sleep(0.5)  # let the checker set up its parent-death guard
    finally:
        loader.kill()
        loader.wait()
    deadline = time.monotonic() + 10
    while _running(checker) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _running(checker), "the checking process outlived the loading process"


def _running(pid: int) -> bool:
    """Whether ``pid`` exists and has not exited (a zombie waits only for init to reap it)."""
    entry = processes().get(pid)
    return entry is not None and entry[1] != "Z"
