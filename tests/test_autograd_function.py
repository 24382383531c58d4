"""``autograd.Function``: a custom forward and backward, in every mode (hybrid/_core/custom_function.py).

Every expected gradient is ``jax.grad`` of the same math written in plain JAX, or a hand-computed value.
The straight-through rounding below has a custom gradient (1) that differs from the true one (0): it shows
that the hand-written backward, not JAX's own derivative, is used.
"""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import hybrid
from hybrid import Trainer, autograd, nn
from hybrid.errors import AutogradError

from conftest import assert_close


class Sigmoid(autograd.Function):
    """MXNet's documented example."""

    def forward(self, x):
        y = 1 / (1 + jnp.exp(-x))
        self.save_for_backward(y)
        return y

    def backward(self, dy):
        y, = self.saved_tensors
        return dy * y * (1 - y)


class RoundST(autograd.Function):
    """Rounding with a straight-through gradient."""

    def forward(self, x):
        return jnp.round(x)

    def backward(self, dy):
        return dy


class DivMul(autograd.Function):
    """MXNet's test_function: two inputs, two outputs."""

    def forward(self, x, y):
        self.save_for_backward(x, y)
        return x / y, x * y

    def backward(self, dm, dn):
        x, y = self.saved_tensors
        return dm / y + dn * y, dn * x - dm * x / y / y


X = np.linspace(-2.0, 2.0, 6, dtype=np.float32)


def test_sigmoid_example_eager_recorded_and_under_jax_grad():
    x = jnp.asarray(X)
    assert_close(Sigmoid()(x), 1 / (1 + np.exp(-X)))
    expected = jax.grad(lambda v: jnp.sum(jax.nn.sigmoid(v)))(x)
    with autograd.record():
        m = Sigmoid()(x)
        dx = autograd.grad(m, x)
    assert_close(dx, expected)
    assert_close(jax.grad(lambda v: Sigmoid()(v).sum())(x), expected)


def test_the_custom_backward_is_used_eagerly_recorded_and_under_jax_transforms():
    x = jnp.asarray(X * 1.3)
    ones = np.ones_like(X)
    assert_close(jax.grad(lambda v: jnp.round(v).sum())(x), np.zeros_like(X))  # JAX's own: zero
    assert_close(jax.grad(lambda v: RoundST()(v).sum())(x), ones)
    assert_close(jax.jit(jax.grad(lambda v: RoundST()(v).sum()))(x), ones)
    with autograd.record():
        y = RoundST()(x * 2.0)
    assert_close(autograd.grad(y, x), 2 * ones)
    assert_close(y, np.round(X * 1.3 * 2))


def test_several_inputs_and_outputs_equal_jax_grad(rng):
    x = jnp.asarray(rng.uniform(0.5, 1.5, 10).astype(np.float32))
    y = jnp.asarray(rng.uniform(0.5, 1.5, 10).astype(np.float32))
    head_m, head_n = rng.standard_normal(10).astype(np.float32), rng.standard_normal(10).astype(np.float32)
    with autograd.record():
        m, n = DivMul()(x, y)
        dx, dy = autograd.grad([m, n], [x, y], head_grads=[head_m, head_n])
    ref = jax.grad(lambda a, b: jnp.sum(a / b * head_m + a * b * head_n), argnums=(0, 1))(x, y)
    assert_close(dx, ref[0])
    assert_close(dy, ref[1])


class Net(nn.HybridBlock):
    def __init__(self):
        super().__init__()
        self.dense = nn.Dense(3, in_units=4)

    def forward(self, x):
        return RoundST()(self.dense(x)) + Sigmoid()(self.dense(x))


def ref_net_grads(net, x):
    w, b = np.asarray(net.dense.weight.data()), np.asarray(net.dense.bias.data())

    def f(w, b):
        h = x @ w.T + b
        return jnp.sum(h + jax.nn.sigmoid(h))  # the straight-through part has gradient 1
    return jax.grad(f, argnums=(0, 1))(w, b)


@pytest.mark.parametrize("hybridize", [False, True], ids=["eager", "hybridized"])
def test_inside_blocks_with_loss_backward(hybridize, rng):
    net = Net()
    net.initialize()
    if hybridize:
        net.hybridize()
    x = rng.standard_normal((5, 4)).astype(np.float32)
    with autograd.record():
        loss = net(x).sum()
    loss.backward()
    gw, gb = ref_net_grads(net, x)
    assert_close(net.dense.weight.grad(), gw, rtol=1e-4)
    assert_close(net.dense.bias.grad(), gb, rtol=1e-4)


def test_inside_a_compiled_step(rng):
    net = Net()
    net.initialize()
    trainer = Trainer(net.collect_params(), "sgd", {"learning_rate": 0.1})

    @hybrid.compile
    def step(x):
        with autograd.record():
            loss = net(x).sum()
        loss.backward()
        trainer.step(1)
        return loss

    for _ in range(2):
        x = rng.standard_normal((5, 4)).astype(np.float32)
        w, b = np.asarray(net.dense.weight.data()), np.asarray(net.dense.bias.data())
        gw, gb = ref_net_grads(net, x)
        step(x)
        assert_close(net.dense.weight.data(), w - 0.1 * gw, rtol=1e-4)
        assert_close(net.dense.bias.data(), b - 0.1 * gb, rtol=1e-4)


def test_chain_of_instances_recorded():
    """Port of MXNet's test_function1: five instances applied in turn inside record()."""
    class Foo(autograd.Function):
        def forward(self, x):
            return x + 1

        def backward(self, dy):
            return dy

    x = jnp.zeros((3, 4))
    with autograd.record():
        y = x
        for _ in range(5):
            y = Foo()(y)
        dx = autograd.grad(y, x)
    assert_close(y, np.full((3, 4), 5.0))
    assert_close(dx, np.ones((3, 4)))


class Scale(autograd.Function):
    """Settings from __init__, a non-array saved value and an integer input."""

    def __init__(self, k):
        super().__init__()
        self.k = k

    def forward(self, x, index):
        self.save_for_backward(x.shape, index)
        return x * self.k + index

    def backward(self, dy):
        shape, index = self.saved_tensors
        assert shape == (4,) and index.shape == (4,)
        return dy * self.k, jnp.ones(shape)  # the integer input's gradient is dropped


def test_settings_saved_values_and_integer_inputs_and_one_program_per_setting():
    x, index = jnp.ones(4), jnp.arange(4)
    compiled = []
    for k in (2.0, 3.0, 2.0, 3.0):
        before = autograd.stats.compiles
        with autograd.record():
            y = Scale(k)(x * 1.0, index)
            dx = autograd.grad(y, x)
        assert_close(dx, np.full(4, k))
        assert_close(y, k + np.arange(4))
        compiled.append(autograd.stats.compiles - before)
    assert compiled == [1, 1, 0, 0]


def test_none_gradients_and_unused_outputs():
    class Stop(autograd.Function):
        def forward(self, x):
            return x * 5

        def backward(self, dy):
            return None

    class Two(autograd.Function):
        def forward(self, x):
            return x * 2, x * 3

        def backward(self, da, db):
            return da * 2 + db * 3

    x = jnp.ones(3)
    with autograd.record():
        dx = autograd.grad((Stop()(x) + x).sum(), x)
        a, b = Two()(x)
        db_only = autograd.grad(b.sum(), x)
    assert_close(dx, np.ones(3))
    assert_close(db_only, np.full(3, 3.0))


def test_saved_values_stay_after_an_eager_call_and_not_after_a_traced_one():
    f = Sigmoid()
    f(jnp.zeros(2))
    assert_close(f.saved_tensors[0], np.full(2, 0.5))
    g = Sigmoid()
    jax.jit(lambda v: g(v))(jnp.zeros(2))
    assert g.saved_tensors == ()


def test_errors_name_the_function_and_what_was_expected():
    f = Sigmoid()
    f(jnp.ones(2))
    with pytest.raises(AutogradError, match="Sigmoid: a Function instance can be called only once"):
        f(jnp.ones(2))
    with pytest.raises(TypeError, match="Sigmoid: input 0 is a str"):
        Sigmoid()("x")

    class OneGrad(autograd.Function):
        def forward(self, x, y):
            return x + y

        def backward(self, dz):
            return dz

    class Sum(autograd.Function):
        def forward(self, x):
            return x.sum()

        def backward(self, dz):
            return dz

    class NotArray(autograd.Function):
        def forward(self, x):
            return "out"

    x = jnp.ones(3)
    with pytest.raises(AutogradError, match=r"OneGrad.backward returned 1 gradient\(s\) for the 2 input"):
        jax.grad(lambda v: OneGrad()(v, v * 2).sum())(x)
    with pytest.raises(AutogradError, match=r"Sum.backward: the gradient of input 0 has shape \(\)"):
        jax.grad(lambda v: Sum()(v))(x)
    with pytest.raises(AutogradError, match="NotArray.forward must return an array"):
        NotArray()(x)
