"""MXNet 1.x recurrent layers and cells under ``hybrid.mxnet``: the ``.params`` files MXNet 1.9.1 saved for
the networks of tests/fixtures/mxnet_rnn_files/cases.py (``save_parameters`` and ``collect_params().save``)
load and give MXNet's outputs and states; what hybrid saves carries MXNet's names and, under
``hybrid.mxnet.install()``, MXNet's format."""
import json
import os

import numpy as np
import pytest

import hybrid.mxnet as mx
from hybrid.formats.mxnet_params import parse_mxnet_params
from hybrid.formats.params_file import write_format

from helpers import fixture_module

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", "mxnet_rnn_files")
CASES = fixture_module("mxnet_rnn_files").CASES
with open(os.path.join(HERE, "names.json")) as f:
    NAMES = json.load(f)


def _io(case):
    io = dict(np.load(os.path.join(HERE, f"{case}-io.npz")))
    inputs = {k[3:]: v for k, v in io.items() if k.startswith("in:")}
    return inputs, {k[4:]: v for k, v in io.items() if k.startswith("out:")}


def _loaded(case, naming):
    net, _, run = CASES[case](mx)
    net.load_parameters(os.path.join(HERE, f"{case}-{naming}.params"))
    return net, run


def _compare(results, expected):
    assert sorted(results) == sorted(expected)
    for key, value in expected.items():
        np.testing.assert_allclose(results[key], value, rtol=1e-5, atol=1e-5, err_msg=key)


def test_every_case_has_fixtures():
    assert sorted(NAMES) == sorted(CASES)


@pytest.mark.parametrize("naming", ["structural", "prefixed"])
@pytest.mark.parametrize("case", list(CASES))
def test_mxnet_files_give_mxnets_outputs(case, naming):
    inputs, expected = _io(case)
    net, run = _loaded(case, naming)
    _compare(run(net, mx, inputs), expected)


@pytest.mark.parametrize("case", ["lstm", "gru", "lstmp", "lstm_cell", "bidirectional_cell", "stacked"])
def test_hybridized_networks_give_mxnets_outputs(case):
    inputs, expected = _io(case)
    net, run = _loaded(case, "structural")
    net.hybridize()
    _compare(run(net, mx, inputs), expected)


@pytest.mark.parametrize("hybridize", [False, True])
@pytest.mark.parametrize("case", ["lstm", "gru", "rnn_tanh", "rnn_relu", "stacked"])
def test_gradients_match_mxnet(case, hybridize):
    """d sum(net(x) * w) / d parameter, by MXNet's save_parameters names."""
    io = dict(np.load(os.path.join(HERE, f"{case}-io.npz")))
    net, _ = _loaded(case, "structural")
    if hybridize:
        net.hybridize()
    with mx.autograd.record():
        loss = (net(mx.nd.array(io["in:x"])) * mx.nd.array(io["w"])).sum()
    loss.backward()
    params = net._file_params()
    grads = {k[5:]: v for k, v in io.items() if k.startswith("grad:")}
    assert sorted(grads) == sorted(params)
    for name, expected in grads.items():
        np.testing.assert_allclose(params[name].grad().asnumpy(), expected, rtol=1e-4, atol=1e-5, err_msg=name)


@pytest.mark.parametrize("case", list(CASES))
def test_saved_names_are_mxnets(case, tmp_path):
    """save_parameters writes MXNet's save_parameters names, in MXNet's order, and the values it loaded."""
    net, _ = _loaded(case, "prefixed")
    path = str(tmp_path / "net.params")
    net.save_parameters(path)
    saved = dict(np.load(path))
    assert list(saved) == NAMES[case]["structural"]
    with open(os.path.join(HERE, f"{case}-structural.params"), "rb") as f:
        mxnet = parse_mxnet_params(f.read(), case)
    for name, value in mxnet.items():
        np.testing.assert_array_equal(saved[name], value, err_msg=name)


@pytest.mark.parametrize("case", ["lstm", "rnn_relu", "lstmp_cell", "unfused", "shared", "stacked"])
def test_installed_alias_writes_mxnets_format(case, tmp_path):
    """Under install(), save_parameters writes MXNet's .params format (MXNet's nd.load reads it) with MXNet's
    names; the file loads back, into a fresh network, to the same outputs."""
    from hybrid.mxnet import install, uninstall
    inputs, expected = _io(case)
    net, run = _loaded(case, "structural")
    path = str(tmp_path / "net.params")
    install()
    try:
        assert write_format() == "mxnet"
        net.save_parameters(path)
    finally:
        uninstall()
    assert write_format() == "npz"
    with open(path, "rb") as f:
        written = parse_mxnet_params(f.read(), path)
    assert list(written) == NAMES[case]["structural"]
    fresh, run = CASES[case](mx)[0], CASES[case](mx)[2]
    fresh.load_parameters(path)
    _compare(run(fresh, mx, inputs), expected)


def test_unfused_stack_shares_the_layers_parameters():
    inputs, expected = _io("lstm")
    layer, _ = _loaded("lstm", "structural")
    stack = layer._unfuse()
    assert list(stack.collect_params()) == NAMES["unfused"]["structural"]
    assert stack[0].l_cell.i2h_weight is layer.l0_i2h_weight and stack[1].r_cell.h2h_bias is layer.r1_h2h_bias
    x = mx.nd.array(inputs["x"])
    out, _ = stack.unroll(x.shape[0], x, layout="TNC", merge_outputs=True)
    np.testing.assert_allclose(out.asnumpy(), expected["out"], rtol=1e-5, atol=1e-5)


def test_unfuse_refuses_a_projection():
    with pytest.raises(NotImplementedError, match="projection_size"):
        mx.gluon.rnn.LSTM(4, projection_size=2)._unfuse()


def test_old_attribute_names_still_load(tmp_path):
    """A file keyed by the layer's attribute names (l0_i2h_weight, as hybrid wrote them before) loads."""
    net, _ = _loaded("gru", "structural")
    path = str(tmp_path / "old.npz")
    net.collect_params().save(path)
    assert "l0_i2h_weight" in dict(np.load(path))
    fresh = CASES["gru"](mx)[0]
    fresh.load_parameters(path)
    np.testing.assert_array_equal(fresh.l0_h2h_weight.data().asnumpy(), net.l0_h2h_weight.data().asnumpy())


def test_write_format_choices(tmp_path):
    from hybrid.formats.params_file import save_parameter_arrays, set_write_format
    with pytest.raises(ValueError, match="npz"):
        set_write_format("zip")
    with pytest.raises(ValueError, match="mxnet"):
        save_parameter_arrays(str(tmp_path / "a.params"), {"w": np.ones(2)}, "zip")
    save_parameter_arrays(str(tmp_path / "b.params"), {"w": np.arange(3.0, dtype=np.float32)}, "mxnet")
    with open(tmp_path / "b.params", "rb") as f:
        np.testing.assert_array_equal(parse_mxnet_params(f.read(), "b")["w"], [0, 1, 2])
    assert write_format() == "npz"


def test_save_state_stays_npz_under_install(tmp_path):
    from hybrid.mxnet import install, uninstall
    net, _ = _loaded("gru_cell", "structural")
    install()
    try:
        net.save_state(str(tmp_path / "state.npz"))
    finally:
        uninstall()
    assert set(np.load(tmp_path / "state.npz")) == set(NAMES["gru_cell"]["structural"])
