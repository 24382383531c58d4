"""Rematerialisation of any training graph: plans cut the graph into segments, results are unchanged
(outputs, gradients, BatchNorm statistics updated once, dropout masks), XLA's memory figure drops, byte
budgets are met or refused with the least memory reachable, and the memory report reads XLA's figures."""
import json
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import hybrid
from hybrid import amp, autograd, loss, nn
from hybrid.graph.memory.linear import Linearised, Segment, peak_bytes
from hybrid.graph.memory.remat import BudgetWarning

from conftest import assert_close
from corpus import TransformerBlock
from helpers import clone_params, run_on_cpu_devices, run_with_grads


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


def resnet(depth=18):
    """The model zoo's ResNet v1 features (CIFAR stem), then dropout and a 10-way output."""
    net = nn.HybridSequential()
    net.add(hybrid.model_zoo.get_model(f"resnet{depth}_v1", classes=10, stem="cifar").features,
            nn.Dropout(0.3), nn.Dense(10))
    return net


MODELS = {"deep_mlp": (deep_mlp, (256, 32)), "bn_dropout_mlp": (bn_dropout_mlp, (256, 16)),
          "transformer": (transformer, (8, 24, 16))}
SPECS = {"sqrt": "sqrt", "auto": "auto", "three_segments": hybrid.RematPlan(3)}


def built(make, x, remat=None):
    net = make()
    net.initialize()
    with autograd.pause():
        net(x)
    net.hybridize(remat=remat)
    return net


def entry_of(net):
    return next(iter(net._cached_op.entries.values()))


def activation_nodes(graph, entry):
    return Linearised(graph, graph.inputs[:len(entry.params)]).order


@pytest.mark.parametrize("spec", sorted(SPECS))
@pytest.mark.parametrize("name", sorted(MODELS))
def test_plans_cut_the_training_graph_into_segments(name, spec, rng):
    make, shape = MODELS[name]
    x = rng.standard_normal(shape).astype(np.float32)
    net = built(make, x, SPECS[spec])
    with autograd.record():
        net(x)
    entry = entry_of(net)
    segments = [n for n in entry.train_graph.nodes if n.kind == "remat_segment"]
    assert segments and entry.remat_plan is not None
    assert not any(n.kind == "remat_segment" for n in entry.graph.nodes)  # inference keeps its graph
    entry.train_graph.verify()
    for node in segments:
        node.attrs["_subgraph"].verify()
    # the segments cover the operations on activations, each once
    assert activation_nodes(entry.train_graph, entry) == segments
    assert sum(node.attrs["nodes"] for node in segments) == len(activation_nodes(entry.graph, entry))
    assert any(node.attrs["recompute"] for node in segments) and not segments[-1].attrs["recompute"]
    if spec == "three_segments":
        assert len(segments) == 3 and [n.attrs["recompute"] for n in segments] == [True, True, False]


RUNS = [(name, spec, training) for name in MODELS for spec in SPECS for training in (False, True)]


@pytest.mark.parametrize("name,spec,training", RUNS,
                         ids=[f"{n}-{s}-{'train' if t else 'predict'}" for n, s, t in RUNS])
def test_remat_leaves_outputs_gradients_and_state_unchanged(name, spec, training, rng):
    make, shape = MODELS[name]
    x = rng.standard_normal(shape).astype(np.float32)
    plain, remat = built(make, x), built(make, x, SPECS[spec])
    clone_params(plain, remat)
    hybrid.random.seed(3)
    out_plain, grads_plain = run_with_grads(plain, (x,), training)
    hybrid.random.seed(3)  # the same dropout masks, also in the recomputation
    out_remat, grads_remat = run_with_grads(remat, (x,), training)
    assert any(n.kind == "remat_segment" for n in entry_of(remat).train_graph.nodes)
    assert_close(out_remat, out_plain, rtol=1e-4, atol=1e-5)
    for key in grads_plain:
        assert_close(grads_remat[key], grads_plain[key], rtol=1e-4, atol=1e-5)
    for p, q in zip(plain.collect_params().values(), remat.collect_params().values()):
        assert_close(q.data(), p.data(), rtol=1e-5, atol=1e-6)  # BatchNorm statistics too


def train_steps(net, batches, compiled=False):
    """SGD-momentum steps of the Gluon loop (or one hybrid.compile program); the parameters after them."""
    trainer = hybrid.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.05, "momentum": 0.9})
    loss_fn = loss.SoftmaxCrossEntropyLoss()

    def step(x, y):
        with autograd.record():
            out = loss_fn(net(x), y)
        autograd.backward(out)
        trainer.step(x.shape[0])
        return out

    run = hybrid.compile(step) if compiled else step
    hybrid.random.seed(11)
    losses = [np.asarray(run(x, y)) for x, y in batches]
    return losses, {name: np.asarray(p.data()) for name, p in net.collect_params().items()}


def three_steps_with_and_without_remat(depth, compiled, dtype="float32"):
    """Parameters (weights and running statistics) and losses after three SGD-momentum steps of a
    ResNet with dropout, without and with ``remat='sqrt'``."""
    rng = np.random.default_rng(0)
    batches = [(rng.standard_normal((4, 3, 16, 16)).astype(dtype), rng.integers(0, 10, 4).astype(np.int32))
               for _ in range(3)]
    results = []
    for spec in (None, "sqrt"):
        hybrid.random.seed(0)
        net = built(lambda: resnet(depth), batches[0][0], spec)
        net.cast(dtype)
        results.append(train_steps(net, batches, compiled))
    return results


@pytest.mark.parametrize("compiled", [False, True], ids=["gluon-loop", "compiled-step"])
def test_resnet18_training_with_batchnorm_and_dropout_matches_without_remat(compiled):
    (losses, params), (losses_remat, params_remat) = three_steps_with_and_without_remat(18, compiled)
    for a, b in zip(losses, losses_remat):
        assert_close(b, a, rtol=1e-4, atol=1e-5)
    for name in params:
        assert_close(params_remat[name], params[name], rtol=2e-4, atol=2e-5)


def test_resnet50_training_with_batchnorm_and_dropout_matches_without_remat():
    """In float64: ResNet-50's gradients at random initialisation change by about 2% (relative L2) between
    any two float32 programs (eager against hybridized too), so float32 cannot tell remat's errors apart."""
    script = """
import json, sys
import jax
jax.config.update("jax_enable_x64", True)
sys.path.insert(0, "tests")
import numpy as np
from test_remat import three_steps_with_and_without_remat
(losses, params), (losses_remat, params_remat) = three_steps_with_and_without_remat(50, False, "float64")
print(json.dumps({"loss": max(float(np.max(np.abs(a - b) / np.abs(a))) for a, b in zip(losses, losses_remat)),
                  "params": max(float(np.max(np.abs(params[k] - params_remat[k])) / (np.max(np.abs(params[k])) + 1e-30))
                                for k in params), "count": len(params),
                  "dtype": str(next(iter(params.values())).dtype)}))
"""
    result = json.loads(run_on_cpu_devices(script, count=1).strip().splitlines()[-1])
    assert result["dtype"] == "float64" and result["count"] > 250
    assert result["loss"] < 1e-9 and result["params"] < 1e-9, result


def test_running_statistics_are_updated_once_per_step(rng):
    x = rng.standard_normal((16, 4)).astype(np.float32)
    net = built(lambda: bn_dropout_mlp(4, 8), x, "auto")
    first, bn = net[0], net[1]
    with autograd.record():
        out = net(x)
    autograd.backward(out)
    segments = [n for n in entry_of(net).train_graph.nodes if n.kind == "remat_segment"]
    first_segment_ops = [n.op for n in segments[0].attrs["_subgraph"].nodes]
    assert "batch_norm" in first_segment_ops  # the first BatchNorm is recomputed in the backward pass
    h = x @ np.asarray(first.weight.data()).T + np.asarray(first.bias.data())
    momentum = 0.9  # BatchNorm's default; running statistics start at mean 0, variance 1
    assert_close(bn.running_mean.data(), (1 - momentum) * h.mean(axis=0), rtol=1e-5, atol=1e-6)
    assert_close(bn.running_var.data(), momentum + (1 - momentum) * h.var(axis=0), rtol=1e-4, atol=1e-5)


def test_remat_lowers_xla_memory_of_the_training_step(rng):
    cases = [(lambda: deep_mlp(24, 64), rng.standard_normal((2048, 64)).astype(np.float32), 0.4),
             (lambda: resnet(18), rng.standard_normal((16, 3, 32, 32)).astype(np.float32), 0.75)]
    for make, x, ratio in cases:
        figures = {}
        for spec in (None, "auto"):
            net = built(make, x, spec)
            with autograd.pause(train_mode=True):
                net(x)
            entry = entry_of(net)
            figures[spec] = entry.training_memory(entry.train_graph)
        assert figures["auto"] < ratio * figures[None], figures


def test_byte_budget_is_met(rng):
    x = rng.standard_normal((512, 32)).astype(np.float32)
    net = built(lambda: deep_mlp(16, 32), x)
    baseline = hybrid.memory_plan(net, x).xla_bytes
    budget = int(0.6 * baseline)
    net.hybridize(remat=budget)
    with warnings.catch_warnings():
        warnings.simplefilter("error", BudgetWarning)
        with autograd.pause(train_mode=True):
            net(x)
    entry = entry_of(net)
    details = next(s for s in entry.pass_stats if s.name == "remat").details
    assert details["unoptimised_xla_bytes"] == baseline
    assert entry.training_memory(entry.train_graph) == details["xla_bytes"] <= budget
    assert 0 < details["recompute_fraction"] < 1.5


def test_unreachable_budget_warns_with_the_least_memory_reachable(rng):
    x = rng.standard_normal((64, 16)).astype(np.float32)
    net = built(lambda: deep_mlp(8, 16), x, remat=1024)
    with pytest.warns(BudgetWarning, match=r"least memory reachable is (\d+) bytes") as caught:
        with autograd.pause(train_mode=True):
            net(x)
    reached = int(str(caught[0].message).split("reachable is ")[1].split(" ")[0])
    entry = entry_of(net)
    assert entry.training_memory(entry.train_graph) == reached
    assert reached < entry.training_memory(entry.graph)


def test_a_budget_that_fits_changes_nothing(rng):
    x = rng.standard_normal((8, 16)).astype(np.float32)
    net = built(lambda: deep_mlp(4, 16), x, remat=10**12)
    with autograd.pause(train_mode=True):
        net(x)
    entry = entry_of(net)
    assert entry.remat_plan is None and entry.train_graph is entry.graph


def test_remat_with_mixed_precision_matches(rng):
    x = rng.standard_normal((8, 16)).astype(np.float32)
    results = []
    for spec in (None, "sqrt"):
        amp.init("bfloat16")
        try:
            net = built(lambda: bn_dropout_mlp(6, 16), x, spec)
            if spec is None:
                plain = net
            else:
                clone_params(plain, net)
            hybrid.random.seed(5)
            results.append(run_with_grads(net, (x,), True))
        finally:
            amp.disable()
    (out, grads), (out_remat, grads_remat) = results
    assert_close(out_remat, out, rtol=1e-2, atol=1e-2)
    for key in grads:
        assert_close(grads_remat[key], grads[key], rtol=2e-2, atol=2e-2)


def test_imported_symbol_blocks_take_remat(tmp_path, rng):
    x = rng.standard_normal((2, 3, 16, 16)).astype(np.float32)
    net = built(lambda: hybrid.model_zoo.get_model("resnet18_v1", classes=10, stem="cifar"), x)
    net(x)
    sym, params = net.export(str(tmp_path / "net"))
    results = []
    for spec in (None, "auto"):
        imported = hybrid.SymbolBlock.imports(sym, ["data"], params)
        imported.hybridize(remat=spec)
        results.append(run_with_grads(imported, (x,), True))
        if spec is not None:
            assert any(n.kind == "remat_segment" for n in entry_of(imported).train_graph.nodes)
    (out, grads), (out_remat, grads_remat) = results
    assert_close(out_remat, out, rtol=1e-4, atol=1e-5)
    for key in grads:
        assert_close(grads_remat[key], grads[key], rtol=1e-4, atol=1e-4)


def test_too_small_a_graph_warns_and_bad_specs_raise(rng):
    net = nn.HybridSequential()
    net.add(nn.Dense(8, in_units=4))
    net.initialize()
    net.hybridize(remat="sqrt")
    with pytest.warns(UserWarning, match="nothing to recompute"):
        with autograd.pause(train_mode=True):
            net(rng.standard_normal((2, 4)).astype(np.float32))
    for bad in ("everything", 0, -5, True, 1.5, hybrid.nn.Dense(2)):
        with pytest.raises(ValueError, match="remat must be"):
            net.hybridize(remat=bad)
    with pytest.raises(ValueError, match="segments must be a positive int"):
        hybrid.RematPlan(0)


def test_hybridize_passes_remat_to_children():
    net = nn.HybridSequential()
    inner = nn.HybridSequential()
    inner.add(nn.Dense(4), nn.Dense(4))
    net.add(inner, nn.Dense(2))
    net.hybridize(remat="sqrt")
    assert inner._remat == "sqrt" and inner[0]._remat == "sqrt" and net[1]._remat == "sqrt"
    net.hybridize(remat=None)
    assert inner._remat is None


def square_chain(length):
    """The graph of ``length`` nodes y = x * x on f32[8, 16] (s = 512 bytes each), linearised; each node
    keeps its input (twice: both operands) for the backward pass."""
    def chain(x):
        for _ in range(length):
            x = x * x
        return x

    lin = Linearised(hybrid.graph.trace(chain, jax.ShapeDtypeStruct((8, 16), jnp.float32)), [])
    assert len(lin) == length and all(cost.keeps == (0, 1) and cost.new_bytes == 0 for cost in lin.costs)
    return lin


def test_peak_simulation_of_a_chain_matches_the_hand_count():
    """Four nodes, v1..v4 their outputs. No recomputation (steps 0-3 forward, 4-7 backward): at step 4 the
    activations v1, v2, v3, the output v4 and the gradients of v3 and v4 are live: 6s. Recomputing nodes
    0-1: v1 is dropped after the forward pass and made again at step 6, so at step 4 only v2, v3, v4 and two
    gradients are live: 5s."""
    lin, s = square_chain(4), 8 * 16 * 4
    assert peak_bytes(lin, [Segment(0, 4, False)]) == 6 * s
    assert peak_bytes(lin, [Segment(0, 2, True), Segment(2, 4, False)]) == 5 * s


def test_peak_simulation_of_nested_segments_matches_the_hand_count():
    """Eight nodes (steps 0-7 forward, 8-15 backward; node i's backward at step 15 - i). Nodes 0-5 are
    recomputed at step 10: without inner segments that recomputation keeps v1..v5 for their backward,
    which with the gradients of v5 and v6 makes 7s at step 10. Cut into [0, 3) (recomputed again, at step
    13) and [3, 6), the recomputation at step 10 keeps only v3, v4, v5 (v1 and v2 are freed as it goes,
    and made again at step 13): 5s, also the peak at step 8 (v6, v7, v8 and two gradients)."""
    lin, s = square_chain(8), 8 * 16 * 4
    assert peak_bytes(lin, [Segment(0, 8, False)]) == 10 * s
    assert peak_bytes(lin, [Segment(0, 6, True), Segment(6, 8, False)]) == 7 * s
    inner = (Segment(0, 3, True), Segment(3, 6, False))
    assert peak_bytes(lin, [Segment(0, 6, True, inner), Segment(6, 8, False)]) == 5 * s


def mlp_step(width=32, batch=16):
    net = deep_mlp(4, width)
    net.initialize()
    x = np.ones((batch, width), np.float32)
    y = np.zeros(batch, np.int32)
    with autograd.pause():
        net(x)
    net.hybridize()
    trainer = hybrid.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.1, "momentum": 0.9})
    loss_fn = loss.SoftmaxCrossEntropyLoss()

    def step():
        with autograd.record():
            out = loss_fn(net(x), y)
        autograd.backward(out)
        trainer.step(batch)
        return out

    return net, step, x, y


def test_memory_report_lists_the_programs_of_a_step():
    net, step, x, y = mlp_step()
    step()  # the first step creates the momenta: a program of its own shape
    hybrid.reset_memory_report()
    assert hybrid.memory_report().programs == ()
    for _ in range(3):
        step()
    report = hybrid.memory_report()
    (program,) = report.programs
    weights = sum(p.data().nbytes for p in net.collect_params().values())
    assert program.name.startswith("recorded step") and program.runs == 3
    # weights, momenta, the batch, and the learning rate and 1 / batch size as float32 scalars
    assert program.arguments == 2 * weights + x.nbytes + y.nbytes + 2 * 4
    assert program.aliased == 2 * weights  # weights and momenta written over their old buffers
    assert program.total == program.arguments + program.outputs + program.temporaries - program.aliased
    assert report.peak_bytes == program.total
    assert "recorded step" in report.summary() and "peak:" in str(report)


def test_memory_report_of_a_compiled_step():
    net, step, x, y = mlp_step()
    compiled = hybrid.compile(step)
    hybrid.reset_memory_report()
    compiled()
    compiled()
    (program,) = hybrid.memory_report().programs
    assert program.name.startswith("compiled step") and program.runs == 2
    executable = compiled._programs[next(iter(compiled._programs))]
    assert program.temporaries > 0 and executable.memory[0].memory() == program


def test_inspect_and_memory_plan_show_the_rematerialised_training_graph(rng):
    x = rng.standard_normal((256, 32)).astype(np.float32)
    net = built(lambda: deep_mlp(12, 32), x, "sqrt")
    inspection = hybrid.inspect(net, x, training=True)
    stat = inspection.stats[-1]
    assert stat.name == "remat" and stat.details["recomputed"] >= 2
    assert "remat_segment" in str(inspection.after) and "recompute=True" in str(inspection.after)
    assert "remat_segment" not in str(hybrid.inspect(net, x).after)  # inference: no segments
    plain = hybrid.memory_plan(net, x)
    planned = hybrid.memory_plan(net, x, remat="sqrt")
    assert planned.xla_bytes < plain.xla_bytes
