"""Gluon 1.x blocks: hybrid_forward(F, x, **params), self.params.get / get_constant, deferred shapes, and
parameter files MXNet 1.9.1 saved for the same blocks (tests/fixtures/gluon1, made by make_fixtures.py
from the block definitions in blocks.py, which both frameworks run unchanged)."""
import json
import os
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import hybrid
from hybrid import autograd, init, nn
from hybrid.errors import DeferredInitializationError, ShapeError

from conftest import assert_close

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", "gluon1")
sys.path.insert(0, HERE)
from blocks import make_blocks  # noqa: E402

sys.path.remove(HERE)

BLOCKS = make_blocks(hybrid.HybridBlock, init)
NETS = {
    "dense": lambda **kw: BLOCKS["DenseF"](6, activation="tanh", **kw),
    "scaled": lambda **kw: BLOCKS["Scaled"](4, **kw),
    "mlp": lambda **kw: BLOCKS["MLP"](**kw),
    "convbn": lambda **kw: BLOCKS["ConvBN"](4, 3, **kw),
    "renamed": lambda **kw: BLOCKS["Renamed"](3, **kw),
}


def fixture(name):
    return dict(np.load(os.path.join(HERE, f"{name}-io.npz")))


def loaded(name, naming="structural"):
    net = NETS[name]()
    net.initialize()
    net.load_parameters(os.path.join(HERE, f"{name}-{naming}.params"))
    return net


# -- MXNet's files and outputs ----------------------------------------------------------------------------------
@pytest.mark.parametrize("naming", ["structural", "prefixed"])
@pytest.mark.parametrize("name", list(NETS))
def test_mxnet_saved_parameters_give_mxnets_outputs(name, naming):
    io = fixture(name)
    net = loaded(name, naming)
    assert_close(net(jnp.asarray(io["x"])), io["out"], rtol=1e-5, atol=1e-5)
    net.hybridize()
    assert_close(net(jnp.asarray(io["x"])), io["out"], rtol=1e-5, atol=1e-5)
    assert_close(net(jnp.asarray(io["x"])), io["out"], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("name", list(NETS))
def test_parameter_names_are_mxnets(name):
    """Made inside name_scope with the prefix MXNet's fresh process gave the top block, the parameters'
    1.x names are the names of MXNet's prefixed file, in the same order."""
    from hybrid.formats.mxnet_params import parse_mxnet_params
    with open(os.path.join(HERE, f"{name}-prefixed.params"), "rb") as f:
        mxnet_names = list(parse_mxnet_params(f.read(), name))
    top = type(NETS[name]()).__name__.lower() + "0_"
    net = NETS[name](prefix=top)
    assert [p.name for p in net.collect_params().values()] == mxnet_names


def test_structural_and_prefixed_names_are_mxnets():
    net = NETS["mlp"]()
    assert list(net.collect_params()) == ["alpha", "hidden.weight", "hidden.bias", "out.weight", "out.bias",
                                          "scaled.offset", "scaled.scale"]  # MXNet's save_parameters names
    assert net.scaled.scale.name == net.scaled.prefix + "normalize_scale"  # Gluon 1.x: prefix + name
    assert net.alpha.name == net.prefix + "alpha"


@pytest.mark.parametrize("hybridize", [False, True])
@pytest.mark.parametrize("name", ["mlp", "convbn"])
def test_gradients_match_mxnet(name, hybridize):
    io = fixture(name)
    net = loaded(name)
    if hybridize:
        net.hybridize()
    x, w = jnp.asarray(io["x"]), jnp.asarray(io["w"])
    with autograd.record():
        out = net(x)
        loss = (out * w).sum()
    loss.backward()
    assert_close(out, io["train_out"], rtol=1e-4, atol=1e-5)  # BatchNorm on batch statistics
    grads = {k[5:]: v for k, v in io.items() if k.startswith("grad:")}
    params = net.collect_params()
    assert sorted(grads) == sorted(n for n, p in params.items() if p.grad_req != "null")
    for pname, grad in grads.items():
        assert_close(params[pname].grad(), grad, rtol=1e-4, atol=1e-5)
    for key in (k for k in io if k.startswith("after:")):  # F.BatchNorm updated the running statistics
        assert_close(params[key[6:]].data(), io[key], rtol=1e-5, atol=1e-6)


def test_save_and_load_round_trip(tmp_path):
    net = loaded("convbn")
    net.save_parameters(str(tmp_path / "net.params"))
    again = NETS["convbn"]()
    again.load_parameters(str(tmp_path / "net.params"))  # deferred shapes filled by the file
    x = jnp.asarray(fixture("convbn")["x"])
    assert_close(again(x), net(x), rtol=0, atol=0)


# -- deferred shapes -----------------------------------------------------------------------------------------
def test_deferred_shapes_are_inferred_at_the_first_call():
    net = NETS["convbn"]()
    net.initialize()
    assert net.weight.shape == (4, 0, 3, 3) and net.fc.weight.shape == (3, 0)
    out = net(jnp.ones((2, 5, 6, 6)))
    assert out.shape == (2, 3)
    assert net.weight.shape == (4, 5, 3, 3) and net.fc.weight.shape == (3, 36)


@pytest.mark.parametrize("mode", ["hybridized", "recorded", "compiled_step"])
def test_deferred_shapes_inferred_in_every_mode(mode):
    net = NETS["mlp"]()
    net.initialize()
    x = jnp.ones((2, 7))
    if mode == "hybridized":
        net.hybridize()
        out = net(x)
    elif mode == "recorded":
        with autograd.record():
            out = net(x)
        out.backward()
        assert net.hidden.weight.grad().shape == (8, 7)
    else:
        out = hybrid.compile(lambda x: net(x))(x)
    assert out.shape == (2, 4) and net.hidden.weight.shape == (8, 7)


RULE_CASES = json.load(open(os.path.join(HERE, "shape_rules.json")))


@pytest.mark.parametrize("case", RULE_CASES, ids=lambda c: f"{c['op']}-{c['attrs']}")
def test_inferred_parameter_shapes_are_mxnets(case):
    """The shapes hybrid infers for an operator's parameter inputs are what MXNet's shape inference gives."""
    from hybrid.gluon1.blocks import RULES
    shapes = RULES[case["op"]](tuple(case["data"]), case["attrs"])
    for name, expected in case["params"].items():
        assert tuple(shapes[name]) == tuple(expected), name


def test_shape_inference_accepts_mxnets_string_attributes():
    from hybrid.gluon1.blocks import RULES
    shapes = RULES["Convolution"]((2, 6, 9, 9), {"kernel": "(3, 3)", "num_filter": "8", "num_group": "2"})
    assert shapes["weight"] == (8, 3, 3, 3)
    assert RULES["FullyConnected"]((4, 3, 5), {"num_hidden": "7", "flatten": "False"})["weight"] == (7, 5)


class Normed(hybrid.HybridBlock):
    """A deferred gamma/beta resolved by F.LayerNorm, and a native child BatchNorm run in training mode."""

    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.gamma = self.params.get("gamma", shape=(0,), init=init.One(), allow_deferred_init=True)
            self.beta = self.params.get("beta", shape=(0,), init=init.Zero(), allow_deferred_init=True)
            self.bn = nn.BatchNorm(in_channels=3)

    def hybrid_forward(self, F, x, gamma, beta):
        return F.LayerNorm(self.bn(x), gamma, beta, axis=-1)


def test_shape_inference_run_changes_no_state():
    """The run that infers shapes updates no running statistics and keeps no traced attribute."""
    net = Normed()
    net.initialize()
    x = jnp.asarray(np.random.default_rng(0).normal(size=(4, 3, 5)), jnp.float32)
    with autograd.record(train_mode=True):
        net(x)
    assert net.gamma.shape == (5,)
    twin = nn.BatchNorm(in_channels=3)
    twin.initialize()
    with autograd.record(train_mode=True):
        twin(x)
    assert_close(net.bn.running_mean.data(), twin.running_mean.data(), rtol=1e-6, atol=1e-7)  # one update


class Opaque(hybrid.HybridBlock):
    def __init__(self):
        super().__init__()
        self.weight = self.params.get("weight", shape=(3, 0), allow_deferred_init=True)

    def hybrid_forward(self, F, x, weight):
        return F.FullyConnected(x, weight * 2.0, no_bias=True, num_hidden=3)  # weight not passed as it is


def test_uninferable_shape_names_the_parameter_and_the_fix():
    net = Opaque()
    net.initialize()
    with pytest.raises(DeferredInitializationError, match=r"^Opaque: cannot infer.*'weight' \(3, 0\).*infer_shape"):
        net(jnp.ones((2, 4)))


def test_infer_shape_defined_by_the_block_is_used():
    class WithInferShape(Opaque):
        def infer_shape(self, x):
            self.weight.shape = (3, x.shape[1])

    net = WithInferShape()
    net.initialize()
    assert net(jnp.ones((2, 4))).shape == (2, 3)


def test_shape_conflicting_with_the_declared_one_is_refused():
    class Conv(hybrid.HybridBlock):
        def __init__(self):
            super().__init__()
            self.weight = self.params.get("weight", shape=(4, 0, 5, 5), allow_deferred_init=True)

        def hybrid_forward(self, F, x, weight):
            return F.Convolution(x, weight, kernel=(3, 3), num_filter=4, no_bias=True)

    net = Conv()
    net.initialize()
    with pytest.raises(ShapeError, match=r"^Conv: parameter 'weight' is declared with shape \(4, 0, 5, 5\).*"
                                         r"F.Convolution needs \(4, 2, 3, 3\)"):
        net(jnp.ones((1, 2, 6, 6)))
    known = BLOCKS["DenseF"](3, in_units=4)
    known.initialize()
    with pytest.raises(ValueError, match="FullyConnected"):
        known(jnp.ones((2, 5)))


# -- params.get and get_constant --------------------------------------------------------------------------------
def test_params_get_returns_the_same_parameter_and_checks_keywords():
    block = BLOCKS["DenseF"](3)
    assert block.params.get("weight") is block.weight
    assert block.params.get("weight", shape=(3, 0)) is block.weight
    assert block.params.get("weight", shape=(0, 5)) is block.weight and block.weight.shape == (3, 5)
    with pytest.raises(ValueError, match=r"DenseF.params.get\('weight'\).*shape \(3, 5\)"):
        block.params.get("weight", shape=(4, 5))
    with pytest.raises(ValueError, match="lr_mult"):
        block.params.get("bias", lr_mult=2.0)
    with pytest.raises(TypeError, match="DenseF.params.get\\('extra'\\).*keywords of hybrid.Parameter"):
        block.params.get("extra", shape=(2,), colour="red")


def test_params_get_keywords_reach_the_parameter():
    block = BLOCKS["DenseF"](3)
    p = block.params.get("scale", shape=(3,), dtype="float16", grad_req="add", lr_mult=0.5, wd_mult=0.0,
                         init=init.Constant(3.0))
    assert (p.dtype, p.grad_req, p.lr_mult, p.wd_mult) == (np.float16, "add", 0.5, 0.0)
    frozen = block.params.get("stat", shape=(3,), differentiable=False)
    assert frozen.grad_req == "null"
    assert list(block.collect_params()) == ["weight", "bias", "scale", "stat"]
    block.initialize()
    np.testing.assert_array_equal(np.asarray(p.data()), np.full(3, 3.0, np.float16))


def test_lookup_only_dicts_refuse_creation():
    block = BLOCKS["MLP"]()
    with pytest.raises(TypeError, match="only looks parameters up"):
        block.collect_params().get("gamma", shape=(2,))
    assert block.collect_params().get("nothing") is None
    with pytest.raises(TypeError, match="get_constant"):
        block.collect_params().get_constant("c", [1.0])
    native = nn.Dense(2)
    assert native.params.get("nothing") is None  # a Gluon 2 block's params only look up without keywords


def test_get_constant():
    block = BLOCKS["Scaled"](2)
    assert block.params.get_constant("offset") is block.offset
    assert block.params.get_constant("offset", [[0.5, 0.5]]) is block.offset
    assert block.offset.grad_req == "null" and isinstance(block.offset, hybrid.Constant)
    with pytest.raises(ValueError, match="another value"):
        block.params.get_constant("offset", [[1.0, 0.5]])
    with pytest.raises(KeyError, match="no constant 'missing'"):
        block.params.get_constant("missing")
    with pytest.raises(ValueError, match="not a Constant"):
        block.params.get_constant("scale")  # registered as 'scale' (the attribute), a Parameter


def test_attribute_name_is_the_keyword_and_the_structural_name():
    seen = {}

    class Renamed(hybrid.HybridBlock):
        def __init__(self):
            super().__init__()
            self.w = self.params.get("weight", shape=(2, 3))
            self.extra = self.params.get("unassigned_name_kept", shape=(2,))

        def hybrid_forward(self, F, x, **params):
            seen.update(params)
            return F.FullyConnected(x, params["w"], params["extra"], num_hidden=2)

    net = Renamed()
    assert list(net.collect_params()) == ["w", "extra"]
    assert net.params.get("weight") is net.w  # still found by its 1.x name
    net.initialize()
    net(jnp.ones((1, 3)))
    assert sorted(seen) == ["extra", "w"]


def test_unassigned_get_registers_under_its_name():
    class Unassigned(hybrid.HybridBlock):
        def __init__(self):
            super().__init__()
            self.params.get("bias", shape=(2,), init=init.Constant(1.5))

        def hybrid_forward(self, F, x, bias):
            return F.broadcast_add(x, bias)

    net = Unassigned()
    net.initialize()
    assert list(net.collect_params()) == ["bias"]
    assert_close(net(jnp.zeros((1, 2))), [[1.5, 1.5]])


def test_params_shared_with_gluon1_params_keyword():
    first = BLOCKS["DenseF"](3, in_units=4)
    second = BLOCKS["DenseF"](3, params=first.collect_params())
    assert second.weight is first.weight and second.bias is first.bias
    first.initialize()
    x = jnp.ones((2, 4))
    assert_close(second(x), first(x), rtol=0, atol=0)


def test_constant_is_not_trained():
    net = BLOCKS["Scaled"](2)
    net.initialize()
    trainer = hybrid.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.5})
    with autograd.record():
        loss = net(jnp.ones((1, 2))).sum()
    loss.backward()
    trainer.step(1)
    assert_close(net.offset.data(), [[0.5, 0.5]], rtol=0, atol=0)
    assert_close(net.scale.data(), [[1.5, 1.5]])  # 2 - 0.5 * 1


def test_a_block_defining_neither_forward_nor_hybrid_forward():
    class Empty(hybrid.HybridBlock):
        pass

    with pytest.raises(NotImplementedError, match="hybrid_forward"):
        Empty()(jnp.ones(2))


def test_forward_overriding_and_calling_super():
    class Logged(BLOCKS["DenseF"]):
        calls = 0

        def forward(self, x):
            Logged.calls += 1
            return super().forward(F.reshape(x, (0, -1)))

    from hybrid.mxnet.ops import F
    net = Logged(2)
    net.initialize()
    assert net(jnp.ones((1, 3, 2))).shape == (1, 2) and Logged.calls == 1
    assert net.weight.shape == (2, 6)  # inferred from what HybridBlock.forward got, as Gluon 1.x does


# -- equal to a forward block: training, compile, export, apply ------------------------------------------------
def gluon1_and_native():
    """The same two-layer network as Gluon 1.x blocks and as nn.Dense layers, with the same weights."""
    old = hybrid.nn.HybridSequential()
    old.add(BLOCKS["DenseF"](8, activation="relu"), BLOCKS["DenseF"](3))
    new = hybrid.nn.HybridSequential()
    new.add(nn.Dense(8, activation="relu"), nn.Dense(3))
    old.initialize()
    new.initialize()
    x = jnp.asarray(np.random.default_rng(1).normal(size=(4, 5)), jnp.float32)
    old(x), new(x)
    for p_old, p_new in zip(old.collect_params().values(), new.collect_params().values()):
        p_new.set_data(np.asarray(p_old.data()))  # a copy: a compiled step donates its buffers
    return old, new, x


@pytest.mark.parametrize("hybridize", [False, True])
def test_training_loop_matches_the_forward_block(hybridize):
    old, new, x = gluon1_and_native()
    y = jnp.asarray(np.random.default_rng(2).normal(size=(4, 3)), jnp.float32)
    loss_fn = hybrid.loss.L2Loss()
    for net in (old, new):
        if hybridize:
            net.hybridize()
        trainer = hybrid.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.1, "momentum": 0.9})
        for _ in range(3):
            with autograd.record():
                loss = loss_fn(net(x), y)
            loss.backward()
            trainer.step(4)
    for p_old, p_new in zip(old.collect_params().values(), new.collect_params().values()):
        assert_close(p_old.grad(), p_new.grad(), rtol=1e-5, atol=1e-6)
        assert_close(p_old.data(), p_new.data(), rtol=1e-5, atol=1e-6)


def test_compiled_training_step_matches_the_forward_block():
    old, new, x = gluon1_and_native()
    y = jnp.asarray(np.random.default_rng(2).normal(size=(4, 3)), jnp.float32)
    loss_fn = hybrid.loss.L2Loss()
    results = []
    for net in (old, new):
        trainer = hybrid.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.1})

        @hybrid.compile
        def step(x, y):
            with autograd.record():
                loss = loss_fn(net(x), y)
            loss.backward()
            trainer.step(4)
            return loss

        results.append([np.asarray(step(x, y)) for _ in range(3)])
    assert_close(results[0], results[1], rtol=1e-5, atol=1e-6)
    for p_old, p_new in zip(old.collect_params().values(), new.collect_params().values()):
        assert_close(p_old.data(), p_new.data(), rtol=1e-5, atol=1e-6)


def test_export_then_symbolblock_imports(tmp_path):
    io = fixture("convbn")
    net = loaded("convbn")
    net.hybridize()
    x = jnp.asarray(io["x"])
    net(x)
    symbol_file, params_file = net.export(str(tmp_path / "convbn"))
    imported = hybrid.SymbolBlock.imports(symbol_file, None, params_file)
    assert_close(imported(x), io["out"], rtol=1e-5, atol=1e-5)


def test_apply_and_jit_see_the_parameters():
    io = fixture("mlp")
    net = loaded("mlp")
    x = jnp.asarray(io["x"])
    state = net.state()
    out, _ = jax.jit(lambda s, x: net.apply(s, x))(state, x)
    assert_close(out, io["out"], rtol=1e-5, atol=1e-5)
    doubled = {k: v * 2 if k == "alpha" else v for k, v in state.items()}
    out2, _ = net.apply(doubled, x)
    assert_close(out2, 2 * io["out"], rtol=1e-5, atol=1e-5)


def test_hybridized_graph_has_the_same_ops_as_the_forward_block():
    old, new, x = gluon1_and_native()
    old.hybridize()
    new.hybridize()
    ops_old = [n.op for n in hybrid.inspect(old, x).after.nodes]
    ops_new = [n.op for n in hybrid.inspect(new, x).after.nodes]
    assert ops_old == ops_new


def test_subclass_of_a_layer_overriding_hybrid_forward_runs_it():
    class HalfDense(nn.Dense):
        def hybrid_forward(self, F, x, weight, bias):
            return F.FullyConnected(x, weight * 0.5, bias, num_hidden=self._units)

    net = HalfDense(3, in_units=2)
    net.initialize(init.One())
    assert_close(net(jnp.ones((1, 2))), [[1.0, 1.0, 1.0]])  # bias 0 + 0.5 * (1 + 1)


def test_get_constant_dtypes_are_gluon1s():
    class Consts(hybrid.HybridBlock):
        def __init__(self):
            super().__init__()
            self.grid = self.params.get_constant("grid", np.arange(3))  # MXNet: float32
            self.ids = self.params.get_constant("ids", jnp.arange(2, dtype=jnp.int32))

    block = Consts()
    assert block.grid.dtype == np.float32 and block.ids.dtype == np.int32
    assert hybrid.Constant("c", np.arange(2)).dtype == np.float32  # Gluon 1.x's argument order


def test_plain_settings_before_super_init():
    class Early(hybrid.HybridBlock):
        def __init__(self):
            self.inplanes = 64  # GluonCV's ResNetV1b does this before super().__init__()
            super().__init__()
            self.weight = self.params.get("weight", shape=(2,))

        def hybrid_forward(self, F, x, weight):
            return x * weight

    assert Early().inplanes == 64

    class TooEarly(hybrid.HybridBlock):
        def __init__(self):
            self.dense = nn.Dense(2)
            super().__init__()

    with pytest.raises(RuntimeError, match=r"super\(\).__init__\(\) before assigning 'dense'"):
        TooEarly()


def test_amp_policy_applies_to_f_operators():
    old, new, x = gluon1_and_native()
    old.hybridize()
    new.hybridize()
    hybrid.amp.init("bfloat16")
    try:
        out_old, out_new = old(x), new(x)
    finally:
        hybrid.amp.disable()
    assert out_old.dtype == out_new.dtype == jnp.bfloat16
    assert_close(out_old.astype(jnp.float32), out_new.astype(jnp.float32), rtol=0, atol=0)


def test_get_after_the_attribute_was_cleared_registers_again():
    block = BLOCKS["DenseF"](3)
    bias = block.bias
    block.bias = None
    assert list(block.collect_params()) == ["weight"]
    assert block.params.get("bias") is bias and list(block.collect_params()) == ["weight", "bias"]


def test_deferred_shapes_through_keyword_inputs_and_elementwise_operands():
    class Keywords(hybrid.HybridBlock):
        def __init__(self):
            super().__init__()
            self.weight = self.params.get("weight", shape=(4, 0), allow_deferred_init=True)
            self.shift = self.params.get("shift", shape=(0, 0), init=init.One(), allow_deferred_init=True)

        def hybrid_forward(self, F, x, weight, shift):
            y = F.FullyConnected(data=x, weight=weight, no_bias=True, num_hidden=4)
            return F.elemwise_add(y, shift)

    net = Keywords()
    net.initialize()
    assert net(jnp.ones((2, 3))).shape == (2, 4)
    assert net.weight.shape == (4, 3) and net.shift.shape == (2, 4)


def test_subclass_of_batchnorm_calling_f_batchnorm_with_its_kwargs():
    """GluonCV's BatchNormCudnnOff: a subclass of nn.BatchNorm whose hybrid_forward calls F.BatchNorm with
    Gluon 1.x's self._kwargs; in both modes it computes what nn.BatchNorm computes."""
    class BatchNormF(nn.BatchNorm):
        def hybrid_forward(self, F, x, gamma, beta, running_mean, running_var):
            return F.BatchNorm(x, gamma, beta, running_mean, running_var, name="fwd", **self._kwargs)

    rng = np.random.default_rng(0)
    x = rng.standard_normal((4, 3, 5, 5)).astype(np.float32)
    plain, custom = nn.BatchNorm(momentum=0.8), BatchNormF(momentum=0.8)
    assert custom._kwargs == {"axis": 1, "eps": 1e-5, "momentum": 0.8, "fix_gamma": False, "use_global_stats": False}
    for net in (plain, custom):
        net.initialize()
        net.gamma.set_data(rng.random(3).astype(np.float32) + 0.5)
    custom.gamma.set_data(plain.gamma.data())
    assert_close(custom(x), plain(x), 1e-5, 1e-5)  # predict mode: running statistics
    with autograd.record():
        y_plain, y_custom = plain(x), custom(x)
    assert_close(y_custom, y_plain, 1e-5, 1e-5)
    assert_close(custom.running_mean.data(), plain.running_mean.data(), 1e-6, 1e-6)
    assert_close(custom.running_var.data(), plain.running_var.data(), 1e-6, 1e-6)
    assert not np.allclose(np.asarray(plain.running_var.data()), 1.0)  # the statistics did move


def test_mxnet_contexts_place_parameters():
    import hybrid.mxnet as mx
    net = nn.Dense(2, in_units=3)
    net.initialize(ctx=mx.cpu())
    net.collect_params().reset_ctx(mx.cpu(0))
    assert net.weight.data().devices() == {jax.devices("cpu")[0]}
