import jax
import jax.numpy as jnp
import numpy as np
import pytest

import hybrid
from hybrid import Block, HybridBlock, Parameter, autograd, init, nn
from hybrid._compiled import cached_op as _cached_op
from hybrid.errors import HybridizeError

from conftest import assert_close
from helpers import clone_params, run_with_grads


class CountTraces:
    def __init__(self, monkeypatch):
        self.count = 0
        original = _cached_op.trace_block

        def counting(*args, **kwargs):
            self.count += 1
            return original(*args, **kwargs)
        monkeypatch.setattr(_cached_op, "trace_block", counting)


class Residual(HybridBlock):
    """User code mixing layers and free jax.numpy operations."""

    def __init__(self):
        super().__init__()
        self.dense = nn.Dense(6)
        self.scale = Parameter("scale", shape=(6,), init=init.One())

    def forward(self, x):
        h = self.dense(x)
        return jnp.tanh(h) * self.scale.data() + jnp.sin(h) ** 2, h.sum(axis=1)


def test_user_block_with_free_jax_code_matches_eager(rng):
    eager, compiled = Residual(), Residual()
    eager.initialize()
    compiled.initialize()
    x = rng.standard_normal((4, 5)).astype(np.float32)
    eager(x), compiled(x)
    clone_params(eager, compiled)
    compiled.hybridize()
    outs = []
    for net in (eager, compiled):
        with autograd.record():
            a, b = net(x)
        autograd.backward([a, b], head_grads=[np.ones((4, 6), np.float32), np.arange(4, dtype=np.float32)])
        outs.append((np.asarray(a), np.asarray(b), {n: np.asarray(p.grad()) for n, p in net.collect_params().items()}))
    assert_close(outs[1][0], outs[0][0])
    assert_close(outs[1][1], outs[0][1])
    for name in outs[0][2]:
        assert_close(outs[1][2][name], outs[0][2][name], rtol=1e-5)


def test_graph_has_big_ops_and_primitives(rng):
    net = Residual()
    net.initialize()
    x = rng.standard_normal((4, 5)).astype(np.float32)
    graph = hybrid.inspect(net, x).before
    counts = graph.op_counts()
    assert counts["dense"] == 1
    assert counts["tanh"] == 1 and counts["sin"] == 1 and counts["reduce_sum"] == 1
    assert "dot_general" not in counts  # the dense is one node, not a soup of primitives
    text = graph.to_text()
    assert "dense(%data, %dense.weight, %dense.bias)" in text and "f32[4,6]" in text


def test_compiled_once_per_signature(monkeypatch, rng):
    counter = CountTraces(monkeypatch)
    net = nn.HybridSequential()
    net.add(nn.Dense(3, in_units=4), nn.Dropout(0.5))
    net.initialize()
    net.hybridize()
    x = rng.standard_normal((2, 4)).astype(np.float32)
    for _ in range(3):
        net(x)
    assert counter.count == 1
    net(rng.standard_normal((5, 4)).astype(np.float32))
    assert counter.count == 2  # new shape
    net(x.astype(np.float16))
    assert counter.count == 3  # new dtype
    with autograd.record():
        net(x)
    assert counter.count == 4  # training mode is a different program
    with autograd.record():
        net(x)
    net(x)
    assert counter.count == 4


def test_hybridized_call_does_not_walk_the_block_tree(monkeypatch, rng):
    net = nn.HybridSequential()
    net.add(nn.Dense(8, activation="relu"), nn.BatchNorm(), nn.Dense(2))
    net.initialize()
    net.hybridize()
    loss_fn = hybrid.loss.L2Loss()
    loss_fn.hybridize()
    x = rng.standard_normal((4, 3)).astype(np.float32)
    y = rng.standard_normal((4, 2)).astype(np.float32)
    trainer = hybrid.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.1})

    def step():
        with autograd.record():
            loss = loss_fn(net(x), y)
        autograd.backward(loss)
        trainer.step(4)
        return net(x)

    step()  # compiles everything

    def forbidden(*args, **kwargs):
        raise AssertionError("the block tree was walked during a compiled call")

    monkeypatch.setattr(Block, "collect_params", forbidden)
    monkeypatch.setattr(Block, "_collect_params_with_prefix", forbidden)
    before = np.asarray(net[0].weight.data()).copy()
    step()
    assert not np.allclose(np.asarray(net[0].weight.data()), before)


def test_dropout_key_is_an_input_not_a_constant(rng):
    net = nn.HybridSequential()
    net.add(nn.Dense(4, in_units=3), nn.Dropout(0.5))
    net.initialize()
    x = rng.standard_normal((2, 3)).astype(np.float32)
    graph = hybrid.inspect(net, x, training=True).after
    assert [v.name for v in graph.inputs][-2:] == ["rng_key", "rng_counter"]
    assert not any("key" in str(v.dtype) for v in graph.consts)
    predict_graph = hybrid.inspect(net, x, training=False).after
    assert "dropout" not in predict_graph.op_counts()
    assert "rng_key" not in [v.name for v in predict_graph.inputs]


def test_seed_reproduces_hybridized_dropout(rng):
    net = nn.Dropout(0.5)
    net.hybridize()
    x = np.ones((16, 16), np.float32)
    outs = []
    for _ in range(2):
        hybrid.random.seed(3)
        with autograd.train_mode():
            outs.append((np.asarray(net(x)), np.asarray(net(x))))
    np.testing.assert_array_equal(outs[0][0], outs[1][0])
    np.testing.assert_array_equal(outs[0][1], outs[1][1])
    assert not np.array_equal(outs[0][0], outs[0][1])


class Branchy(HybridBlock):
    def forward(self, x):
        if x.sum() > 0:
            return x
        return -x


def test_python_control_flow_on_arrays_gets_a_clear_error():
    net = nn.HybridSequential()
    net.add(nn.Dense(3, in_units=2), Branchy())
    net.initialize()
    x = np.ones((2, 2), np.float32)
    net(x)  # eager: fine
    net.hybridize()
    with pytest.raises(HybridizeError, match=r"Branchy '1'.*Python control flow.*jnp.where"):
        net(x)


def test_outputs_kwargs_and_static_arguments(rng):
    class Multi(HybridBlock):
        def __init__(self):
            super().__init__()
            self.dense = nn.Dense(2, in_units=3)

        def forward(self, x, scale=1.0, extra=None):
            y = self.dense(x) * scale
            out = {"y": y, "pair": (y.sum(), x)}
            if extra is not None:
                out["extra"] = extra + 1
            return out

    net = Multi()
    net.initialize()
    x = rng.standard_normal((4, 3)).astype(np.float32)
    eager = net(x, 2.0, extra=x)
    net.hybridize()
    compiled = net(x, 2.0, extra=x)
    assert set(compiled) == {"y", "pair", "extra"}
    assert_close(compiled["y"], eager["y"])
    assert_close(compiled["pair"][0], eager["pair"][0])
    assert_close(compiled["extra"], x + 1)
    assert_close(net(x, 3.0)["y"], np.asarray(eager["y"]) * 1.5, rtol=1e-5)
    assert_close(net(jnp.asarray(x), 2.0)["y"], eager["y"])  # NumPy and JAX inputs agree


def test_unregistered_parameter_is_reported(rng):
    stray = Parameter("stray", shape=(3,), init=init.One())
    stray.initialize()

    class UsesStray(HybridBlock):
        def forward(self, x):
            return x * stray.data()

    net = UsesStray()
    net.hybridize()
    with pytest.raises(HybridizeError, match=r"\['stray'\].*not registered"):
        net(np.ones((2, 3), np.float32))


def test_hybrid_block_refuses_plain_block_child():
    net = nn.HybridSequential()
    with pytest.raises(ValueError, match="children must be HybridBlocks too.*HybridSequential"):
        net.add(nn.Sequential())


def test_hybridize_options():
    net = nn.Dense(2, in_units=2)
    net.hybridize(static_alloc=True, static_shape=True)
    with pytest.raises(TypeError):
        net.hybridize(nonsense=True)
    with pytest.raises(ValueError, match="unknown pass"):
        net.hybridize(passes=["no_such_pass"])


def test_grad_req_change_recompiles(rng):
    net = nn.Dense(2, in_units=3)
    net.initialize()
    net.hybridize()
    x = rng.standard_normal((4, 3)).astype(np.float32)
    with autograd.record():
        out = net(x)
    autograd.backward(out)
    net.weight.grad_req = "null"
    net.bias.zero_grad()
    with autograd.record():
        out = net(x)
    autograd.backward(out)
    assert_close(net.bias.grad(), [4.0, 4.0])


def test_deactivate_and_parameter_replacement(rng):
    net = nn.HybridSequential()
    net.add(nn.Dense(2, in_units=3))
    net.initialize()
    net.hybridize()
    x = rng.standard_normal((4, 3)).astype(np.float32)
    net(x)
    other = nn.HybridSequential()
    other.add(nn.Dense(2, in_units=3))
    other.initialize(init.One())
    net.share_parameters(other.collect_params())
    assert_close(net(x), x @ np.ones((3, 2)), rtol=1e-5)
    net.hybridize(active=False)
    assert_close(net(x), x @ np.ones((3, 2)), rtol=1e-5)


def test_plain_block_parent_with_hybridized_child_records(rng):
    class Parent(Block):
        def __init__(self):
            super().__init__()
            self.body = nn.Dense(3, in_units=2)

        def forward(self, x):
            return jnp.tanh(self.body(x))  # free jax code in a plain Block is recorded too

    net = Parent()
    net.initialize()
    net.body.hybridize()
    x = rng.standard_normal((4, 2)).astype(np.float32)
    with autograd.record():
        out = net(x)
    autograd.backward(out)
    w, b = np.asarray(net.body.weight.data()), np.asarray(net.body.bias.data())
    t = np.tanh(x @ w.T + b)
    assert_close(net.body.weight.grad(), ((1 - t ** 2)).T @ x, rtol=1e-4)
