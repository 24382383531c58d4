"""MXNet compatibility: .params files written here byte by byte in MXNet's NDArray format, and symbol JSON."""
import json
import struct

import numpy as np
import pytest

from hybrid import SymbolBlock, autograd, nn
from hybrid.export import FormatError, parse_mxnet_params

from conftest import assert_close
from helpers import conv_symbol, conv_weights, mx_params, node


def weights(seed=0):
    rng = np.random.default_rng(seed)
    return {"w0": rng.standard_normal((4, 3)).astype(np.float32), "b0": rng.standard_normal(4).astype(np.float32),
            "gamma": rng.random(4).astype(np.float32) + 0.5, "beta": rng.standard_normal(4).astype(np.float32),
            "mean": rng.standard_normal(4).astype(np.float32), "var": rng.random(4).astype(np.float32) + 0.5,
            "w2": rng.standard_normal((2, 4)).astype(np.float32), "b2": rng.standard_normal(2).astype(np.float32)}


def reference(w, x, eps=1e-5):
    h = np.maximum(x @ w["w0"].T + w["b0"], 0)
    h = (h - w["mean"]) / np.sqrt(w["var"] + eps) * w["gamma"] + w["beta"]
    return h @ w["w2"].T + w["b2"]


def small_net():
    net = nn.HybridSequential()
    net.add(nn.Dense(4, activation="relu"), nn.BatchNorm(), nn.Dense(2))
    return net


NAMINGS = {
    "gluon2": ["0.weight", "0.bias", "1.gamma", "1.beta", "1.running_mean", "1.running_var", "2.weight", "2.bias"],
    "gluon1": ["hybridsequential0_dense0_weight", "hybridsequential0_dense0_bias", "hybridsequential0_batchnorm0_gamma",
               "hybridsequential0_batchnorm0_beta", "hybridsequential0_batchnorm0_running_mean",
               "hybridsequential0_batchnorm0_running_var", "hybridsequential0_dense1_weight",
               "hybridsequential0_dense1_bias"],
    "module": ["arg:dense0_weight", "arg:dense0_bias", "arg:batchnorm0_gamma", "arg:batchnorm0_beta",
               "aux:batchnorm0_moving_mean", "aux:batchnorm0_moving_var", "arg:dense1_weight", "arg:dense1_bias"],
}


@pytest.mark.parametrize("naming", sorted(NAMINGS))
@pytest.mark.parametrize("version", [2, 1, 0])
def test_load_parameters_reads_mxnet_files(tmp_path, naming, version):
    w = weights()
    path = tmp_path / "net.params"
    path.write_bytes(mx_params(dict(zip(NAMINGS[naming], w.values())), version))
    net = small_net()  # deferred shapes are filled in from the file
    net.load_parameters(str(path))
    for (name, param), expected in zip(net.collect_params().items(), w.values()):
        np.testing.assert_array_equal(np.asarray(param.data()), expected)
    x = np.random.default_rng(1).standard_normal((5, 3)).astype(np.float32)
    assert_close(net(x), reference(w, x), 1e-5, 1e-5)


def test_mxnet_dtypes_and_name_errors(tmp_path):
    path = tmp_path / "half.params"
    half = np.arange(6, dtype=np.float16).reshape(2, 3)
    path.write_bytes(mx_params({"arg:w": half, "arg:i": np.array([1, 2], np.int64)}))
    loaded = parse_mxnet_params(path.read_bytes(), "test")
    assert loaded["arg:w"].dtype == np.float16 and loaded["arg:i"].dtype == np.int64
    np.testing.assert_array_equal(loaded["arg:w"], half)
    w = weights()
    names = list(NAMINGS["gluon1"])
    names[0], names[1] = names[1], names[0]  # bias first: cannot match 'weight'
    path.write_bytes(mx_params(dict(zip(names, w.values()))))
    with pytest.raises(FormatError, match=r"cannot match MXNet name 'hybridsequential0_dense0_bias' \(position 0\)"):
        small_net().load_parameters(str(path))
    path.write_bytes(mx_params(dict(zip(NAMINGS["gluon1"][:3], list(w.values())[:3]))))
    with pytest.raises(FormatError, match="holds 3 arrays with prefixed names.*the block has 8 parameters"):
        small_net().load_parameters(str(path))


@pytest.mark.parametrize("forge, message", [
    (lambda b: b[:-5], "unexpected bytes|truncated"),
    (lambda b: b[:40], "truncated or corrupted"),
    (lambda b: b[:16] + struct.pack("<Q", 2 ** 60) + b[24:], "declares 1152921504606846976 arrays"),
    (lambda b: b[:28] + struct.pack("<i", 1) + b[32:], "sparse storage"),
    (lambda b: b[:32] + struct.pack("<I", 2) + struct.pack("<qq", 2 ** 40, 2 ** 40) + b[52:], "invalid shape"),
    (lambda b: b[:32] + struct.pack("<I", 2) + struct.pack("<qq", 2 ** 20, 2 ** 20) + b[52:],
     r"array #0 of shape \(1048576, 1048576\) needs 4398046511104 bytes"),
    (lambda b: b[:32] + struct.pack("<I", 99) + b[36:], r"rank 99 is out of range"),
    (lambda b: b[:60] + struct.pack("<i", 77) + b[64:], "unknown type flag 77"),
])
def test_forged_mxnet_files_fail_cleanly(tmp_path, forge, message):
    good = mx_params({"arg:w": np.ones((2, 3), np.float32)})
    with pytest.raises(FormatError, match=message):
        parse_mxnet_params(forge(good), "test")


# -- MXNet symbol JSON --------------------------------------------------------------------------
def conv_reference(p, x):
    n, _, h, w = x.shape
    padded = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    conv = np.zeros((n, 2, h, w))
    for o in range(2):
        for i in range(h):
            for j in range(w):
                conv[:, o, i, j] = (padded[:, :, i:i + 3, j:j + 3] * p["arg:conv0_weight"][o]).sum((1, 2, 3))
        conv[:, o] += p["arg:conv0_bias"][o]
    c = lambda v: v.reshape(1, 2, 1, 1)  # noqa: E731
    bn = (conv - c(p["aux:bn0_moving_mean"])) / np.sqrt(c(p["aux:bn0_moving_var"]) + 1e-5) * c(p["arg:bn0_gamma"]) \
        + c(p["arg:bn0_beta"])
    act = np.where(bn > 0, bn, 0.1 * bn)
    pooled = act.reshape(n, 2, h // 2, 2, w // 2, 2).max((3, 5)).reshape(n, -1)
    fc = pooled @ p["arg:fc0_weight"].T + p["arg:fc0_bias"]
    added = 2 * np.maximum(fc, 0) + fc
    logits = np.concatenate([added, fc], 1)
    e = np.exp(logits - logits.max(1, keepdims=True))
    return e / e.sum(1, keepdims=True)


def test_mxnet_symbol_imports_runs_hybridizes_exports_and_trains(tmp_path):
    sym, params = tmp_path / "model-symbol.json", tmp_path / "model-0000.params"
    sym.write_text(json.dumps(conv_symbol()))
    p = conv_weights()
    params.write_bytes(mx_params(p))
    net = SymbolBlock.imports(str(sym), ["data"], str(params))
    assert net.collect_params()["bn0_moving_mean"].grad_req == "null"
    x = np.random.default_rng(3).standard_normal((2, 1, 4, 4)).astype(np.float32)
    assert_close(net(x), conv_reference(p, x), 1e-5, 1e-6)
    assert net(np.ones((5, 1, 4, 4), np.float32)).shape == (5, 6)  # MXNet symbols take any batch size
    net.hybridize()
    assert_close(net(x), conv_reference(p, x), 1e-5, 1e-6)
    ours, our_params = net.export(str(tmp_path / "ours"))
    assert_close(SymbolBlock.imports(ours, None, our_params)(x), conv_reference(p, x), 1e-5, 1e-6)
    with autograd.record():
        out = net(x)
    autograd.backward(out, head_grads=np.eye(6, dtype=np.float32)[:2])
    assert np.abs(np.asarray(net.collect_params()["conv0_weight"].grad())).sum() > 0
    batch_mean = np.asarray(net.collect_params()["bn0_moving_mean"].data())
    assert not np.allclose(batch_mean, p["aux:bn0_moving_mean"])  # training updated the running statistics


def test_mxnet_embedding_symbol_and_unknown_operators(tmp_path):
    nodes = [node("null", "data"), node("null", "emb_weight"),
             node("Embedding", "emb", [0, 1], input_dim=5, output_dim=2), node("Flatten", "flat", [2]),
             node("softmax", "prob", [3], axis=-1)]
    sym, params = tmp_path / "emb-symbol.json", tmp_path / "emb-0000.params"
    sym.write_text(json.dumps({"nodes": nodes, "heads": [[4, 0, 0]]}))
    table = np.random.default_rng(4).standard_normal((5, 2)).astype(np.float32)
    params.write_bytes(mx_params({"arg:emb_weight": table}))
    net = SymbolBlock.imports(str(sym), "data", str(params))
    tokens = np.array([[0, 3], [4, 1]], np.int32)
    flat = table[tokens].reshape(2, 4)
    expected = np.exp(flat) / np.exp(flat).sum(1, keepdims=True)
    assert_close(net(tokens), expected)
    nodes += [node("Correlation", "mystery", [4]), node("SVMOutput", "svm", [5])]
    sym.write_text(json.dumps({"nodes": nodes, "heads": [[6, 0, 0]]}))
    with pytest.raises(FormatError, match=r"unsupported MXNet operators: Correlation \(x1\), SVMOutput \(x1\)\. "
                                          r"hybrid.mxnet.ops.OPERATORS lists"):
        SymbolBlock.imports(str(sym), "data", str(params))
    nodes[2]["attrs"]["input_dim"] = "5; import os"
    sym.write_text(json.dumps({"nodes": nodes[:5], "heads": [[4, 0, 0]]}))
    with pytest.raises(FormatError, match="is not an integer"):
        SymbolBlock.imports(str(sym), "data", str(params))(tokens)


@pytest.mark.parametrize("attr, value, message", [
    ("num_group", "0", r"Convolution 'conv0'.*num_group=0 must be a positive integer"),
    ("stride", "(0, 0)", r"Convolution 'conv0'.*stride=\(0, 0\) must hold integers >= 1"),
    ("stride", "(1, 1, 1)", r"Convolution 'conv0'.*stride=\(1, 1, 1\) must have 2 entries .*got 3"),
])
def test_bad_convolution_attributes_are_format_errors_naming_the_node(tmp_path, attr, value, message):
    symbol = conv_symbol()
    symbol["nodes"][3]["attrs"][attr] = value
    sym, params = tmp_path / "model-symbol.json", tmp_path / "model-0000.params"
    sym.write_text(json.dumps(symbol))
    params.write_bytes(mx_params(conv_weights()))
    x = np.zeros((2, 1, 4, 4), np.float32)
    with pytest.raises(FormatError, match=message):
        SymbolBlock.imports(str(sym), ["data"], str(params))(x)


@pytest.mark.parametrize("per", ["group", "channel"])
def test_mxnet_group_norm_symbol_broadcasts_per_group_parameters(tmp_path, per):
    """MXNet 1.x's GroupNorm holds one gamma and beta per group, broadcast to the group's channels (2.x: per
    channel); the reference is NumPy."""
    groups, channels = 2, 6
    nodes = [node("null", "data"), node("null", "gn_gamma"), node("null", "gn_beta"),
             node("GroupNorm", "gn", [0, 1, 2], num_groups=groups, eps=1e-5)]
    sym, params = tmp_path / "gn-symbol.json", tmp_path / "gn-0000.params"
    sym.write_text(json.dumps({"nodes": nodes, "heads": [[3, 0, 0]]}))
    rng = np.random.default_rng(5)
    size = groups if per == "group" else channels
    gamma, beta = rng.random(size).astype(np.float32) + 0.5, rng.standard_normal(size).astype(np.float32)
    params.write_bytes(mx_params({"arg:gn_gamma": gamma, "arg:gn_beta": beta}))
    x = rng.standard_normal((3, channels, 4)).astype(np.float32)
    grouped = x.reshape(3, groups, -1)
    normed = ((grouped - grouped.mean(2, keepdims=True)) / np.sqrt(grouped.var(2, keepdims=True) + 1e-5)).reshape(x.shape)
    scale = np.repeat(gamma, channels // groups) if per == "group" else gamma
    shift = np.repeat(beta, channels // groups) if per == "group" else beta
    expected = normed * scale[None, :, None] + shift[None, :, None]
    net = SymbolBlock.imports(str(sym), "data", str(params))
    assert_close(net(x), expected, 1e-4, 1e-5)
