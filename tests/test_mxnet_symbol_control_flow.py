"""MXNet 1.9.1 symbol files with the fused ``RNN`` operator and the control-flow operators ``_foreach``,
``_while_loop`` and ``_cond`` (exported from the blocks of tests/fixtures/mxnet_rnn_files/symbol_cases.py
by make_fixtures.py): ``SymbolBlock.imports`` gives MXNet's outputs, eagerly and hybridized, and MXNet's
gradients of ``sum_k sum(out_k * w_k)``."""
import json
import os

import jax.numpy as jnp
import numpy as np
import pytest

import hybrid
from hybrid import autograd
from hybrid.errors import FormatError
from hybrid.gluon1.ops import OPERATORS, Attrs, call_op
from hybrid.gluon1.ops.rnn import unpack_rnn_params

from conftest import assert_close

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", "mxnet_rnn_files")
CASES = sorted(f[:-len("-symbol.json")] for f in os.listdir(HERE) if f.endswith("-symbol.json"))
NO_GRADIENTS = ("sym_lstmp", "sym_while")


def _io(case):
    io = np.load(os.path.join(HERE, f"{case}-io.npz"))
    inputs = {k[3:]: io[k] for k in io.files if k.startswith("in:")}
    return inputs, {k: io[k] for k in io.files if not k.startswith("in:")}


def _imported(case):
    inputs, _ = _io(case)
    names = ["data"] if len(inputs) == 1 else [f"data{i}" for i in range(len(inputs))]  # MXNet's export names
    return hybrid.SymbolBlock.imports(os.path.join(HERE, f"{case}-symbol.json"), names,
                                      os.path.join(HERE, f"{case}-0000.params"))


def _outputs(net, inputs, io):
    outs = net(*[jnp.asarray(v) for v in inputs.values()])
    outs = list(outs) if isinstance(outs, (list, tuple)) else [outs]
    count = len([k for k in io if k.startswith("out:")])
    assert len(outs) == count
    for k in range(count):
        if f"rows:{k}" in io:  # a _while_loop's step outputs: rows past the steps taken are zeros
            rows = int(io[f"rows:{k}"])
            assert not np.any(np.asarray(outs[k])[rows:])
    return outs


def test_the_cases_use_the_operators():
    ops = set()
    for case in CASES:
        with open(os.path.join(HERE, f"{case}-symbol.json")) as f:
            ops |= {node["op"] for node in json.load(f)["nodes"]}
    assert {"RNN", "_foreach", "_while_loop", "_cond"} <= ops
    assert {"sym_foreach", "sym_while", "sym_cond", "sym_lstm", "sym_lstmp"} <= set(CASES)


@pytest.mark.parametrize("hybridize", [False, True])
@pytest.mark.parametrize("case", CASES)
def test_imported_symbols_give_mxnets_outputs(case, hybridize):
    inputs, io = _io(case)
    net = _imported(case)
    if hybridize:
        net.hybridize()
    for _ in range(2 if hybridize else 1):
        for k, out in enumerate(_outputs(net, inputs, io)):
            assert_close(out, io[f"out:{k}"], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("hybridize", [False, True])
@pytest.mark.parametrize("case", [c for c in CASES if c not in NO_GRADIENTS])
def test_gradients_match_mxnet(case, hybridize):
    inputs, io = _io(case)
    net = _imported(case)
    if hybridize:
        net.hybridize()
    with autograd.record():
        outs = _outputs(net, inputs, io)
        loss = sum((out * jnp.asarray(io[f"w:{k}"])).sum() for k, out in enumerate(outs))
    loss.backward()
    grads = {k[5:]: v for k, v in io.items() if k.startswith("grad:")}
    assert grads and set(grads) <= set(net.collect_params())
    for name, expected in grads.items():
        assert_close(net.collect_params()[name].grad(), expected, rtol=1e-4, atol=1e-5)


def test_while_loop_rows_past_the_last_step_are_zero():
    inputs, io = _io("sym_while")
    rows = int(io["rows:0"])
    assert 0 < rows < 6  # the loop stops before max_iterations
    out = np.asarray(_outputs(_imported("sym_while"), inputs, io)[0])
    assert out.shape[0] == 6 and not out[rows:].any() and out[:rows].any()


def test_rnn_parameter_vector_layout():
    """Weights first (layer, direction, i2h then h2h), then biases in the same order."""
    H, C = 2, 3
    sizes = [4 * H * C, 4 * H * H] * 2 + [4 * H * 2 * H, 4 * H * H] * 2 + [4 * H] * 8
    flat = jnp.concatenate([jnp.full((n,), float(i)) for i, n in enumerate(sizes)])
    params = unpack_rnn_params(flat, "lstm", C, H, layers=2, directions=2)
    assert params[0][1]["i2h_weight"].shape == (8, 3) and float(params[0][1]["i2h_weight"][0, 0]) == 2
    assert params[1][0]["i2h_weight"].shape == (8, 4) and float(params[1][0]["h2h_weight"][0, 0]) == 5
    assert float(params[0][0]["h2h_bias"][0]) == 9 and float(params[1][1]["h2h_bias"][0]) == 15
    with pytest.raises(ValueError, match="needs"):
        unpack_rnn_params(flat[:-1], "lstm", C, H, layers=2, directions=2)


def test_rnn_operator_outputs_and_errors():
    x = jnp.ones((3, 2, 4))
    flat = jnp.full((3 * 5 * 4 + 3 * 5 * 5 + 2 * 3 * 5,), 0.1)
    out, h = call_op("RNN", [x, flat, jnp.zeros((1, 2, 5))], {"mode": "gru", "state_size": 5,
                                                               "state_outputs": True})
    assert out.shape == (3, 2, 5) and h.shape == (1, 2, 5)
    assert_close(out[-1], h[0])
    assert OPERATORS["RNN"].outputs(Attrs({"mode": "lstm", "state_outputs": "1"}, "RNN")) == 3
    assert OPERATORS["RNN"].outputs(Attrs({"mode": "lstm"}, "RNN")) == 1
    with pytest.raises(ValueError, match="projection_size"):
        call_op("RNN", [x, flat, None], {"mode": "gru", "state_size": 5, "projection_size": 2})


def test_subgraph_operators_need_subgraphs():
    with pytest.raises(ValueError, match="subgraph"):
        call_op("_cond", [jnp.ones(1)], {"num_outputs": 1, "cond_input_locs": "[0]", "then_input_locs": "[0]",
                                         "else_input_locs": "[0]"})


def test_unsupported_operator_in_a_subgraph_is_named(tmp_path):
    with open(os.path.join(HERE, "sym_cond-symbol.json")) as f:
        doc = json.load(f)
    node = next(n for n in doc["nodes"] if n["op"] == "_cond")
    node["subgraphs"][1]["nodes"][1]["op"] = "NoSuchOp"
    path = tmp_path / "bad-symbol.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(FormatError, match="NoSuchOp"):
        hybrid.SymbolBlock.imports(str(path), ["data"], os.path.join(HERE, "sym_cond-0000.params"))
