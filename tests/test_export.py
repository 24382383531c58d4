"""Symbol export and import: round trips, fine-tuning, graphs built in code, deployment export, forged files."""
import json
import os
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import hybrid
from hybrid import SymbolBlock, Trainer, autograd, nn
from hybrid.export import ExportError, FormatError, GraphBuilder, export_deployment, load_deployment
from hybrid.formats.jsonfile import seal

from conftest import assert_close
from helpers import run_with_grads


class FreeCode(hybrid.HybridBlock):
    """Layers plus free jax.numpy code (custom_jvp relu, softplus, gather, slicing)."""

    def __init__(self):
        super().__init__()
        self.dense = nn.Dense(6)
        self.bn = nn.BatchNorm()
        self.drop = nn.Dropout(0.3)
        self.out = nn.Dense(3)

    def forward(self, x):
        h = self.bn(self.dense(x))
        h = jax.nn.relu(h) + jnp.tanh(h) * 0.5
        h = self.drop(h)
        pairs = h.reshape(h.shape[0], 2, 3).sum(axis=1)
        picked = jnp.take(pairs, jnp.array([0, 2]), axis=1)
        return self.out(jnp.concatenate([pairs, picked, jax.nn.softplus(pairs[:, ::2])], axis=1))


def exported(net, tmp_path, *inputs, name="net"):
    net.hybridize()
    net(*inputs)
    return net.export(str(tmp_path / name))


def test_export_writes_readable_versioned_json_and_params(tmp_path):
    net = FreeCode()
    net.initialize()
    sym, params = exported(net, tmp_path, np.ones((4, 5), np.float32))
    assert (os.path.basename(sym), os.path.basename(params)) == ("net-symbol.json", "net-0000.params")
    doc = json.load(open(sym))
    assert doc["format"] == "hybrid-symbol" and doc["version"] == 1 and doc["checksum"].startswith("sha256:")
    graphs = doc["signatures"][0]["graphs"]
    assert set(graphs) == {"predict", "train"}  # BatchNorm and dropout make them differ
    ops = [n["op"] for n in graphs["train"]["nodes"]]
    assert {"dense", "batch_norm", "dropout", "tanh", "gather"} <= set(ops)
    assert "custom_jvp_call" not in ops  # jax.nn.relu was inlined as max(x, 0)
    batch_norm = next(n for n in graphs["train"]["nodes"] if n["op"] == "batch_norm")
    assert batch_norm["attrs"]["training"] is True and batch_norm["scope"] == "bn"
    assert [s["param"] for s in graphs["train"]["state_outputs"]] == ["bn.running_mean", "bn.running_var"]
    assert [i["name"] for i in graphs["train"]["inputs"]][-2:] == ["rng_key", "rng_counter"]
    lines = open(sym).read().splitlines()
    assert any(line.strip().startswith('{"op": "dense"') for line in lines)  # one node per line
    assert sorted(np.load(params)) == sorted(p["name"] for p in doc["params"])


def test_import_gives_same_outputs_gradients_state_updates_and_training(tmp_path):
    net = FreeCode()
    net.initialize()
    x = np.random.default_rng(0).standard_normal((4, 5)).astype(np.float32)
    sym, params = exported(net, tmp_path, x)
    imported = SymbolBlock.imports(sym, ["data"], params)
    assert list(imported.collect_params()) == list(net.collect_params())
    assert imported.collect_params()["bn.running_mean"].grad_req == "null"
    assert_close(imported(x), net(x), 1e-6, 1e-6)
    for model in (net, imported):  # un-hybridized, the import draws the same dropout masks as net
        hybrid.random.seed(7)
        model.result = run_with_grads(model, [x], training=True)
    out_a, grads_a = net.result
    out_b, grads_b = imported.result
    assert_close(out_b, out_a, 1e-6, 1e-6)
    assert sorted(grads_b) == sorted(grads_a)
    for name in grads_a:
        assert_close(grads_b[name], grads_a[name], 1e-5, 1e-6)
    for name in ("bn.running_mean", "bn.running_var"):  # the train graph wrote the running statistics back
        assert_close(imported.collect_params()[name].data(), net.collect_params()[name].data(), 1e-6, 1e-7)

    for model in (net, imported):  # fine-tuning: the same SGD trajectory
        trainer = Trainer(model.collect_params(), "sgd", {"learning_rate": 0.5})
        hybrid.random.seed(3)
        for _ in range(2):
            run_with_grads(model, [x], training=True)
            trainer.step(4)
    for name, param in net.collect_params().items():
        assert_close(imported.collect_params()[name].data(), param.data(), 1e-5, 1e-6)
    assert not np.allclose(np.asarray(imported.collect_params()["out.weight"].data()), np.load(params)["out.weight"])


def test_imported_block_hybridizes_and_exports_again(tmp_path):
    net = nn.HybridSequential()
    net.add(nn.Dense(4), nn.BatchNorm(), nn.Dense(2))
    net.initialize()
    x = np.random.default_rng(1).standard_normal((3, 5)).astype(np.float32)
    sym, params = exported(net, tmp_path, x)
    imported = SymbolBlock.imports(sym, None, params)
    sym2, params2 = exported(imported, tmp_path, x, name="again")
    again = SymbolBlock.imports(sym2, None, params2)
    assert_close(again(x), net(x), 1e-6, 1e-6)
    graphs = json.load(open(sym2))["signatures"][0]["graphs"]
    assert [(n["op"], n.get("scope")) for n in graphs["predict"]["nodes"]] == \
        [("dense", "0"), ("batch_norm", "1"), ("dense", "2")]  # block paths survive a second export
    with autograd.record():
        again(x)
    assert_close(again.collect_params()["1.running_mean"].data(),
                 0.1 * (x @ np.load(params)["0.weight"].T + np.load(params)["0.bias"]).mean(0), 1e-5, 1e-6)


def test_every_called_shape_is_exported_and_other_shapes_are_refused(tmp_path):
    net = nn.HybridSequential()
    net.add(nn.Conv2D(3, 3, padding=1, activation="relu"), nn.MaxPool2D(), nn.Flatten(), nn.Dense(2))
    net.initialize()
    net.hybridize()
    small, big = np.ones((1, 2, 6, 6), np.float32), np.random.default_rng(2).random((3, 2, 6, 6), np.float32)
    net(small)
    net(big)
    sym, params = net.export(str(tmp_path / "net"))
    imported = SymbolBlock.imports(sym, "data", params)
    assert_close(imported(small), net(small), 1e-6, 1e-6)
    assert_close(imported(big), net(big), 1e-6, 1e-6)
    with pytest.raises(hybrid.errors.ShapeError, match=r"holds graphs for inputs data: float32\[1, 2, 6, 6\]"):
        imported(np.ones((2, 2, 6, 6), np.float32))
    with pytest.raises(TypeError, match="dtypes"):
        imported(np.ones((1, 2, 6, 6), np.int32))


def test_input_names_order_the_data_inputs(tmp_path):
    class Two(hybrid.HybridBlock):
        def __init__(self):
            super().__init__()
            self.dense = nn.Dense(2, in_units=3)

        def forward(self, a, b):
            return self.dense(a) - b

    net = Two()
    net.initialize()
    a, b = np.ones((2, 3), np.float32), np.full((2, 2), 5.0, np.float32)
    sym, params = exported(net, tmp_path, a, b)
    swapped = SymbolBlock.imports(sym, ["data1", "data0"], params)
    assert_close(swapped(b, a), net(a, b))
    with pytest.raises(ValueError, match=r"must name the data inputs \['data0', 'data1'\]"):
        SymbolBlock.imports(sym, ["data"], params)


def test_without_param_file_parameters_start_uninitialised(tmp_path):
    net = nn.Dense(2, in_units=3)
    net.initialize()
    sym, params = exported(net, tmp_path, np.ones((1, 3), np.float32))
    fresh = SymbolBlock.imports(sym)
    with pytest.raises(hybrid.errors.UninitializedParameterError):
        fresh(np.ones((1, 3), np.float32))
    fresh.load_parameters(params)
    assert_close(fresh(np.ones((1, 3), np.float32)), net(np.ones((1, 3), np.float32)))


@pytest.mark.parametrize("fail_at", ["write", "rename"])
def test_interrupted_export_leaves_the_previous_pair_intact(tmp_path, monkeypatch, fail_at):
    """A full disk while writing, or a failed rename of the second file, leaves the previous pair."""
    net = nn.Dense(2, in_units=3)
    net.initialize()
    x = np.ones((1, 3), np.float32)
    sym, params = exported(net, tmp_path, x)
    before = (open(sym, "rb").read(), open(params, "rb").read())
    expected = np.asarray(net(x))
    net.weight.set_data(np.zeros((2, 3), np.float32))
    if fail_at == "write":
        real_fsync = os.fsync
        calls = []

        def fsync(fd):
            calls.append(fd)
            if len(calls) == 2:  # the second file of the pair
                raise OSError(28, "No space left on device")
            real_fsync(fd)
        monkeypatch.setattr(os, "fsync", fsync)
    else:
        real_replace = os.replace

        def replace(src, dst):
            if str(dst).endswith("-symbol.json"):
                raise OSError(5, "Input/output error")
            real_replace(src, dst)
        monkeypatch.setattr(os, "replace", replace)
    with pytest.raises(OSError) as info:
        net.export(str(tmp_path / "net"))
    monkeypatch.undo()
    if fail_at == "write":
        assert "net-symbol.json" in str(info.value)  # the error names the file
    assert (open(sym, "rb").read(), open(params, "rb").read()) == before
    assert sorted(os.listdir(tmp_path)) == ["net-0000.params", "net-symbol.json"]  # no temporary file left
    assert_close(SymbolBlock.imports(sym, None, params)(x), expected)


def test_a_pair_from_two_exports_is_refused(tmp_path):
    """A crash between the two renames leaves the new parameter file beside the old symbol file: the
    symbol file's digest of its parameter file refuses that pair."""
    net = nn.Dense(2, in_units=3)
    net.initialize()
    x = np.ones((1, 3), np.float32)
    sym, params = exported(net, tmp_path, x)
    old_params = open(params, "rb").read()
    net.weight.set_data(np.zeros((2, 3), np.float32))
    net.export(str(tmp_path / "new"))
    with open(params, "wb") as handle:  # the new parameters beside the old symbol file
        handle.write(open(tmp_path / "new-0000.params", "rb").read())
    with pytest.raises(FormatError, match="was exported with another parameter file.*not written together"):
        SymbolBlock.imports(sym, None, params)
    with open(params, "wb") as handle:
        handle.write(old_params)
    assert SymbolBlock.imports(sym, "data", params)(x).shape == (1, 2)


def test_parameter_files_keep_bfloat16_and_verify_the_dtype_listing(tmp_path):
    net = nn.Dense(2, in_units=3)
    net.initialize()
    net.cast("bfloat16")
    path = str(tmp_path / "bf16.params")
    net.save_parameters(path)
    copy = nn.Dense(2, in_units=3, dtype="bfloat16")
    copy.load_parameters(path)
    assert copy.weight.data().dtype == jnp.bfloat16
    np.testing.assert_array_equal(np.asarray(copy.weight.data(), np.float32), np.asarray(net.weight.data(), np.float32))
    arrays = hybrid.serialization.load_arrays(path)
    with open(path, "wb") as handle:
        np.savez(handle, weight=arrays["weight"].view(np.uint16), bias=arrays["bias"].view(np.uint16),
                 __dtypes__=np.frombuffer(b'{"weight": "bfloat16", "bias": "object"}', np.uint8))
    with pytest.raises(FormatError, match=r"lists 'bias' as 'object'"):
        copy.load_parameters(path)


def test_export_errors_explain_what_to_do(tmp_path):
    net = nn.Dense(2, in_units=3)
    net.initialize()
    with pytest.raises(RuntimeError, match=r"call hybridize\(\) and then run forward"):
        net.export(str(tmp_path / "x"))

    class Branchy(hybrid.HybridBlock):
        def forward(self, x):
            return jax.lax.cond(x.sum() > 0, lambda v: v * 2, lambda v: v, x)

    outer = nn.HybridSequential()
    outer.add(nn.Dense(3, in_units=3), Branchy())
    outer.initialize()
    outer.hybridize()
    outer(np.ones((1, 3), np.float32))
    with pytest.raises(ExportError, match=r"node #\d+ 'cond' in block '1'.*sub-program.*export_deployment"):
        outer.export(str(tmp_path / "y"))

    class Scaled(hybrid.HybridBlock):
        def forward(self, x, factor):
            return x * factor

    scaled = Scaled()
    scaled.hybridize()
    scaled(np.ones(2, np.float32), 3.0)
    with pytest.raises(ExportError, match="array arguments only"):
        scaled.export(str(tmp_path / "z"))


def test_graph_built_in_code_runs_trains_and_exports(tmp_path):
    b = GraphBuilder()
    x = b.input("data", (2, 3))
    w, bias = b.input("fc.weight", (4, 3)), b.input("fc.bias", (4,))
    h = b.op("dense", x, w, bias, flatten=True)
    y = b.prim("tanh", h, accuracy=None)
    scaled = b.prim("mul", y, b.const(2.0), out_dtype=None)
    weight = np.random.default_rng(3).standard_normal((4, 3)).astype(np.float32)
    net = SymbolBlock([scaled, h], x, params={"fc.weight": weight})
    assert list(net.collect_params()) == ["fc.weight", "fc.bias"]
    net.collect_params()["fc.bias"].initialize(hybrid.init.Constant(0.5))
    inputs = np.random.default_rng(4).standard_normal((2, 3)).astype(np.float32)
    pre = inputs @ weight.T + 0.5
    out, hidden = net(inputs)
    assert_close(out, 2 * np.tanh(pre))
    assert_close(hidden, pre)
    with autograd.record():
        out, _ = net(inputs)
    autograd.backward(out)
    assert_close(net.collect_params()["fc.bias"].grad(), (2 * (1 - np.tanh(pre) ** 2)).sum(0), 1e-5, 1e-5)
    sym, params = exported(net, tmp_path, inputs)
    again = SymbolBlock.imports(sym, None, params)
    assert_close(again(inputs)[0], 2 * np.tanh(pre))
    with pytest.raises(TypeError):
        b.op("dense", x, w, bias, flatten=True, bogus=1)


def test_deployment_export_fixed_and_dynamic_batch(tmp_path):
    net = nn.HybridSequential()
    net.add(nn.Dense(8, activation="relu"), nn.BatchNorm(), nn.Dropout(0.5), nn.Dense(2))
    net.initialize()
    net.hybridize()
    x = np.random.default_rng(5).standard_normal((4, 3)).astype(np.float32)
    expected = np.asarray(net(x))
    path = str(tmp_path / "net.jaxexport")
    export_deployment(net, path, x)
    assert_close(load_deployment(path)(x), expected, 1e-6, 1e-6)
    export_deployment(net, path, x, dynamic_batch=True)
    run = load_deployment(path)
    for batch in (1, 7):
        xs = np.random.default_rng(batch).standard_normal((batch, 3)).astype(np.float32)
        assert_close(run(xs), net(xs), 1e-5, 1e-6)
    np.save(str(tmp_path / "x.npy"), x)
    script = ("import sys, numpy as np, jax\n"
              f"e = jax.export.deserialize(bytearray(open({path!r}, 'rb').read()))\n"
              f"np.save({str(tmp_path / 'y.npy')!r}, np.asarray(e.call(np.load({str(tmp_path / 'x.npy')!r}))))\n"
              "assert 'hybrid' not in sys.modules\n")
    subprocess.run([sys.executable, "-c", script], check=True, cwd=str(tmp_path), env={**os.environ, "PYTHONPATH": ""})
    assert_close(np.load(str(tmp_path / "y.npy")), expected, 1e-6, 1e-6)
    data = bytearray(open(path, "rb").read())
    data[len(data) // 2] ^= 0xFF
    open(path, "wb").write(bytes(data))
    with pytest.raises(FormatError, match="does not match its checksum"):
        load_deployment(path)


# -- forged symbol files: each is rejected with a message naming the problem ---------------------
@pytest.fixture
def dense_doc(tmp_path):
    net = nn.Dense(2, in_units=3)
    net.initialize()
    sym, params = exported(net, tmp_path, np.ones((1, 3), np.float32))
    return sym, params, json.load(open(sym))


def write_sealed(path, doc):
    open(path, "w").write(json.dumps(seal(doc)))


def predict_graph(doc):
    return doc["signatures"][0]["graphs"]["predict"]


@pytest.mark.parametrize("forge, message", [
    (lambda d: predict_graph(d)["nodes"][0].update(op="evil_op"), r"unknown operator 'evil_op'"),
    (lambda d: predict_graph(d)["nodes"][0].update(kind="fused"), r"unknown node kind 'fused'"),
    (lambda d: predict_graph(d)["nodes"][0]["outputs"][0].update(shape=[1, 5]),
     r"declares f32\[1,5\] but computes float32\[1, 2\]"),
    (lambda d: predict_graph(d)["nodes"][0]["attrs"].update(flatten={"float": "nan"}), r"non-finite value"),
    (lambda d: predict_graph(d)["nodes"][0]["attrs"].update(evil=1), r"takes attributes \['flatten'\]"),
    (lambda d: d["params"][0].update(shape=[2 ** 40, 2 ** 40]), r"invalid dimension"),
    (lambda d: d.update(version=99), r"format version 99 by a newer hybrid"),
    (lambda d: predict_graph(d)["nodes"][0].update(inputs=["nowhere", "weight", "bias"]),
     r"reads 'nowhere', which is not defined"),
    (lambda d: predict_graph(d)["nodes"].append({"op": "system", "kind": "prim", "inputs": [], "outputs": [],
                                                 "params": {}}), r"unknown or unsupported primitive 'system'"),
    (lambda d: predict_graph(d)["nodes"][0]["attrs"].update(flatten={"struct": "os.system", "fields": {}}),
     r"invalid struct"),
    (lambda d: predict_graph(d)["inputs"].append({"name": "secret", "shape": [1], "dtype": "object"}),
     r"unsupported dtype 'object'"),
])
def test_forged_symbol_files_are_rejected(dense_doc, tmp_path, forge, message):
    sym, params, doc = dense_doc
    forge(doc)
    write_sealed(sym, doc)
    with pytest.raises(FormatError, match=message):
        SymbolBlock.imports(sym, None, params)


def test_unsealed_edits_deep_nesting_and_nan_literals_are_rejected(dense_doc):
    sym, params, doc = dense_doc
    text = open(sym).read()
    open(sym, "w").write(text.replace('"flatten": true', '"flatten": false'))
    with pytest.raises(FormatError, match="checksum mismatch"):
        SymbolBlock.imports(sym)
    open(sym, "w").write('{"format": "hybrid-symbol", "x": ' + "[" * 100000 + "]" * 100000 + "}")
    with pytest.raises(FormatError, match="nested deeper than 64"):
        SymbolBlock.imports(sym)
    open(sym, "w").write(text.replace('"version": 1', '"version": NaN'))
    with pytest.raises(FormatError, match="non-finite number literal 'NaN'"):
        SymbolBlock.imports(sym)
    open(sym, "wb").write(b"\x80\x04\x95pickle")
    with pytest.raises(FormatError, match="not UTF-8"):
        SymbolBlock.imports(sym)


@pytest.mark.parametrize("crash_before", ["deployment file", "final checksum"])
def test_replacing_a_deployment_leaves_a_loadable_one_at_every_step(tmp_path, monkeypatch, crash_before):
    from hybrid.export import deploy
    net = nn.Dense(2, in_units=3)
    net.initialize()
    x = np.ones((1, 3), np.float32)
    path = str(tmp_path / "net.jaxexport")
    deploy.export_deployment(net, path, x)
    old = np.asarray(net(x))
    net.weight.set_data(np.full((2, 3), 0.5, np.float32))
    new = np.asarray(net(x))
    real_write = deploy.atomic_write
    writes = []

    def crashing(target, write):
        writes.append(target)
        last_checksum = target.endswith(".sha256") and len(writes) > 1
        if (crash_before == "deployment file" and target == path) or \
                (crash_before == "final checksum" and last_checksum):
            raise KeyboardInterrupt  # the process dies here
        real_write(target, write)
    monkeypatch.setattr(deploy, "atomic_write", crashing)
    with pytest.raises(KeyboardInterrupt):
        deploy.export_deployment(net, path, x)
    monkeypatch.undo()
    assert_close(deploy.load_deployment(path)(x), old if crash_before == "deployment file" else new)
    deploy.export_deployment(net, path, x)  # a complete export lists only the new digest again
    assert len(open(path + ".sha256").read().splitlines()) == 1
    assert_close(deploy.load_deployment(path)(x), new)
