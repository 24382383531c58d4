"""MXNet 1.x optimizer keywords: RMSProp's gamma1/gamma2 (against a NumPy transcription of MXNet 1.9.1's
rmsprop_update and rmspropalex_update kernels), AdaGrad's eps, and Gluon 2.0's aggregate_num/use_fused_step,
accepted without effect."""
import numpy as np
import pytest

from hybrid import HybridBlock, Parameter, Trainer, autograd, init, optimizer

X = np.array([[0.5, 1.0, 2.0], [1.5, -1.0, 0.25]])
W0 = np.array([[1.0, -2.0, 0.5], [0.3, 0.8, -1.2]])


class Scaled(HybridBlock):
    """out = w * x; with loss 0.5 * sum(out**2) the gradient is w * x**2."""

    def __init__(self):
        super().__init__()
        self.w = Parameter("w", shape=W0.shape, init=init.Constant(W0))

    def forward(self, x):
        return self.w.data() * x


def train(name, params, steps=3):
    block = Scaled()
    block.initialize()
    trainer = Trainer(block.collect_params(), name, params)
    history = []
    for _ in range(steps):
        with autograd.record():
            out = block(np.float32(X))
        autograd.backward(out, head_grads=np.asarray(out))
        trainer.step(1)
        history.append(np.asarray(block.w.data(), np.float64))
    return history


def mxnet1_rmsprop(lr, gamma1, gamma2, epsilon, wd, centered, clip_weights, steps=3):
    """MXNet 1.9.1's RMSPropUpdateKernel / RMSPropAlexUpdateKernel, element-wise, in float64."""
    w = W0.copy()
    n, g_avg, delta = np.zeros_like(w), np.zeros_like(w), np.zeros_like(w)
    history = []
    for _ in range(steps):
        grad = w * X ** 2 + wd * w  # rescale_grad 1, no clip_gradient
        n = (1 - gamma1) * grad * grad + gamma1 * n
        if centered:
            g_avg = (1 - gamma1) * grad + gamma1 * g_avg
            delta = gamma2 * delta - lr * grad / np.sqrt(n - g_avg * g_avg + epsilon)
            w = w + delta
        else:
            w = w - lr * grad / np.sqrt(n + epsilon)
        if clip_weights is not None:
            w = np.clip(w, -clip_weights, clip_weights)
        history.append(w.copy())
    return history


@pytest.mark.parametrize("centered, clip_weights", [(False, None), (True, None), (True, 1.1)])
def test_rmsprop_gamma1_gamma2_follow_mxnet_1x(centered, clip_weights):
    params = dict(learning_rate=0.05, gamma1=0.8, gamma2=0.6, epsilon=1e-3, wd=0.1, centered=centered)
    if clip_weights is not None:
        params["clip_weights"] = clip_weights
    got = train("rmsprop", params)
    want = mxnet1_rmsprop(0.05, 0.8, 0.6, 1e-3, 0.1, centered, clip_weights)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=2e-5, atol=2e-6)
    if centered:  # gamma2 matters: momentum 0.9 (the default) gives other weights
        other = train("rmsprop", dict(params, gamma2=0.9))
        assert np.abs(other[-1] - got[-1]).max() > 1e-3
    opt = optimizer.RMSProp(gamma1=0.8, gamma2=0.6)
    assert (opt.rho, opt.momentum) == (0.8, 0.6)


def test_adagrad_eps_is_epsilon():
    # one step by hand: g = w * x**2, history = g**2, w -= lr * g / (|g| + eps)
    eps, lr = 0.5, 0.1
    got = train("adagrad", dict(learning_rate=lr, eps=eps), steps=1)[0]
    g = W0 * X ** 2
    np.testing.assert_allclose(got, W0 - lr * g / (np.abs(g) + eps), rtol=1e-6)
    assert optimizer.AdaGrad(eps=1e-7).epsilon == 1e-7
    assert optimizer.AdaGrad(epsilon=1e-7, eps=1e-7).epsilon == 1e-7


def test_contradicting_names_raise():
    with pytest.raises(ValueError, match="gamma1=0.5 .*rho.* contradicts rho=0.7"):
        optimizer.RMSProp(rho=0.7, gamma1=0.5)
    with pytest.raises(ValueError, match="gamma2=0.5 .*momentum"):
        optimizer.RMSProp(momentum=0.7, gamma2=0.5)
    with pytest.raises(ValueError, match="eps=0.1 .*epsilon"):
        optimizer.AdaGrad(epsilon=1e-3, eps=0.1)


@pytest.mark.parametrize("name", ["sgd", "adam", "rmsprop"])
def test_aggregate_num_and_use_fused_step_have_no_effect(name):
    plain = train(name, {"learning_rate": 0.01}, steps=2)
    tuned = train(name, {"learning_rate": 0.01, "aggregate_num": 4, "use_fused_step": False}, steps=2)
    for a, b in zip(plain, tuned):
        np.testing.assert_array_equal(a, b)
    assert not np.allclose(plain[-1], W0)  # the weights did move
