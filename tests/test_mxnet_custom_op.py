"""MXNet custom operators (``mx.operator.CustomOp`` run by ``F.Custom``/``nd.Custom``) against MXNet 1.9.1.

The operators and programs are ``fixtures/mxnet_custom_op/cases.py``; MXNet's outputs and gradients (eager,
through a Dense layer, hybridized) and an exported symbol file were saved by its ``make_fixtures.py``.
"""
import json
import logging
import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import hybrid.mxnet as mx
from hybrid._compiled import cached_op as _cached_op
from hybrid.formats.serialization import FormatError
from hybrid.mxnet import autograd, gluon, nd
from hybrid.mxnet.base import MXNetError
from hybrid.mxnet.ops import F
from helpers import fixture_module

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", "mxnet_custom_op")
cases = fixture_module("mxnet_custom_op")
cases.define(mx)
ARRAYS = np.load(os.path.join(HERE, "results.npz"))


@pytest.mark.parametrize("case", sorted(cases.CASES))
def test_case_gives_mxnets_outputs_and_gradients(case):
    results = cases.CASES[case](mx)
    assert {f"{case}/{name}" for name in results} == {k for k in ARRAYS.files if k.startswith(case + "/")}
    for name, value in results.items():
        expected = ARRAYS[f"{case}/{name}"]
        assert value.dtype == expected.dtype and value.shape == expected.shape, name
        np.testing.assert_allclose(value, expected, rtol=1e-5, atol=1e-6, err_msg=name)


def test_a_symbol_file_with_a_custom_node_runs_it():
    net = gluon.SymbolBlock.imports(os.path.join(HERE, "sigmoid-symbol.json"), ["data"],
                                    os.path.join(HERE, "sigmoid-0000.params"))
    x = np.random.RandomState(1).randn(4, 3).astype("float32")
    np.testing.assert_allclose(net(nd.array(x)).asnumpy(), ARRAYS["dense/scaled_sigmoid_out"], rtol=1e-5, atol=1e-6)


def test_a_symbol_file_naming_an_unregistered_op_type_is_refused_naming_it(tmp_path):
    doc = json.loads(open(os.path.join(HERE, "sigmoid-symbol.json")).read())
    doc["nodes"][-1]["attrs"]["op_type"] = "not_registered_here"
    path = tmp_path / "other-symbol.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(FormatError, match=r"Custom 'customblock6_custom0': no custom operator is registered as "
                                          r"op_type='not_registered_here'"):
        gluon.SymbolBlock.imports(str(path), ["data"], os.path.join(HERE, "sigmoid-0000.params"))


def _sigmoid(x, scale):
    return 1 / (1 + np.exp(-scale * x))


def test_jax_transformations_see_the_operator_and_its_backward():
    x = jnp.asarray(np.linspace(-2, 2, 6, dtype=np.float32))

    def f(v):
        return (F.Custom(v, op_type="scaled_sigmoid", scale=2.0) * jnp.arange(6.0)).sum()
    value, grad = jax.jit(jax.value_and_grad(f))(x)
    y = _sigmoid(np.asarray(x), 2.0)
    np.testing.assert_allclose(value, (y * np.arange(6)).sum(), rtol=1e-5)
    np.testing.assert_allclose(grad, np.arange(6) * y * (1 - y) * 2.0, rtol=1e-5, atol=1e-7)
    batched = jax.vmap(lambda v: F.Custom(v, op_type="scaled_sigmoid", scale=2.0))(jnp.stack([x, -x]))
    np.testing.assert_allclose(batched, _sigmoid(np.stack([x, -x]), 2.0), rtol=1e-5)


def test_inputs_can_be_given_by_name():
    x, label = nd.array(np.eye(3, dtype="float32") * 2), nd.array([0, 1, 2])
    by_name = F.Custom(data=x.value, label=label.value, op_type="softmax")
    np.testing.assert_allclose(by_name, nd.Custom(x, label, op_type="softmax").asnumpy(), rtol=1e-6)
    with pytest.raises(ValueError, match=r"custom operator 'softmax': input 'label' is missing"):
        F.Custom(data=x.value, op_type="softmax")


class _Seen(mx.operator.CustomOp):
    """Doubles its input; records what forward and backward were given."""

    seen: dict = {}

    def forward(self, is_train, req, in_data, out_data, aux):
        _Seen.seen["calls"].append("forward")
        _Seen.seen.update(is_train=is_train, forward_req=req, handle=type(in_data[0]).__name__,
                          aux=aux[0].asnumpy())
        self.assign(out_data[0], req[0], in_data[0] * 2)

    def backward(self, req, out_grad, in_data, out_data, in_grad, aux):
        _Seen.seen["calls"].append("backward")
        _Seen.seen.update(backward_req=req, in_data=in_data, out_data=out_data)
        self.assign(in_grad[0], req[0], out_grad[0] * 2)


@mx.operator.register("test_seen")
class _SeenProp(mx.operator.CustomOpProp):
    def __init__(self, **attrs):
        super().__init__()
        _Seen.seen["attrs"] = attrs

    def list_auxiliary_states(self):
        return ["state"]

    def infer_shape(self, in_shape):
        return in_shape, [in_shape[0]], [in_shape[0]]

    def declare_backward_dependency(self, out_grad, in_data, out_data):
        return [out_grad[0]]

    def create_operator(self, ctx, shapes, dtypes):
        _Seen.seen["created"] = (shapes, dtypes)
        return _Seen()


def test_the_operator_gets_string_attributes_handles_and_only_its_declared_dependencies():
    x, state = nd.array([1.0, 2.0]), nd.array([5.0, 6.0])
    x.attach_grad()
    _Seen.seen["calls"] = []
    with autograd.record():
        y = nd.Custom(x, state, op_type="test_seen", factor=3, flag=True, shape=(2, 1))
    y.backward(nd.array([1.0, -1.0]))
    np.testing.assert_array_equal(x.grad.asnumpy(), [2.0, -2.0])
    seen = _Seen.seen
    assert seen["calls"] == ["forward", "backward"]  # once each in the recorded step
    assert seen["attrs"] == {"factor": "3", "flag": "True", "shape": "(2, 1)"}
    assert seen["created"] == ([[2], [2]], [0, 0])
    assert seen["is_train"] is True and seen["forward_req"] == ["write"] and seen["handle"] == "NDArray"
    np.testing.assert_array_equal(seen["aux"], [5.0, 6.0])
    assert seen["backward_req"] == ["write"] and seen["in_data"] == [None] and seen["out_data"] == [None]
    with autograd.predict_mode():
        nd.Custom(x, state, op_type="test_seen")
    assert seen["is_train"] is False


class _WrongShape(mx.operator.CustomOp):
    def forward(self, is_train, req, in_data, out_data, aux):
        self.assign(out_data[0], req[0], nd.ones((3, 4)))


@mx.operator.register("test_wrong_shape")
class _WrongShapeProp(mx.operator.CustomOpProp):
    def infer_shape(self, in_shape):
        return in_shape, [(2, 2)], []

    def create_operator(self, ctx, shapes, dtypes):
        return _WrongShape()


class _WritesAux(mx.operator.CustomOp):
    def forward(self, is_train, req, in_data, out_data, aux):
        aux[0][:] = 1
        self.assign(out_data[0], req[0], in_data[0])


@mx.operator.register("test_writes_aux")
class _WritesAuxProp(mx.operator.CustomOpProp):
    def list_auxiliary_states(self):
        return ["count"]

    def infer_shape(self, in_shape):
        return in_shape, [in_shape[0]], [in_shape[0]]

    def create_operator(self, ctx, shapes, dtypes):
        return _WritesAux()


def test_errors_name_the_op_type():
    x = nd.ones((2, 2))
    with pytest.raises(ValueError, match=r"no custom operator is registered as op_type='not_there'"):
        nd.Custom(x, op_type="not_there")
    with pytest.raises(ValueError, match="needs op_type="):
        nd.Custom(x)
    with pytest.raises(MXNetError, match=r"custom operator 'softmax' takes 2 input\(s\) \(arguments \['data', "
                                         r"'label'\]\), got 1"):
        nd.Custom(x, op_type="softmax")
    with pytest.raises(MXNetError, match=r"custom operator 'softmax': infer_shape gives input 'label' the shape "
                                         r"\(2,\), but it has shape \(3,\)"):
        nd.Custom(x, nd.ones((3,)), op_type="softmax")
    with pytest.raises(MXNetError, match=r"custom operator 'test_wrong_shape': output 'output' has shape \(2, 2\) "
                                         r"\(from infer_shape\), but the array written to it has shape \(3, 4\)"):
        nd.Custom(nd.ones((2, 2)), op_type="test_wrong_shape")
    with pytest.raises(MXNetError, match=r"custom operator 'test_writes_aux': forward wrote the auxiliary state "
                                         r"'count'"):
        nd.Custom(x, nd.zeros((2, 2)), op_type="test_writes_aux")
    with pytest.raises(MXNetError, match=r"custom operator 'scaled_sigmoid': ScaledSigmoidProp\(\*\*\{'scale': "
                                         r"'fast'\}\) failed: ValueError"):
        nd.Custom(x, op_type="scaled_sigmoid", scale="fast")


def test_a_host_error_in_a_compiled_program_names_the_op_type():
    class Net(gluon.HybridBlock):
        def hybrid_forward(self, F, x):
            return F.Custom(x, op_type="test_wrong_shape")
    net = Net()
    net.hybridize()
    with pytest.raises(Exception, match=r"custom operator 'test_wrong_shape': output 'output' has shape \(2, 2\)"):
        net(nd.ones((2, 2))).asnumpy()


def _train(hybridize, steps=3):
    _, label_np, _, weight, bias = cases._inputs()
    net = cases._block(mx, "softmax")(weight, bias)
    if hybridize:
        net.hybridize()
    trainer = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.5})
    x, label = nd.array(np.random.RandomState(1).randn(4, 3).astype("float32")), nd.array(label_np)
    outs = []
    for _ in range(steps):
        with autograd.record():
            y = net(x, label)
        y.backward()
        trainer.step(4)
        outs.append(y.asnumpy())
    return np.stack(outs), net.dense.weight.data().asnumpy()


def test_a_hybridized_training_step_compiles_once_and_agrees_with_eager(monkeypatch, caplog):
    traces = []
    original = _cached_op.trace_block
    monkeypatch.setattr(_cached_op, "trace_block", lambda *a, **k: traces.append(1) or original(*a, **k))
    with caplog.at_level(logging.INFO, logger="hybrid"):
        compiled_outs, compiled_weight = _train(hybridize=True)
    recorded = [r for r in caplog.records if r.name == "hybrid.compile"
                and r.getMessage().startswith("compiled a recorded step program")]
    assert len(traces) == 1 and len(recorded) == 1
    eager_outs, eager_weight = _train(hybridize=False)
    np.testing.assert_allclose(compiled_outs, eager_outs, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(compiled_weight, eager_weight, rtol=1e-5, atol=1e-6)
    assert not np.allclose(compiled_outs[0], compiled_outs[-1])  # the steps changed the weights


def test_a_gradient_of_the_gradient_is_refused_naming_the_op_type():
    def grad_of(v):
        return jax.grad(lambda u: F.Custom(u, op_type="scaled_sigmoid").sum())(v).sum()
    with pytest.raises(MXNetError, match=r"custom operator 'scaled_sigmoid': its forward and backward are host code "
                                         "without derivatives"):
        jax.grad(grad_of)(jnp.ones(3))
    np.testing.assert_allclose(jax.grad(lambda u: F.Custom(u, op_type="scaled_sigmoid").sum())(jnp.zeros(3)),
                               [0.25] * 3, rtol=1e-6)
