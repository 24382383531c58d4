"""End-to-end training: eager and hybridized loops follow the same trajectory and learn."""
import numpy as np

import hybrid
from hybrid import autograd, loss, nn

from helpers import clone_params


def blobs(rng, n=600, classes=3, dims=10):
    centers = rng.standard_normal((classes, dims)) * 3
    labels = rng.integers(0, classes, n)
    x = centers[labels] + rng.standard_normal((n, dims))
    return x.astype(np.float32), labels.astype(np.int32)


def mlp():
    net = nn.HybridSequential()
    net.add(nn.Dense(32, activation="relu"), nn.BatchNorm(), nn.Dense(3))
    net.initialize(hybrid.init.Xavier())
    return net


def train(net, x, y, steps, optimizer="sgd", opt_params=None, batch=50):
    loss_fn = loss.SoftmaxCELoss()
    trainer = hybrid.Trainer(net.collect_params(), optimizer, opt_params or {"learning_rate": 0.1, "momentum": 0.9})
    for step in range(steps):
        start = (step * batch) % len(x)
        xb, yb = x[start:start + batch], y[start:start + batch]
        with autograd.record():
            out = loss_fn(net(xb), yb)
        autograd.backward(out)
        trainer.step(len(xb))


def test_eager_and_hybridized_training_follow_the_same_trajectory(rng):
    x, y = blobs(rng)
    eager = mlp()
    eager(x[:2])
    compiled = mlp()
    compiled(x[:2])
    clone_params(eager, compiled)
    compiled.hybridize()
    train(eager, x, y, 6)
    train(compiled, x, y, 6)
    for p, q in zip(eager.collect_params().values(), compiled.collect_params().values()):
        np.testing.assert_allclose(np.asarray(q.data()), np.asarray(p.data()), rtol=2e-4, atol=2e-5)


def test_hybridized_training_learns(rng):
    x, y = blobs(rng)
    net = mlp()
    net.hybridize()
    train(net, x[:500], y[:500], 60, "adam", {"learning_rate": 0.01})
    accuracy = (np.asarray(net(x[500:])).argmax(axis=1) == y[500:]).mean()
    assert accuracy > 0.95
