"""Programs shared by structure: blocks made inside a step, equal layers, and scoped invalidation."""
import logging

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import hybrid
from hybrid import HybridBlock, Parameter, Trainer, autograd, init, loss, nn
from hybrid._compiled import cached_op as _cached_op

TOL = dict(rtol=2e-5, atol=2e-6)


def close(a, b, **tol):
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), **(tol or TOL))


@pytest.fixture
def traces(monkeypatch):
    """Counts the traces of block forwards (the first step of every new program)."""
    count = [0]
    original = _cached_op.trace_block

    def counting(block, args):
        count[0] += 1
        return original(block, args)

    monkeypatch.setattr(_cached_op, "trace_block", counting)
    return count


class CompileLog(logging.Handler):
    def __init__(self):
        super().__init__(logging.INFO)
        self.lines = []

    def emit(self, record):
        self.lines.append(record.getMessage())

    def count(self, prefix):
        return sum(line.startswith(prefix) for line in self.lines)


@pytest.fixture
def compile_log():
    logger = logging.getLogger("hybrid.compile")
    handler, level = CompileLog(), logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    yield handler
    logger.removeHandler(handler)
    logger.setLevel(level)


def program_of(block, training=False):
    """The program of ``block``'s only compiled signature (hybridized or not)."""
    op = block._cached_op if block._active else block.__dict__["_recorded_op"]
    entries = [e for k, e in op.entries.items() if k[1] == training]
    assert len(entries) == 1
    return entries[0].program


def ref_ce(logits, y):
    return -jnp.take_along_axis(jax.nn.log_softmax(logits), y[:, None], axis=-1)[:, 0]


def data(n=6, d=4, classes=3, seed=0):
    rng = np.random.RandomState(seed)
    return rng.randn(n, d).astype(np.float32), rng.randint(0, classes, n).astype(np.int32)


# -- a block made inside the step -------------------------------------------------------------------------
@pytest.mark.parametrize("hybridize", [False, True])
def test_loss_block_made_inside_the_step_compiles_once_and_trains_as_the_reference(hybridize, traces):
    x, y = data()
    net = nn.Dense(3, in_units=4)
    net.initialize(init.Xavier())
    trainer = Trainer(net.collect_params(), "sgd", {"learning_rate": 0.5})
    w, b = np.array(net.weight.data()), np.array(net.bias.data())

    def ref_loss(w, b):
        return jnp.mean(ref_ce(x @ w.T + b, y))

    compiles = autograd.stats.compiles
    for step in range(4):
        with autograd.record():
            loss_fn = loss.SoftmaxCrossEntropyLoss()
            if hybridize:
                loss_fn.hybridize()
            l = loss_fn(net(x), y)
        l.backward()
        trainer.step(len(x))
        close(l, ref_ce(x @ w.T + b, y))
        gw, gb = jax.grad(ref_loss, argnums=(0, 1))(w, b)
        w, b = w - 0.5 * gw, b - 0.5 * gb
        close(net.weight.data(), w)
        close(net.bias.data(), b)
        if step == 0:
            first_traces = traces[0]
    assert autograd.stats.compiles - compiles == 1  # the step's program, compiled at the first step
    assert traces[0] == first_traces  # later loss blocks found the first one's program: no trace


def test_creating_a_block_traces_and_compiles_nothing(traces, compile_log):
    x, y = data()
    loss.SoftmaxCrossEntropyLoss()(jnp.asarray(x[:, :3]), y)
    before, compiled = traces[0], compile_log.count("compiled")
    blocks = [loss.SoftmaxCrossEntropyLoss() for _ in range(50)]
    for block in blocks:
        close(block(jnp.asarray(x[:, :3]), y), ref_ce(x[:, :3], y))
    assert traces[0] == before and compile_log.count("compiled") == compiled


@jax.custom_vjp
def _clipped(v):
    return v


_clipped.defvjp(lambda v: (v, None), lambda _, g: (jnp.clip(g, -0.01, 0.01),))


class ClippedCE(HybridBlock):
    """A user's loss with custom derivatives (a custom_vjp rule, and relu's custom_jvp)."""

    def __init__(self, scale=1.0):
        super().__init__()
        self.scale = scale

    def forward(self, logits, y):
        return self.scale * ref_ce(_clipped(jax.nn.relu(logits) + logits), y)


@pytest.mark.parametrize("hybridize", [False, True])
def test_a_users_loss_with_custom_derivatives_made_in_the_step_compiles_once(hybridize):
    x, y = data()
    net = nn.Dense(3, in_units=4)
    net.initialize(init.Xavier())
    w, b = np.array(net.weight.data()), np.array(net.bias.data())
    compiles = autograd.stats.compiles
    for _ in range(3):
        with autograd.record():
            loss_fn = ClippedCE(2.0)
            if hybridize:
                loss_fn.hybridize()
            l = loss_fn(net(x), y)
        l.backward()
    assert autograd.stats.compiles - compiles <= 1

    def ref(w):
        logits = x @ w.T + b
        return jnp.sum(2.0 * ref_ce(_clipped(jax.nn.relu(logits) + logits), y))

    close(net.weight.grad(), jax.grad(ref)(w))


# -- equal layers --------------------------------------------------------------------------------------------
def deep_mlp(n_layers=33, width=64, classes=10):
    net = nn.Sequential()
    for _ in range(n_layers - 1):
        net.add(nn.Dense(width, activation="relu"))  # input sizes inferred at the first call
    net.add(nn.Dense(classes))
    net.initialize(init.Xavier())
    return net


def ref_mlp(values, x):
    for i in range(0, len(values), 2):
        x = x @ values[i].T + values[i + 1]
        if i + 2 < len(values):
            x = jax.nn.relu(x)
    return x


def test_a_33_layer_eager_mlp_compiles_one_program_per_distinct_layer(traces, compile_log):
    x, y = data(8, 64, 10)
    net = deep_mlp()
    out = net(x)  # eager: every layer runs as a compiled call
    values = [np.array(p.data()) for p in net.collect_params().values()]
    close(out, ref_mlp(values, x), rtol=1e-4, atol=1e-5)
    programs = {id(program_of(layer)) for layer in net}
    assert len(programs) == 2  # Dense(64, relu) with 64 inputs, and Dense(10)
    assert compile_log.count("compiled Dense") == 2
    assert traces[0] == 2

    trainer = Trainer(net.collect_params(), "sgd", {"learning_rate": 0.01})
    compiles = autograd.stats.compiles
    for _ in range(2):
        values = [np.array(p.data()) for p in net.collect_params().values()]
        with autograd.record():
            l = loss.SoftmaxCrossEntropyLoss()(net(x), y)
        l.backward()
        trainer.step(len(x))
    assert autograd.stats.compiles - compiles == 1  # the step's program
    assert len({id(program_of(layer, training=True)) for layer in net}) == 2
    expected = jax.grad(lambda v: jnp.mean(ref_ce(ref_mlp(v, x), y)))(values)
    for p, v, g in zip(net.collect_params().values(), values, expected):
        close(p.data(), v - 0.01 * g, rtol=1e-4, atol=1e-6)


def test_equal_layers_share_a_program_with_their_own_parameters_as_inputs():
    x = np.random.RandomState(1).randn(5, 4).astype(np.float32)
    a, b = nn.Dense(3, in_units=4), nn.Dense(3, in_units=4)
    a.initialize(init.Normal(1.0))
    b.initialize(init.Normal(1.0))
    for layer in (a, b, a):
        close(layer(x), x @ np.array(layer.weight.data()).T + np.array(layer.bias.data()))
    assert program_of(a) is program_of(b)
    assert program_of(a).paths is not None


def test_equal_hybridized_networks_share_and_keep_their_own_running_statistics(compile_log):
    def make():
        net = nn.HybridSequential()
        net.add(nn.Dense(4, in_units=3), nn.BatchNorm(in_channels=4))
        net.initialize(init.Normal(1.0))
        net.hybridize()
        return net

    nets = [make(), make()]
    xs = [np.random.RandomState(s).randn(6, 3).astype(np.float32) for s in (2, 3)]
    with autograd.train_mode():
        for net, x in zip(nets, xs):
            net(x)
    assert program_of(nets[0], True) is program_of(nets[1], True)
    assert compile_log.count("compiled HybridSequential") == 1
    for net, x in zip(nets, xs):
        h = x @ np.array(net[0].weight.data()).T + np.array(net[0].bias.data())
        close(net[1].running_mean.data(), 0.1 * h.mean(0), rtol=1e-4, atol=1e-6)
        close(net[1].running_var.data(), 0.9 + 0.1 * h.var(0, ddof=0), rtol=1e-3, atol=1e-5)


def test_equal_hybridized_blocks_with_hoisted_work_keep_each_blocks_prepared_weights():
    def make():
        net = nn.HybridSequential()
        net.add(nn.Conv2D(2, 3, in_channels=1), nn.BatchNorm(in_channels=2))
        net.initialize(init.Normal(1.0))
        net.hybridize()
        return net

    nets = [make(), make()]
    x = np.random.RandomState(4).randn(1, 1, 5, 5).astype(np.float32)
    with hybrid.block.eager_only():
        expected = [np.array(net(x)) for net in nets]
    for _ in range(2):
        for net, want in zip(nets, expected):
            close(net(x), want, rtol=1e-4, atol=1e-5)
    assert program_of(nets[0]) is program_of(nets[1])


def test_blocks_keep_their_own_attributes_assigned_in_forward():
    class Counter(HybridBlock):
        def __init__(self):
            super().__init__()
            self.total = jnp.zeros(3)

        def forward(self, x):
            self.total = self.total + x.sum(0)
            return x * 2

    blocks = [Counter(), Counter()]
    for block in blocks:
        block.hybridize()
    ones = np.ones((2, 3), np.float32)
    blocks[0](ones)
    blocks[0](ones)
    blocks[1](ones)
    close(blocks[0].total, [4, 4, 4])
    close(blocks[1].total, [2, 2, 2])


# -- when structure cannot be proven equal -------------------------------------------------------------------
def test_per_instance_functions_and_containers_keep_programs_of_their_own():
    x = np.arange(4, dtype=np.float32)
    doubles, triples = nn.HybridLambda(lambda x: x * 2), nn.HybridLambda(lambda x: x * 3)
    for block in (doubles, triples):
        block.hybridize()
    close(doubles(x), x * 2)
    close(triples(x), x * 3)
    assert program_of(doubles) is not program_of(triples)

    class Scaled(HybridBlock):
        def __init__(self, factors):
            super().__init__()
            self.factors = factors

        def forward(self, x):
            return x * self.factors[0]

    a, b = Scaled([2.0]), Scaled([5.0])
    for block in (a, b):
        block.hybridize()
    close(a(x), x * 2)
    close(b(x), x * 5)
    a.factors[0] = 7.0  # mutated in place: nothing to see, so the block keeps the program it traced
    close(b(x), x * 5)
    assert program_of(a) is not program_of(b)


def test_blocks_of_different_classes_or_with_hooks_do_not_share():
    class Twice(HybridBlock):
        def forward(self, x):
            return x * 2

    class Thrice(HybridBlock):
        def forward(self, x):
            return x * 3

    x = np.arange(3, dtype=np.float32)
    twice, thrice = Twice(), Thrice()
    twice.hybridize()
    thrice.hybridize()
    close(twice(x), x * 2)
    close(thrice(x), x * 3)
    seen = []
    hooked = Twice()
    hooked.register_forward_pre_hook(lambda block, args: seen.append(block))
    hooked.hybridize()
    close(hooked(x), x * 2)
    assert program_of(hooked) is not program_of(twice)


def test_an_array_attribute_is_not_a_shared_constant():
    class Shift(HybridBlock):
        def __init__(self, shift):
            super().__init__()
            self._shift = np.asarray(shift, np.float32)

        def forward(self, x):
            return x + self._shift

    x = np.zeros(2, np.float32)
    one, two = Shift([1, 1]), Shift([2, 2])
    for block in (one, two):
        block.hybridize()
    close(one(x), [1, 1])
    close(two(x), [2, 2])


# -- scoped invalidation ---------------------------------------------------------------------------------------
def test_a_changed_setting_traces_again_and_leaves_equal_blocks_alone():
    x = np.array([-1.0, 2.0], np.float32)
    a, b = nn.Activation("relu"), nn.Activation("relu")
    for block in (a, b):
        block.hybridize()
    close(a(x), [0, 2])
    close(b(x), [0, 2])
    shared = program_of(a)
    assert program_of(b) is shared
    a._act_type = "sigmoid"
    close(a(x), jax.nn.sigmoid(x))
    close(b(x), [0, 2])
    assert program_of(b) is shared and program_of(a) is not shared

    drop = nn.Dropout(0.5)
    ones = np.ones(4000, np.float32)
    with autograd.train_mode():
        assert 0.4 < float((drop(ones) == 0).mean()) < 0.6
        drop._rate = 0.1
        assert float((drop(ones) == 0).mean()) < 0.15


def test_different_shapes_dtypes_and_grad_req_do_not_share():
    x = np.ones((2, 4), np.float32)
    a, b, c = nn.Dense(3, in_units=4), nn.Dense(3, in_units=4), nn.Dense(5, in_units=4)
    for layer in (a, b, c):
        layer.initialize()
    a(x), b(x), c(x)
    assert program_of(a) is program_of(b) is not program_of(c)
    b.cast("float16")
    out = b(x.astype(np.float16))
    assert out.dtype == jnp.float16
    close(out, x.astype(np.float16) @ np.array(b.weight.data()).T + np.array(b.bias.data()), rtol=1e-2, atol=1e-2)
    assert program_of(b) is not program_of(a)
    close(a(x), x @ np.array(a.weight.data()).T + np.array(a.bias.data()))

    d = nn.Dense(3, in_units=4)
    d.initialize()
    d.weight.grad_req = "null"
    with autograd.record():
        l1 = a(x).sum()
        l2 = d(x).sum()
    autograd.backward([l1, l2])
    assert program_of(a, True) is not program_of(d, True)
    close(a.weight.grad(), np.full((3, 4), 2.0))
    assert d.weight.grad_req == "null"
    close(d.bias.grad(), np.full(3, 2.0))


def test_rehybridizing_with_other_passes_traces_again(traces):
    x = np.random.RandomState(5).randn(2, 4).astype(np.float32)
    a, b = nn.Dense(3, in_units=4), nn.Dense(3, in_units=4)
    for layer in (a, b):
        layer.initialize()
        layer.hybridize()
        layer(x)
    assert program_of(a) is program_of(b) and traces[0] == 1
    a.hybridize(passes=["dce"])
    close(a(x), x @ np.array(a.weight.data()).T + np.array(a.bias.data()))
    assert traces[0] == 2
    assert [s.name for s in program_of(a).pass_stats] == ["dce"]
    assert program_of(b) is not program_of(a)
    assert [s.name for s in program_of(b).pass_stats] != ["dce"]


def test_a_structural_change_releases_a_program_no_other_block_holds():
    x, y = data()
    net = nn.Dense(3, in_units=4)
    net.initialize()
    net.hybridize()
    trainer = Trainer(net.collect_params(), "sgd", {"learning_rate": 0.1})
    for _ in range(2):
        with autograd.record():
            l = loss.SoftmaxCrossEntropyLoss()(net(x), y)
        l.backward()
        trainer.step(len(x))
    program = program_of(net, True)
    assert _cached_op._SHARED.get(program.shared_key) is program
    net.weight.grad_req = "null"
    assert _cached_op._SHARED.get(program.shared_key) is not program


def test_deferred_layers_are_initialised_with_their_own_shapes():
    x = np.ones((2, 6), np.float32)
    a, b = nn.Dense(3), nn.Dense(3)
    a.initialize()
    b.initialize(init.Constant(0.5))
    a(x)
    out = b(x)
    assert b.weight.shape == (3, 6)
    close(out, np.full((2, 3), 3.0))
    assert program_of(a) is program_of(b)


def test_a_forward_that_changes_its_block_while_traced_runs_for_every_block():
    class Remember(HybridBlock):
        def forward(self, x):
            self.width = x.shape[-1]
            return x + 1

    blocks = [Remember(), Remember()]
    for block in blocks:
        block.hybridize()
        close(block(np.zeros((1, 3), np.float32)), np.ones((1, 3)))
        assert block.width == 3
