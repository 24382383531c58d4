"""Helpers shared by several test modules: running a block eagerly and hybridized and collecting
gradients, running a script on several simulated CPU devices, the table-driven layer checks, graph equivalence, a small checkpointed network, and
MXNet files written byte by byte. Test modules import from here, never from one another."""
import os
import struct
import subprocess
import sys
from dataclasses import dataclass
from typing import Callable

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import hybrid
from hybrid import autograd, graph, init, nn

import references as ref
from conftest import assert_close


def run_on_cpu_devices(script: str, count: int = 2) -> str:
    """Run ``script`` in a fresh Python with ``count`` simulated CPU devices (JAX reads the flag only at
    start-up); return its stdout, asserting that it succeeded."""
    env = dict(os.environ, XLA_FLAGS=f"--xla_force_host_platform_device_count={count}", JAX_PLATFORMS="cpu",
               PYTHONPATH=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env)
    assert out.returncode == 0, out.stderr[-2000:]
    return out.stdout


def run_with_grads(net, inputs, training, head_grad_seed=0):
    """Forward ``net`` on ``inputs`` under record (train or predict mode) and backward with a fixed
    random head gradient; returns (output as numpy, {param name: grad as numpy})."""
    with autograd.record(train_mode=training):
        out = net(*inputs)
    rng = np.random.default_rng(head_grad_seed)
    head = rng.standard_normal(out.shape).astype(np.float32)
    autograd.backward(out, head_grads=head)
    grads = {name: np.asarray(p.grad()) for name, p in net.collect_params().items() if p.grad_req != "null"}
    return np.asarray(out), grads


def clone_params(src, dst):
    """Copy parameter values from ``src`` to ``dst`` (same structure)."""
    for (name, p), (name2, q) in zip(src.collect_params().items(), dst.collect_params().items()):
        assert name == name2
        q.set_data(np.asarray(p.data()))


# -- layers checked case by case against NumPy (test_layers*.py) ----------------------------------
@dataclass
class LayerCase:
    name: str
    make: Callable
    shape: tuple
    reference: Callable  # (dict of float64 arrays: 'x' and parameter names) -> output
    integer_input: int = 0  # > 0: integer inputs in [0, integer_input)

    def input(self, rng):
        if self.integer_input:
            return rng.integers(0, self.integer_input, self.shape).astype(np.int32)
        return rng.standard_normal(self.shape).astype(np.float32)


def built_layer(case, rng, seed=0):
    hybrid.random.seed(seed)
    net = case.make()
    net.initialize(init.Normal(0.5))
    x = case.input(rng)
    net(x)  # completes deferred initialisation
    return net, x


def layer_arrays(net, x):
    arrays = {name: np.asarray(p.data(), np.float64) for name, p in net.collect_params().items()}
    arrays["x"] = np.asarray(x, np.float64)
    return arrays


class InputAsParameter(hybrid.HybridBlock):
    """``layer(z)`` with the input held in a parameter, so its gradient is observable."""

    def __init__(self, layer, x):
        super().__init__()
        self.z = hybrid.Parameter("z", shape=x.shape, init=init.Constant(x))
        self.layer = layer

    def forward(self):
        return self.layer(self.z.data())


def check_forward_matches_numpy(case, rng):
    net, x = built_layer(case, rng)
    out = net(x)
    assert_close(out, case.reference(layer_arrays(net, x)), rtol=1e-4, atol=1e-5)


def check_gradients_match_finite_differences(case, rng):
    net, x = built_layer(case, rng)
    _, grads = run_with_grads(net, (x,), training=False)
    arrays = layer_arrays(net, x)
    head = np.random.default_rng(0).standard_normal(np.shape(case.reference(arrays)))
    loss = lambda a: float((case.reference(a) * head).sum())  # noqa: E731
    for name, grad in grads.items():
        flat = np.argsort(np.abs(np.asarray(grad)).ravel())[-3:]  # the largest entries: clear signal
        for index in [np.unravel_index(i, grad.shape) for i in flat]:
            expected = ref.numeric_grad(loss, arrays, name, index)
            assert abs(grad[index] - expected) <= 2e-3 * max(1.0, abs(expected)), (name, index)


def check_input_gradients_of_parameter_free_layer(case, hybridize, rng):
    x = case.input(rng)
    block = InputAsParameter(case.make(), x)
    block.initialize()
    if hybridize:
        block.hybridize()
    out, grads = run_with_grads(block, (), training=True)
    head = np.random.default_rng(0).standard_normal(out.shape)
    loss = lambda a: float((case.reference({"x": a["z"]}) * head).sum())  # noqa: E731
    arrays = {"z": x.astype(np.float64)}
    for index in [np.unravel_index(i, x.shape) for i in rng.choice(x.size, 6, replace=False)]:
        expected = ref.numeric_grad(loss, arrays, "z", index)
        assert abs(grads["z"][index] - expected) <= 2e-3 * max(1.0, abs(expected)), index


def alternating_modes(cases, first_training=False):
    """(case, training) pytest params for layers that behave the same in training: to keep compilations
    few each case runs in one mode, alternating along the list, so that every family sees both modes."""
    runs = []
    for i, case in enumerate(cases):
        training = (i % 2 == 1) != first_training
        runs.append(pytest.param(case, training, id=f"{case.name}-{('predict', 'train')[training]}"))
    return runs


def check_hybridized_equals_eager(case, training, rng, param_free):
    """Outputs and gradients agree; a parameter-free layer gets its input as a parameter, so that input
    gradients are compared."""
    eager, x = built_layer(case, rng)
    compiled, _ = built_layer(case, rng, seed=1)
    inputs = (x,)
    if param_free:
        eager, compiled, inputs = InputAsParameter(eager, x), InputAsParameter(compiled, x), ()
        eager.initialize()
        compiled.initialize()
    else:
        clone_params(eager, compiled)
    compiled.hybridize()
    out_e, grads_e = run_with_grads(eager, inputs, training)
    out_h, grads_h = run_with_grads(compiled, inputs, training)
    assert_close(out_h, out_e, rtol=1e-5, atol=1e-5)
    assert grads_e.keys() == grads_h.keys() and grads_e
    for name in grads_e:
        assert_close(grads_h[name], grads_e[name], rtol=1e-4, atol=1e-5)



def layer_case_tests(cases, first_training=False) -> dict:
    """The standard tests of a list of ``LayerCase``, by name, for a layer test module to take with
    ``globals().update(layer_case_tests(CASES))``: forward against NumPy, hybridized against eager (each
    case in one mode, see :func:`alternating_modes`), parameter gradients against finite differences,
    and input gradients of parameter-free layers (when there are any; hybridized, they are compared above)."""
    with_params = [c for c in cases if c.make().collect_params()]
    param_free = [c for c in cases if c not in with_params]

    @pytest.mark.parametrize("case", cases, ids=[c.name for c in cases])
    def test_forward_matches_numpy(case, rng):
        check_forward_matches_numpy(case, rng)

    @pytest.mark.parametrize("case, training", alternating_modes(cases, first_training))
    def test_hybridized_equals_eager(case, training, rng):
        check_hybridized_equals_eager(case, training, rng, param_free=case in param_free)

    @pytest.mark.parametrize("case", with_params, ids=[c.name for c in with_params])
    def test_gradients_match_finite_differences(case, rng):
        check_gradients_match_finite_differences(case, rng)

    @pytest.mark.parametrize("case", param_free, ids=[c.name for c in param_free])
    def test_input_gradients_of_parameter_free_layers(case, rng):
        check_input_gradients_of_parameter_free_layer(case, False, rng)

    tests = [test_forward_matches_numpy, test_hybridized_equals_eager, test_gradients_match_finite_differences]
    if param_free:
        tests.append(test_input_gradients_of_parameter_free_layers)
    return {test.__name__: test for test in tests}

# -- graph passes -----------------------------------------------------------------------------------
def check_equivalent(before, after, args, rtol=1e-5, atol=1e-5):
    """Outputs and gradients (w.r.t. every float input) of the two graphs agree."""
    run_before, run_after = graph.lower(before), graph.lower(after)
    outs_b, outs_a = run_before(*args), run_after(*args)
    for a, b in zip(outs_a, outs_b):
        assert_close(a, b, rtol=rtol, atol=atol)
    float_args = [i for i, a in enumerate(args) if np.issubdtype(np.asarray(a).dtype, np.floating)]
    heads = [np.random.default_rng(i).standard_normal(np.shape(o)).astype(np.float32) for i, o in enumerate(outs_b)]

    def scalar(run):
        def f(*floats):
            full = list(args)
            for i, v in zip(float_args, floats):
                full[i] = v
            outs = run(*full)
            return sum(jnp.sum(o * h) for o, h in zip(outs, heads) if jnp.issubdtype(o.dtype, jnp.floating))
        return f

    floats = [args[i] for i in float_args]
    grads_b = jax.grad(scalar(run_before), argnums=tuple(range(len(floats))))(*floats)
    grads_a = jax.grad(scalar(run_after), argnums=tuple(range(len(floats))))(*floats)
    for a, b in zip(grads_a, grads_b):
        assert_close(a, b, rtol=rtol, atol=atol)


# -- training checkpoints ---------------------------------------------------------------------------
def make_net(seed):
    """A small hybridized network with BatchNorm and Dropout, initialised for (N, 4) inputs."""
    hybrid.random.seed(seed)
    net = nn.HybridSequential()
    net.add(nn.Dense(8, activation="relu"), nn.BatchNorm(), nn.Dropout(0.4), nn.Dense(3))
    net.initialize(hybrid.init.Xavier())
    net.hybridize()
    net(np.zeros((2, 4), np.float32))
    return net


def batch(step):
    """Data that depends only on the step, as a resumable data pipeline provides it."""
    rng = np.random.default_rng(step)
    return rng.standard_normal((6, 4)).astype(np.float32), rng.integers(0, 3, 6)


def snapshot(net):
    return {name: np.asarray(p.data()).copy() for name, p in net.collect_params().items()}


# -- MXNet files written byte by byte ---------------------------------------------------------------
TYPE_FLAGS = {np.dtype("float32"): 0, np.dtype("float64"): 1, np.dtype("float16"): 2, np.dtype("int32"): 4,
              np.dtype("int64"): 6}


def mx_array(array, version=2):
    """One NDArray as MXNet's NDArray::Save writes it (V2: magic, storage type; V1: magic; 0: legacy)."""
    array = np.ascontiguousarray(array)
    if version == 2:
        head = struct.pack("<Ii", 0xF993FAC9, 0) + struct.pack("<I", array.ndim)
        head += struct.pack(f"<{array.ndim}q", *array.shape)
    elif version == 1:
        head = struct.pack("<I", 0xF993FAC8) + struct.pack("<I", array.ndim)
        head += struct.pack(f"<{array.ndim}q", *array.shape)
    else:  # legacy: the first word is the rank, dims are uint32
        head = struct.pack("<I", array.ndim) + struct.pack(f"<{array.ndim}I", *array.shape)
    context = struct.pack("<ii", 1, 0)  # cpu(0)
    return head + context + struct.pack("<i", TYPE_FLAGS[array.dtype]) + array.astype(array.dtype.newbyteorder("<")).tobytes()


def mx_params(named, version=2):
    """A whole .params file: list magic, reserved, arrays, names."""
    out = struct.pack("<QQ", 0x112, 0) + struct.pack("<Q", len(named))
    out += b"".join(mx_array(a, version) for a in named.values())
    out += struct.pack("<Q", len(named))
    for name in named:
        out += struct.pack("<Q", len(name.encode())) + name.encode()
    return out


def node(op, name, inputs=(), **attrs):
    """One node of MXNet symbol JSON; attributes are written as strings, as MXNet writes them."""
    entry = {"op": op, "name": name, "inputs": [[i, 0, 0] for i in inputs]}
    if attrs:
        entry["attrs"] = {k: str(v) for k, v in attrs.items()}
    return entry


def conv_symbol():
    """An MXNet symbol: conv, BatchNorm, LeakyReLU, pooling, dense, dropout, scalar and elementwise ops,
    concat, reshape and SoftmaxOutput, on a (N, 1, 4, 4) input."""
    nodes = [node("null", "data"), node("null", "conv0_weight"), node("null", "conv0_bias"),
             node("Convolution", "conv0", [0, 1, 2], kernel=(3, 3), pad=(1, 1), num_filter=2),
             node("null", "bn0_gamma"), node("null", "bn0_beta"), node("null", "bn0_moving_mean"),
             node("null", "bn0_moving_var"),
             node("BatchNorm", "bn0", [3, 4, 5, 6, 7], eps=1e-5, fix_gamma=False),
             node("LeakyReLU", "lrelu0", [8], act_type="leaky", slope=0.1),
             node("Pooling", "pool0", [9], kernel=(2, 2), stride=(2, 2), pool_type="max"),
             node("Flatten", "flat0", [10]),
             node("null", "fc0_weight"), node("null", "fc0_bias"),
             node("FullyConnected", "fc0", [11, 12, 13], num_hidden=3),
             node("Activation", "relu0", [14], act_type="relu"),
             node("Dropout", "drop0", [15], p=0.5),
             node("_mul_scalar", "mul0", [16], scalar=2.0),
             node("elemwise_add", "add0", [17, 14]),
             node("Concat", "cat0", [18, 14], dim=1, num_args=2),
             node("Reshape", "resh0", [19], shape=(0, 2, -1)),
             node("Flatten", "flat1", [20]),
             node("null", "softmax_label"),
             node("SoftmaxOutput", "softmax", [21, 22])]
    return {"nodes": nodes, "arg_nodes": [i for i, n in enumerate(nodes) if n["op"] == "null"],
            "heads": [[23, 0, 0]], "attrs": {"mxnet_version": ["int", 10600]}}


def conv_weights():
    """The arg:/aux: parameters of ``conv_symbol``, as an MXNet .params file names them."""
    rng = np.random.default_rng(2)
    return {"arg:conv0_weight": rng.standard_normal((2, 1, 3, 3)).astype(np.float32),
            "arg:conv0_bias": rng.standard_normal(2).astype(np.float32),
            "arg:bn0_gamma": rng.random(2).astype(np.float32) + 0.5,
            "arg:bn0_beta": rng.standard_normal(2).astype(np.float32),
            "aux:bn0_moving_mean": rng.standard_normal(2).astype(np.float32),
            "aux:bn0_moving_var": rng.random(2).astype(np.float32) + 0.5,
            "arg:fc0_weight": rng.standard_normal((3, 8)).astype(np.float32),
            "arg:fc0_bias": rng.standard_normal(3).astype(np.float32)}


def processes() -> dict[int, tuple[int, str, str]]:
    """{pid: (parent pid, state letter, command line)} of every process, from /proc (Linux)."""
    table = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmdline = f.read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue  # ended meanwhile
        fields = stat[stat.rindex(")") + 2:].split()
        table[int(entry)] = (int(fields[1]), fields[0], cmdline)
    return table


def fixture_module(folder: str, name: str = "cases"):
    """The module ``tests/fixtures/<folder>/<name>.py``, loaded under a name of its own (the folders' shared
    ``cases.py`` would otherwise collide in ``sys.modules``); its folder is importable while it loads, for
    the helpers beside it."""
    import importlib.util
    import sys
    directory = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", folder)
    spec = importlib.util.spec_from_file_location(f"fixtures_{folder}_{name}", os.path.join(directory, name + ".py"))
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, directory)
    try:
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(directory)
    return module
