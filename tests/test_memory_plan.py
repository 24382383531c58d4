"""Memory planning on graphs: liveness, schedules, in-place reuse, plan_memory, plots and training graphs.
Hand-built graphs have hand-computed intervals; random graphs are checked against plain references."""
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hybrid.graph import Graph, GraphError, Node, Value
from hybrid.graph.memory import (format_bytes, inplace_pairs, liveness, memory_aware, plan_memory, topological,
                                 training_graph, training_step)

import memory_models

F32 = np.float32
KEY = jax.random.key(0).dtype  # PRNG keys: no item size, no bytes


def op(name, *inputs, shape=(4,), dtype=F32):
    return Node(name, "prim", list(inputs), [(shape, dtype)])


# -- references ------------------------------------------------------------------------------------
def check_valid(graph, order):
    """Every node exactly once, after the producers of its inputs."""
    assert sorted(map(id, order)) == sorted(map(id, graph.nodes))
    seen = set(graph.inputs) | set(graph.consts)
    for node in order:
        assert all(v in seen for v in node.inputs)
        seen.update(node.outputs)


def reference_peak(graph, order, with_io=False):
    """Max over steps of the bytes live, from definitions and uses found by scanning the schedule."""
    last = len(order) - 1
    tracked = [(v, 0) for v in graph.inputs] if with_io else []
    tracked += [(v, s) for s, node in enumerate(order) for v in node.outputs]
    totals = [0] * len(order)
    for value, start in tracked:
        if value.nbytes == 0 or (not with_io and value in graph.outputs):
            continue
        uses = [s for s, node in enumerate(order) if value in node.inputs]
        end = last if value in graph.outputs else max(uses + [start])
        for step in range(start, end + 1):
            totals[step] += value.nbytes
    return max(totals)


def random_graph(seed, n_nodes):
    rng = np.random.default_rng(seed)
    inputs = [Value((4 * int(rng.integers(1, 5)),), F32, f"x{i}") for i in range(2)]
    values, nodes = list(inputs), []
    for _ in range(n_nodes):
        reads = [values[j] for j in rng.integers(0, len(values), size=int(rng.integers(1, 4)))]
        node = op(str(rng.choice(["add", "exp", "dot_general", "reduce_sum"])), *reads,
                  shape=(4 * int(rng.integers(1, 9)),))
        nodes.append(node)
        values.append(node.outputs[0])
    outputs = [values[-1]] + [v for v in values[2:-1] if rng.random() < 0.1]
    return Graph(inputs, outputs, nodes)


# -- liveness ---------------------------------------------------------------------------------------
def hand_graph():
    """x(16 B), w(32 B) -> a = exp(x) 16, b = dot(a, w) 32, k = key (0 B), d = a + const 16, e = b * b 32."""
    x, w, c = Value((4,), F32, "x"), Value((8,), F32, "w"), Value((4,), F32)
    n0 = op("exp", x)
    a = n0.outputs[0]
    n1 = op("dot_general", a, w, shape=(8,))
    b = n1.outputs[0]
    n2 = Node("random_seed", "prim", [], [((), KEY)])
    n3 = op("add", a, c)
    n4 = op("mul", b, b, shape=(8,))
    d, e = n3.outputs[0], n4.outputs[0]
    graph = Graph([x, w], [e, d], [n0, n1, n2, n3, n4], {c: np.zeros(4, F32)})
    return graph, dict(x=x, w=w, c=c, a=a, b=b, k=n2.outputs[0], d=d, e=e)


def test_liveness_of_a_hand_built_graph():
    graph, v = hand_graph()
    live = liveness(graph)
    expected = {"x": (0, 0), "w": (0, 1), "a": (0, 3), "b": (1, 4), "d": (3, 4), "e": (4, 4)}
    assert {name: live.intervals[v[name]] for name in expected} == expected
    assert v["k"] not in live.intervals and v["c"] not in live.intervals  # zero bytes, constant
    assert live.intermediates == [v["a"], v["b"]]
    assert live.boundary == [v["x"], v["w"], v["e"], v["d"]]
    assert live.live_bytes() == [16, 48, 48, 48, 32]
    assert live.live_bytes(with_io=True) == [64, 80, 48, 64, 80]
    assert live.max_live_bytes() == 48 and live.max_live_bytes(with_io=True) == 80


def test_liveness_of_inputs_returned_and_values_never_read():
    x = Value((4,), F32, "x")
    n0 = op("exp", x)
    n1 = op("neg", x)  # never read, not an output
    graph = Graph([x], [x, n0.outputs[0]], [n0, n1])
    live = liveness(graph)
    assert live.intervals[x] == (0, 1)  # an input that is also an output lives to the end
    assert live.intervals[n1.outputs[0]] == (1, 1)
    assert live.intermediates == [n1.outputs[0]]


def test_liveness_rejects_invalid_schedules():
    graph, _ = hand_graph()
    nodes = graph.nodes
    with pytest.raises(GraphError, match="before"):
        liveness(graph, [nodes[1], nodes[0], *nodes[2:]])
    with pytest.raises(GraphError, match="every node of the graph exactly once"):
        liveness(graph, nodes[:-1])


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 2**31), st.integers(1, 20))
def test_liveness_bounds_match_reference_on_random_graphs(seed, n_nodes):
    graph = random_graph(seed, n_nodes)
    live = liveness(graph)
    assert live.max_live_bytes() == reference_peak(graph, graph.nodes)
    assert live.max_live_bytes(with_io=True) == reference_peak(graph, graph.nodes, with_io=True)


# -- schedules ----------------------------------------------------------------------------------------
def two_branches():
    """Two branches each broadcasting a scalar to 256 B and reducing it back, then one add."""
    x = Value((), F32, "x")
    a1 = op("broadcast_in_dim", x, shape=(64,))
    b1 = op("broadcast_in_dim", x, shape=(64,))
    a2 = op("reduce_sum", a1.outputs[0], shape=())
    b2 = op("reduce_sum", b1.outputs[0], shape=())
    out = op("add", a2.outputs[0], b2.outputs[0], shape=())
    return Graph([x], out.outputs, [a1, b1, a2, b2, out]), (a1, b1, a2, b2, out)


def test_memory_aware_schedule_lowers_the_peak_of_an_interleaved_order():
    graph, (a1, b1, a2, b2, out) = two_branches()
    assert topological(graph) == graph.nodes
    # given order: a1 b1 a2 ... -> 256 + 256 + 4 live at step 2; reducing each branch first: 256 + 4 + 4
    assert liveness(graph).max_live_bytes() == 516
    order = memory_aware(graph)
    assert order == [a1, a2, b1, b2, out]
    assert liveness(graph, order).max_live_bytes() == 264


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 2**31), st.integers(1, 25))
def test_memory_aware_schedule_is_valid_and_never_raises_the_peak(seed, n_nodes):
    graph = random_graph(seed, n_nodes)
    order = memory_aware(graph)
    check_valid(graph, order)
    assert reference_peak(graph, order) <= reference_peak(graph, graph.nodes)


def test_memory_aware_keeps_side_effects_in_order():
    x = Value((4,), F32, "x")
    first = Node("debug_callback", "prim", [x], [], effects=("io",))
    big = op("broadcast_in_dim", x, shape=(64,))
    second = Node("debug_callback", "prim", [x], [], effects=("io",))
    small = op("reduce_sum", big.outputs[0], shape=())
    graph = Graph([x], small.outputs, [first, big, second, small])
    order = memory_aware(graph)
    check_valid(graph, order)
    assert order.index(first) < order.index(second)


# -- in-place reuse ----------------------------------------------------------------------------------
def inplace_graph():
    x, w = Value((2, 2), F32, "x"), Value((2, 2), F32, "w")
    n = {}
    n["a"] = op("dot_general", x, w, shape=(2, 2))
    n["b"] = op("exp", n["a"].outputs[0], shape=(2, 2))                        # a dies: reuse
    n["c"] = op("tanh", n["b"].outputs[0], shape=(2, 2))                       # b read later: no
    n["d"] = op("add", n["b"].outputs[0], n["c"].outputs[0], shape=(2, 2))     # b dies: reuse
    n["e"] = op("transpose", n["d"].outputs[0], shape=(2, 2))                  # not elementwise: no
    n["f"] = op("convert_element_type", n["e"].outputs[0], shape=(2, 2), dtype=np.float16)  # size differs
    n["g"] = op("exp", n["f"].outputs[0], shape=(2, 2), dtype=np.float16)      # a graph output: no
    n["h"] = op("exp", x, shape=(2, 2))                                         # a graph input: no
    graph = Graph([x, w], [n["g"].outputs[0], n["h"].outputs[0]], list(n.values()))
    return graph, {k: node.outputs[0] for k, node in n.items()}


def test_inplace_pairs_only_where_allowed():
    graph, v = inplace_graph()
    assert inplace_pairs(graph.nodes, liveness(graph)) == [(v["a"], v["b"]), (v["b"], v["d"])]


def test_plan_with_inplace_shares_buffers_and_lowers_the_bound():
    graph, v = inplace_graph()
    plan = plan_memory(graph)
    assert plan.inplace == [(v["a"], v["b"]), (v["b"], v["d"])]
    assert plan.offsets[v["a"]] == plan.offsets[v["b"]] == plan.offsets[v["d"]]
    # a/b/d one 16-byte buffer over steps 0-4, c 16 B at 2-3, e 16 B at 4-5, f 8 B at 5-6
    assert plan.live_bytes == [16, 16, 32, 32, 32, 24, 8, 0]
    assert plan.max_live_bytes == 32 == plan.arena_bytes
    separate = plan_memory(graph, inplace=False)
    assert separate.inplace == [] and separate.max_live_bytes == 48 == separate.arena_bytes


# -- plan_memory ------------------------------------------------------------------------------------
def test_plan_statistics_of_the_hand_built_graph():
    graph, v = hand_graph()
    plan = plan_memory(graph)
    assert plan.no_sharing_bytes == 48 and plan.max_live_bytes == 48 and plan.max_live_with_io_bytes == 80
    assert plan.offsets == {v["b"]: 0, v["a"]: 32}  # largest first
    assert plan.arena_by_strategy == {"greedy_by_size": 48, "shared_objects": 48, "exact": 48}
    assert plan.live_bytes == [16, 48, 48, 48, 32] and plan.live_bytes_with_io == [64, 80, 48, 64, 80]
    assert plan.intervals[v["b"]] == (1, 4)
    pooled = plan_memory(graph, strategy="shared_objects", compare=False)
    assert pooled.offsets == {v["a"]: 0, v["b"]: 16} and pooled.arena_by_strategy == {"shared_objects": 48}
    text = plan.summary()
    for expected in ("max-live lower bound", "48 B", "80 B", "greedy_by_size", "shared_objects", "1.000  *"):
        assert expected in text


def test_plan_accepts_schedules_by_name_or_list_and_rejects_unknown_names():
    graph, nodes = two_branches()
    assert plan_memory(graph, schedule="memory_aware").max_live_bytes == 264
    given_plan = plan_memory(graph, schedule=list(graph.nodes), strategy="exact")
    assert given_plan.schedule_name == "given" and given_plan.arena_bytes == 516
    with pytest.raises(ValueError, match="unknown strategy 'best'"):
        plan_memory(graph, strategy="best")
    with pytest.raises(ValueError, match="unknown schedule 'fast'"):
        plan_memory(graph, schedule="fast")


def test_format_bytes():
    assert [format_bytes(n) for n in (48, 1536, 3 << 20, None)] == ["48 B", "1.50 KiB", "3.00 MiB", "-"]


def test_plot_writes_an_image(tmp_path):
    path = tmp_path / "memory.png"
    plan_memory(two_branches()[0]).plot(str(path))
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_plot_without_matplotlib_names_the_extra(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    monkeypatch.setitem(sys.modules, "matplotlib.figure", None)
    with pytest.raises(ImportError, match=r"pip install 'hybrid\[plot\]'"):
        plan_memory(two_branches()[0]).plot(str(tmp_path / "memory.png"))


# -- training graphs ----------------------------------------------------------------------------------
def tanh_layer(x, w):
    return jnp.sum(jnp.tanh(x @ w.T))


def test_training_step_computes_loss_and_gradients():
    rng = np.random.default_rng(0)
    x, w = rng.standard_normal((3, 4)).astype(F32), rng.standard_normal((5, 4)).astype(F32)
    step, specs, names = training_step(tanh_layer, x, w, wrt=[1])
    assert names == ["in0", "in1", "cotangent0"] and specs[2].shape == ()
    loss, grad = step(x, w, np.float32(2.0))
    hidden = np.tanh(x.astype(np.float64) @ w.T)
    np.testing.assert_allclose(loss, hidden.sum(), rtol=1e-5)
    np.testing.assert_allclose(grad, 2.0 * (1 - hidden ** 2).T @ x, rtol=1e-4, atol=1e-5)


def test_training_graph_inputs_outputs_and_errors():
    x, w = jax.ShapeDtypeStruct((3, 4), F32), jax.ShapeDtypeStruct((5, 4), F32)
    labels = jax.ShapeDtypeStruct((3,), np.int32)
    graph = training_graph(lambda x, w, y: tanh_layer(x, w) + jnp.sum(y), x, w, labels, input_names=["x", "w", "y"])
    graph.verify()
    assert [v.name for v in graph.inputs] == ["x", "w", "y", "cotangent0"]
    assert [v.shape for v in graph.outputs] == [(), (3, 4), (5, 4)]  # loss, then dx and dw; no grad for y
    with pytest.raises(TypeError, match="output 0 of fn has dtype int32"):
        training_graph(lambda y: y * 2, labels)
    with pytest.raises(ValueError, match="1 input names for 2 input leaves"):
        training_graph(tanh_layer, x, w, input_names=["x"])


@pytest.mark.parametrize("name", sorted(memory_models.MODELS))
def test_benchmark_models_plan_near_the_bound(name):
    block, inputs = memory_models.MODELS[name]()
    graph = memory_models.block_training_graph(block, *inputs)
    assert any("transpose" in node.scope for node in graph.nodes)  # the backward pass is there
    plan = plan_memory(graph)
    greedy, pooled = plan.arena_by_strategy["greedy_by_size"], plan.arena_by_strategy["shared_objects"]
    assert plan.max_live_bytes <= greedy <= 1.05 * plan.max_live_bytes
    assert greedy <= pooled and greedy < plan.no_sharing_bytes
    assert plan.max_live_bytes == max(plan.live_bytes)
    aware = memory_aware(graph)
    check_valid(graph, aware)
    assert liveness(graph, aware).max_live_bytes() <= liveness(graph).max_live_bytes()
