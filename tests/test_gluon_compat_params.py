"""Gluon's ParameterDict on what collect_params() returns (a dict subclass with initialize, setattr, zero_grad,
reset_ctx, list_ctx, save, load and a refusing update), Parameter.list_ctx, and Gluon 1.x block construction:
name_scope(), prefix= and params= on every Block, and Constant(name, value)."""
import jax
import numpy as np
import pytest

import hybrid
from hybrid import Constant, Parameter, autograd, init, nn
from hybrid.errors import DeferredInitializationError, ShapeError, UninitializedParameterError
from hybrid import ParameterDict

from helpers import run_on_cpu_devices


def two_layers():
    net = nn.HybridSequential()
    net.add(nn.Dense(3, in_units=2), nn.Dense(1, in_units=3))
    return net


# -- 1. ParameterDict -------------------------------------------------------------------------------
def test_collect_params_is_a_dict_with_gluons_methods():
    net = two_layers()
    params = net.collect_params()
    assert isinstance(params, ParameterDict) and isinstance(params, dict)
    assert list(params) == ["0.weight", "0.bias", "1.weight", "1.bias"]
    assert params == dict(params) and params["0.weight"] is net[0].weight
    assert params.get("nothing") is None and params.get("0.bias") is net[0].bias
    selected = net.collect_params(".*weight")
    assert isinstance(selected, ParameterDict) and list(selected) == ["0.weight", "1.weight"]
    assert isinstance(net[0].params, ParameterDict) and list(net[0].params) == ["weight", "bias"]
    assert isinstance(params.copy(), ParameterDict) and params.copy() == params
    assert jax.tree_util.tree_map(lambda p: p.shape, params) == {  # a pytree node, as a dict is
        "0.weight": (3, 2), "0.bias": (3,), "1.weight": (1, 3), "1.bias": (1,)}
    with pytest.raises(TypeError, match="as block attributes"):
        params.get("w", shape=(2, 2))  # Gluon 1.x's creating get()


def test_parameterdict_initialize_setattr_and_zero_grad():
    net = two_layers()
    params = net.collect_params()
    params.initialize(init=init.Constant(0.5), ctx=jax.devices()[0])
    np.testing.assert_array_equal(np.asarray(net[0].weight.data()), np.full((3, 2), 0.5))
    np.testing.assert_array_equal(np.asarray(net[1].bias.data()), np.zeros(1))  # a bias's own init wins
    with pytest.warns(UserWarning, match="4 parameter.*left unchanged"):
        params.initialize(init=init.Constant(2.0))
    np.testing.assert_array_equal(np.asarray(net[0].weight.data()), np.full((3, 2), 0.5))
    net.collect_params(".*weight").initialize(init=init.One(), device=jax.devices()[0], force_reinit=True)
    np.testing.assert_array_equal(np.asarray(net[1].weight.data()), np.ones((1, 3)))
    np.testing.assert_array_equal(np.asarray(net[0].weight.data()), np.ones((3, 2)))

    net.collect_params(".*bias").setattr("grad_req", "null")
    net.collect_params().setattr("lr_mult", 0.5)
    assert [p.grad_req for p in params.values()] == ["write", "null", "write", "null"]
    assert {p.lr_mult for p in params.values()} == {0.5}
    with pytest.raises(ValueError, match="grad_req must be one of"):
        params.setattr("grad_req", "sometimes")

    x = np.array([[1.0, 2.0]], np.float32)
    for p in params.values():
        if p.grad_req != "null":
            p.grad_req = "add"
    with autograd.record():
        y = net(x).sum()
    autograd.backward(y)
    # y = sum(W1 (W0 x + b0) + b1) with W0 = W1 = ones: dy/dW1 = W0 x + b0 = 3 per entry
    np.testing.assert_allclose(np.asarray(net[1].weight.grad()), np.full((1, 3), 3.0))
    params.zero_grad()
    np.testing.assert_array_equal(np.asarray(net[1].weight.grad()), np.zeros((1, 3)))
    np.testing.assert_array_equal(np.asarray(net[0].weight.grad()), np.zeros((3, 2)))


def test_parameterdict_devices():
    net = two_layers()
    params = net.collect_params()
    with pytest.raises(UninitializedParameterError, match="'weight' has not been initialized"):
        net[0].weight.list_ctx()
    assert params.list_ctx() == []
    device = jax.devices()[0]
    params.initialize(ctx=device)
    assert net[0].weight.list_ctx() == [device] and net[0].weight.list_device() == [device]
    assert params.list_ctx() == [device] and params.list_device() == [device]
    params.reset_ctx(device)
    params.reset_device([device])  # Gluon's list of contexts, here of one device
    assert net[0].weight.data().devices() == {device}
    deferred = nn.Dense(2)
    deferred.initialize(device=device)
    assert deferred.weight.list_device() == [device]  # waits for its shape, on the device it will use


def test_parameter_initialize_places_data_on_the_given_device():
    device = jax.devices()[-1]
    p = Parameter("w", shape=(2,), init=init.One())
    p.initialize(ctx=device)
    assert p.data().devices() == {device}
    deferred = nn.Dense(2)
    deferred.initialize(device=device)
    deferred(np.ones((1, 3), np.float32))
    assert deferred.weight.data().devices() == {device}


TWO_DEVICES = """
import jax, numpy as np
from hybrid import init, nn
d0, d1 = jax.devices()[:2]
net = nn.HybridSequential()
net.add(nn.Dense(3, in_units=2), nn.Dense(1))
net.initialize(init.One(), ctx=d1)
out = np.asarray(net(np.array([[1.0, 2.0]], np.float32)))
params = net.collect_params()
print(params["0.weight"].list_ctx() == [d1], params["1.weight"].data().devices() == {d1}, out.tolist())
net[0].collect_params().reset_ctx(d0)
print(params.list_ctx() == [d0, d1], params["0.weight"].data().devices() == {d0})
"""


def test_initialize_and_reset_ctx_place_parameters_on_another_device():
    """Two CPU devices in a subprocess: initialize(ctx=second) puts the data (deferred too) on the second,
    reset_ctx moves a selection back, list_ctx lists both."""
    # ones weights, zero biases: x = (1, 2) -> (3, 3, 3) -> 9
    assert run_on_cpu_devices(TWO_DEVICES).split("\n")[:2] == ["True True [[9.0]]", "True True"]


def test_update_refuses_a_name_bound_to_another_parameter():
    net = two_layers()
    params = net.collect_params()
    params.update(net.collect_params())  # the same Parameters: nothing to refuse
    extra = Parameter("extra", shape=(1,))
    params.update({"extra": extra})
    assert params["extra"] is extra and len(params) == 5
    with pytest.raises(ValueError, match="'0.weight' is already bound to another Parameter"):
        params.update({"more": Parameter("more", shape=(1,)), "0.weight": Parameter("w", shape=(3, 2))})
    assert "more" not in params and params["0.weight"] is net[0].weight  # nothing was added
    with pytest.raises(TypeError, match="must be a Parameter"):
        params.update(x=np.zeros(2))


def test_parameterdict_save_and_load(tmp_path):
    net = two_layers()
    net.initialize(init.Constant(0.25))
    params = net.collect_params()
    path = str(tmp_path / "p.params")
    params.save(path)
    other = two_layers()
    other.load_parameters(path)  # the block's loader reads the dict's file
    np.testing.assert_array_equal(np.asarray(other[0].weight.data()), np.full((3, 2), 0.25))

    first = str(tmp_path / "first.params")
    net.collect_params("0\\..*").save(first, strip_prefix="0.")
    target = nn.Dense(3, in_units=2)
    target.initialize(init.Zero())
    target.collect_params().load(first, ctx=jax.devices()[0])
    np.testing.assert_array_equal(np.asarray(target.weight.data()), np.full((3, 2), 0.25))
    fresh = two_layers()
    fresh.initialize(init.Zero())
    fresh.collect_params("0\\..*").load(first, restore_prefix="0.")
    np.testing.assert_array_equal(np.asarray(fresh[0].weight.data()), np.full((3, 2), 0.25))
    np.testing.assert_array_equal(np.asarray(fresh[1].weight.data()), np.zeros((1, 3)))

    with pytest.raises(ValueError, match="'1.weight' does not start with strip_prefix '0.'"):
        params.save(str(tmp_path / "never.params"), strip_prefix="0.")
    assert not (tmp_path / "never.params").exists()
    with pytest.raises(ValueError, match="'weight' does not start with restore_prefix 'x.'"):
        target.collect_params().load(first, restore_prefix="x.")
    partial = str(tmp_path / "partial.params")
    net.collect_params("0\\..*").save(partial)
    with pytest.raises(ValueError, match=r"partial\.params: parameter\(s\) \['1.weight', '1.bias'\] of the "
                                         r"ParameterDict are not in the file"):
        fresh.collect_params().load(partial)
    with pytest.raises(ValueError, match=r"the file has parameter\(s\) \['1.weight', '1.bias'\]"):
        fresh.collect_params("0\\..*").load(path)
    target.collect_params().load(path, allow_missing=True, ignore_extra=True)  # no name in common: unchanged
    np.testing.assert_array_equal(np.asarray(target.weight.data()), np.full((3, 2), 0.25))
    wide = nn.Dense(3, in_units=5)
    wide.initialize()
    with pytest.raises(ShapeError, match=r"first\.params: parameter 'weight' has shape \(3, 2\)"):
        wide.collect_params().load(first)
    half = nn.Dense(3, in_units=2, dtype="float16")
    half.initialize()
    with pytest.raises(TypeError, match="'weight' has dtype float32 in the file"):
        half.collect_params().load(first)
    half.collect_params().load(first, cast_dtype=True)
    assert half.weight.data().dtype == np.float16
    with pytest.raises(FileNotFoundError):
        target.collect_params().load(str(tmp_path / "missing.params"))

    uninit = two_layers()
    with pytest.raises(UninitializedParameterError, match=r"ParameterDict.save\('.*u.params'\): parameter "
                                                          r"'0.weight' is not initialized"):
        uninit.collect_params().save(str(tmp_path / "u.params"))
    lazy = nn.Dense(2)
    lazy.initialize()
    with pytest.raises(DeferredInitializationError, match="parameter 'weight' has unknown shape"):
        lazy.collect_params().save(str(tmp_path / "u.params"))
    assert not (tmp_path / "u.params").exists()


# -- 2. Gluon 1.x block construction ----------------------------------------------------------------
class Gluon1Net(hybrid.HybridBlock):
    """A block written as Gluon 1.x code writes them."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        with self.name_scope():
            self.hidden = nn.Dense(3, in_units=2)
            self.scale = Parameter("scale", shape=(3,), init=init.Constant(2.0))

    def forward(self, x):
        return self.hidden(x) * self.scale.data()


def test_name_scope_prefix_and_name():
    net = Gluon1Net(prefix="model_")
    assert net.prefix == "model_" and net.name == "model"
    assert list(net.collect_params()) == ["scale", "hidden.weight", "hidden.bias"]
    with net.name_scope() as scope:
        pass
    assert scope is net
    dense = nn.Dense(4, prefix="fc_")  # a layer whose __init__ has no **kwargs
    assert (dense.prefix, dense.name) == ("fc_", "fc")
    seq = nn.HybridSequential(prefix="body")
    assert (seq.prefix, seq.name) == ("body", "body")
    with pytest.raises(TypeError, match="prefix must be a str"):
        nn.Dense(4, prefix=3)


def test_params_shares_parameters_like_gluon_1x():
    first = Gluon1Net()
    second = Gluon1Net(params=first.collect_params())
    assert second.hidden.weight is first.hidden.weight and second.scale is first.scale
    first.initialize(init.One())
    x = np.array([[1.0, -1.0], [2.0, 3.0]], np.float32)
    # the shared net computes 2 * (x @ ones(2, 3)) with zero bias
    np.testing.assert_allclose(np.asarray(second(x)), 2 * np.repeat(x.sum(1, keepdims=True), 3, axis=1))

    seq = nn.HybridSequential()
    seq.add(nn.Dense(3, in_units=2), nn.Dense(1, in_units=3))
    again = nn.HybridSequential(params=seq.collect_params())
    with again.name_scope():  # children added after construction share too
        again.add(nn.Dense(3, in_units=2), nn.Dense(1, in_units=3))
    assert [id(p) for p in again.collect_params().values()] == [id(p) for p in seq.collect_params().values()]

    dense = nn.Dense(3, in_units=2, params=seq[0].collect_params())
    assert dense.weight is seq[0].weight and dense.bias is seq[0].bias
    with pytest.raises(ValueError, match="none of the shared names.*structural name"):
        nn.Dense(3, in_units=2, params=seq.collect_params())
    with pytest.raises(ShapeError, match=r"shared parameter 'weight' has shape \(3, 2\).*\(3, 5\)"):
        nn.Dense(3, in_units=5, params=seq[0].collect_params())
    with pytest.raises(TypeError, match="params must be a dict of Parameters"):
        nn.Dense(3, params=[seq[0].weight])


def test_symbolblock_keeps_its_own_params_argument():
    from hybrid.export import GraphBuilder, SymbolBlock
    g = GraphBuilder()
    x = g.input("data", (1, 2))
    w, b = g.input("fc.weight", (1, 2)), g.input("fc.bias", (1,))
    weight = np.array([[2.0, 3.0]], np.float32)
    block = SymbolBlock(g.op("dense", x, w, b, flatten=True), x, params={"fc.weight": weight}, prefix="sym_")
    assert list(block.collect_params()) == ["fc.weight", "fc.bias"] and block.prefix == "sym_"
    np.testing.assert_array_equal(np.asarray(block.collect_params()["fc.weight"].data()), weight)


def test_constant_takes_gluon_1x_and_2_0_argument_orders():
    old = Constant("const", np.array([1.0, 2.0]))
    new = Constant(np.array([1.0, 2.0]), name="const")
    for c in (old, new):
        assert c.name == "const" and c.shape == (2,) and c.grad_req == "null"
        np.testing.assert_array_equal(c.value, [1.0, 2.0])
    with pytest.raises(TypeError, match="value must be array-like"):
        Constant("const")
    with pytest.raises(TypeError, match="value must be array-like"):
        Constant("a", "b")


# -- 3. ctx= / device= in the model zoo and SymbolBlock.imports -------------------------------------
def test_model_zoo_accepts_ctx_and_device():
    from hybrid import model_zoo
    device = jax.devices()[0]
    for net in (model_zoo.get_model("lenet", ctx=device), model_zoo.get_model("mlp", device=device, classes=3),
                model_zoo.resnet18_v1(ctx=[device], classes=4), model_zoo.get_vgg(11, device=device)):
        assert isinstance(net, hybrid.HybridBlock)
    assert net.output.weight.shape[0] == 1000 and model_zoo.resnet18_v1(ctx=device, classes=4).output.weight.shape[0] == 4
    with pytest.raises(TypeError, match="ctx must be a jax.Device"):
        model_zoo.get_model("lenet", ctx="gpu(0)")
    with pytest.raises(ValueError, match="no pretrained weights"):
        model_zoo.get_model("alexnet", pretrained=True, ctx=device)


def test_symbolblock_imports_accepts_ctx(tmp_path):
    net = nn.HybridSequential()
    net.add(nn.Dense(2, in_units=3))
    net.initialize(init.Constant(0.5))
    net.hybridize()
    x = np.ones((1, 3), np.float32)
    net(x)
    symbol_file, param_file = net.export(str(tmp_path / "net"))
    device = jax.devices()[-1]
    for block in (hybrid.SymbolBlock.imports(symbol_file, ["data"], param_file, ctx=device),
                  hybrid.SymbolBlock.imports(symbol_file, ["data"], param_file, device)):
        weight = block.collect_params()["0.weight"]
        assert weight.list_ctx() == [device]
        np.testing.assert_allclose(np.asarray(block(x)), np.full((1, 2), 1.5))  # 3 * 0.5 and a zero bias
