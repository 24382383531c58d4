"""Rematerialisation of repeated layers: found where the structure allows, results unchanged, and
XLA's own memory figure lowered."""
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import hybrid
from hybrid import autograd, nn
from hybrid.graph.memory.remat import RematPlan, find_chains

from conftest import assert_close
from corpus import TransformerBlock
from helpers import clone_params, run_with_grads


def deep_mlp(layers=12, width=32):
    net = nn.HybridSequential()
    for _ in range(layers):
        net.add(nn.Dense(width, activation="relu"))
    net.add(nn.Dense(3))
    return net


def bn_dropout_mlp(layers=6, width=16):
    net = nn.HybridSequential()
    for _ in range(layers):
        net.add(nn.Dense(width), nn.BatchNorm(), nn.Activation("relu"), nn.Dropout(0.2))
    net.add(nn.Dense(3))
    return net


def transformer(layers=4):
    net = nn.HybridSequential()
    for _ in range(layers):
        net.add(TransformerBlock(16, 2))
    return net


MODELS = {"deep_mlp": (deep_mlp, (8, 32)), "bn_dropout_mlp": (bn_dropout_mlp, (8, 16)),
          "transformer": (transformer, (2, 5, 16))}


def traced(net, x, training=False):
    net.initialize()
    with autograd.pause():
        net(x)
    return hybrid.inspect(net, x, training=training).after


@pytest.mark.parametrize("name", sorted(MODELS))
def test_chains_are_found_in_repeated_layers(name, rng):
    make, shape = MODELS[name]
    x = rng.standard_normal(shape).astype(np.float32)
    chains = find_chains(traced(make(), x))
    assert len(chains) == 1
    expected = {"deep_mlp": 12, "bn_dropout_mlp": 6, "transformer": 4}[name]
    assert chains[0].length == expected


def test_no_chain_where_layers_differ_or_activations_escape(rng):
    widths = nn.HybridSequential()
    for width in (8, 16, 32, 64):
        widths.add(nn.Dense(width, activation="relu"))
    assert find_chains(traced(widths, rng.standard_normal((4, 8)).astype(np.float32))) == []

    class Skip(hybrid.HybridBlock):
        def __init__(self):
            super().__init__()
            self.body = deep_mlp(6, 8)

        def forward(self, x):
            h = x
            for i, layer in enumerate(self.body):
                h = layer(h)
                if i == 2:
                    kept = h  # read again after the loop: the chain must stop here
            return h + kept[:, :3]

    chains = find_chains(traced(Skip(), rng.standard_normal((4, 8)).astype(np.float32)))
    assert all(len({id(n) for n in chain.units[0]}) and chain.length <= 3 for chain in chains)


PLANS = {"sqrt": "sqrt", "dots": RematPlan(0, "dots"), "full": RematPlan(0, "full"), "segments_of_2": RematPlan(2)}
CASES = [("deep_mlp", plan) for plan in PLANS] + [("bn_dropout_mlp", "sqrt"), ("bn_dropout_mlp", "dots"),
                                                  ("transformer", "sqrt")]


RUNS = [(name, plan, training) for name, plan in CASES for training in (False, True)
        if name != "transformer" or training]  # the transformer's predict graph is the deep_mlp case again


@pytest.mark.parametrize("name,plan_name,training", RUNS,
                         ids=[f"{n}-{p}-{'train' if t else 'predict'}" for n, p, t in RUNS])
def test_remat_leaves_outputs_gradients_and_state_unchanged(name, plan_name, training, rng):
    plan = PLANS[plan_name]
    make, shape = MODELS[name]
    x = rng.standard_normal(shape).astype(np.float32)
    plain, remat = make(), make()
    for net in (plain, remat):
        net.initialize()
        with autograd.pause():
            net(x)
    clone_params(plain, remat)
    plain.hybridize()
    remat.hybridize(remat=plan)
    hybrid.random.seed(3)
    out_plain, grads_plain = run_with_grads(plain, (x,), training)
    hybrid.random.seed(3)
    out_remat, grads_remat = run_with_grads(remat, (x,), training)
    entry = next(iter(remat._cached_op.entries.values()))
    assert entry.remat_plan is not None and "remat_scan" in {n.kind for n in entry.graph.nodes}
    assert_close(out_remat, out_plain, rtol=1e-4, atol=1e-5)
    for key in grads_plain:
        assert_close(grads_remat[key], grads_plain[key], rtol=1e-4, atol=1e-5)
    for p, q in zip(plain.collect_params().values(), remat.collect_params().values()):
        assert_close(q.data(), p.data(), rtol=1e-5, atol=1e-6)  # BatchNorm statistics too


def test_sqrt_remat_lowers_xla_memory_of_the_training_step(rng):
    x = rng.standard_normal((2048, 64)).astype(np.float32)
    figures = {}
    for remat in (None, "sqrt"):
        net = deep_mlp(24, 64)
        net.initialize()
        net.hybridize(remat=remat)
        with autograd.pause(train_mode=True):
            net(x)
        entry = next(iter(net._cached_op.entries.values()))
        figures[remat] = entry.training_memory(entry.graph)
    assert figures["sqrt"] < 0.4 * figures[None]


def test_byte_budget_picks_the_cheapest_plan_that_fits(rng):
    x = rng.standard_normal((256, 32)).astype(np.float32)
    net = deep_mlp(12, 32)
    net.initialize()
    baseline = hybrid.memory_plan(net, x).xla_bytes
    budget = int(0.75 * baseline)
    net.hybridize(remat=budget)
    with autograd.pause(train_mode=True):
        net(x)
    entry = next(iter(net._cached_op.entries.values()))
    chosen = next(s for s in entry.pass_stats if s.name == "remat").details
    assert chosen["unoptimised_bytes"] == baseline
    assert chosen["planned_bytes"] <= budget
    assert entry.training_memory(entry.graph) <= 1.1 * budget
    candidates = list(chosen["candidates"].items())  # in order of recomputation cost
    first_fit = next(b for name, b in candidates if b <= budget)
    assert chosen["planned_bytes"] == first_fit


def test_remat_without_a_chain_warns(rng):
    net = nn.HybridSequential()
    net.add(nn.Dense(8, in_units=4), nn.Dense(4))
    net.initialize()
    net.hybridize(remat="sqrt")
    with pytest.warns(UserWarning, match="no chain of repeated layers"):
        net(rng.standard_normal((2, 4)).astype(np.float32))
    with pytest.raises(ValueError, match="remat must be"):
        net.hybridize(remat="everything")


def test_remat_inside_a_compiled_step_matches(rng):
    x = rng.standard_normal((16, 32)).astype(np.float32)
    y = rng.integers(0, 3, 16).astype(np.int32)
    results = []
    for remat in (None, "sqrt"):
        hybrid.random.seed(0)
        net = deep_mlp(9, 32)
        net.initialize()
        net.hybridize(remat=remat)
        loss_fn = hybrid.loss.SoftmaxCELoss()
        trainer = hybrid.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.1})

        @hybrid.compile
        def step(x, y):
            with autograd.record():
                out = loss_fn(net(x), y)
            autograd.backward(out)
            trainer.step(16)
            return out

        results.append([np.asarray(step(x, y)) for _ in range(2)] + [np.asarray(net[0].weight.data())])
    for a, b in zip(*results):
        assert_close(b, a, rtol=1e-4, atol=1e-6)


def test_memory_plan_report(rng, tmp_path):
    net = deep_mlp(6, 16)
    net.initialize()
    plan = hybrid.memory_plan(net, rng.standard_normal((8, 16)).astype(np.float32))
    text = plan.summary()
    assert "max-live lower bound" in text and "XLA, compiled program" in text
    assert plan.arena_bytes == plan.max_live_bytes and plan.xla_bytes > 0
    plan.plot(str(tmp_path / "memory.png"))
    assert (tmp_path / "memory.png").stat().st_size > 0


def test_hybridize_passes_remat_to_children():
    net = nn.HybridSequential()
    inner = nn.HybridSequential()
    inner.add(nn.Dense(4), nn.Dense(4))
    net.add(inner, nn.Dense(2))
    net.hybridize(remat="sqrt")
    assert inner._remat == "sqrt" and inner[0]._remat == "sqrt" and net[1]._remat == "sqrt"
    net.hybridize(remat=None)
    assert inner._remat is None
