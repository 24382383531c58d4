"""Gluon behaviours of Block: setattr on all parameters, warnings for unregistered children and for
hybridizing a Sequential of HybridBlocks, and 64-bit dtypes (warned without x64, computed with it)."""
import subprocess
import sys
import warnings

import numpy as np
import pytest

import hybrid
from hybrid import nn


def test_setattr_sets_an_attribute_of_every_parameter():
    net = nn.HybridSequential()
    net.add(nn.Dense(3, in_units=2), nn.Dense(1, in_units=3))
    net.setattr("grad_req", "null")
    assert {p.grad_req for p in net.collect_params().values()} == {"null"}
    net.setattr("lr_mult", 0.5)
    assert {p.lr_mult for p in net.collect_params().values()} == {0.5}


class Holder(hybrid.Block):
    def __init__(self, container):
        super().__init__()
        self.layers = container


@pytest.mark.parametrize("container", [list, tuple, dict])
def test_blocks_in_a_plain_container_warn(container):
    layers = [nn.Dense(2, in_units=2), nn.Dense(2, in_units=2)]
    value = dict(enumerate(layers)) if container is dict else container(layers)
    with pytest.warns(UserWarning, match="not registered"):
        holder = Holder(value)
    assert holder.collect_params() == {}  # as the warning says


def test_a_plain_list_of_numbers_does_not_warn():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        Holder([1, 2, 3])


def test_hybridizing_a_sequential_of_hybrid_blocks_warns():
    seq = nn.Sequential()
    seq.add(nn.Dense(2, in_units=2), nn.Dense(2, in_units=2))
    with pytest.warns(UserWarning, match="HybridSequential"):
        seq.hybridize()
    assert all(child._active for child in seq._children.values())


def test_float64_without_x64_warns_and_states_the_held_dtype():
    code = ("import warnings, numpy as np; from hybrid import nn\n"
            "with warnings.catch_warnings(record=True) as caught:\n"
            "    warnings.simplefilter('always')\n"
            "    d = nn.Dense(2, in_units=3, dtype='float64'); d.initialize()\n"
            "print(d.weight.dtype, d.weight.data().dtype, any('jax_enable_x64' in str(w.message) for w in caught))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={"JAX_ENABLE_X64": "0", "PATH": "", "PYTHONPATH": "."}).stdout.split()
    assert out == ["float32", "float32", "True"]


def test_float64_with_x64_computes_in_float64():
    code = ("import numpy as np, jax; from hybrid import nn, autograd\n"
            "d = nn.Dense(2, in_units=3, dtype='float64'); d.initialize()\n"
            "x = np.ones((4, 3))\n"
            "with autograd.record():\n"
            "    y = d(x).sum()\n"
            "autograd.backward(y)\n"
            "print(d.weight.data().dtype, y.dtype, d.weight.grad().dtype)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env={"JAX_ENABLE_X64": "1", "PATH": "", "PYTHONPATH": "."})
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["float64", "float64", "float64"]


def test_block_name_and_prefix_count_per_class_like_gluon_1x():
    """Gluon 1.x's automatic names: the class name in lower case followed by a per-class count; the prefix
    adds an underscore."""
    first, second, seq = nn.Dense(2), nn.Dense(2), nn.HybridSequential()
    n1, n2 = int(first.name[len("dense"):]), int(second.name[len("dense"):])
    assert first.name.startswith("dense") and second.name.startswith("dense") and n2 == n1 + 1
    assert first.prefix == first.name + "_"
    assert seq.name.startswith("hybridsequential")


def test_gluon_1x_ctx_keywords_are_accepted():
    """d2l's train_ch6 calls net.initialize(force_reinit=True, ctx=device, init=init.Xavier())."""
    import jax
    import numpy as np
    from hybrid import init
    device = jax.devices()[0]
    net = nn.Dense(2, in_units=3)
    net.initialize(force_reinit=True, ctx=device, init=init.Constant(0.5))
    np.testing.assert_array_equal(np.asarray(net.weight.data(ctx=device)), np.full((2, 3), 0.5))
    net.reset_ctx(device)
    assert net.weight.data().devices() == {device}
    net.weight.initialize(ctx=device, force_reinit=True, init=init.Constant(1.0))
    np.testing.assert_array_equal(np.asarray(net.weight.data()), np.ones((2, 3)))
