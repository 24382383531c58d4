"""d2l 3.2, linear regression implemented from scratch.

    python examples/d2l/linear_regression_scratch.py

The parameters ``w`` and ``b`` are plain JAX arrays. Where the MXNet edition calls ``w.attach_grad()``,
``l.backward()`` and reads ``w.grad``, hybrid records the loss and asks for its gradients with
``autograd.grad(l, [w, b])``; ``sgd`` returns the updated arrays (JAX arrays are immutable, so
``param[:] = ...`` becomes a new array). The data is synthetic, as in the book.
"""
from __future__ import annotations

import argparse
from typing import Iterator

import jax.numpy as jnp
import numpy as np

from hybrid import autograd


def synthetic_data(w: np.ndarray, b: float, num_examples: int,
                   rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Generate y = Xw + b + noise, with labels of shape ``(num_examples, 1)``."""
    X = rng.normal(0, 1, (num_examples, len(w))).astype(np.float32)
    y = X @ w + b
    y += rng.normal(0, 0.01, y.shape)
    return X, y.reshape((-1, 1)).astype(np.float32)


def data_iter(batch_size: int, features: np.ndarray, labels: np.ndarray,
              rng: np.random.Generator) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """Minibatches of ``(features, labels)`` in random order."""
    num_examples = len(features)
    indices = rng.permutation(num_examples)
    for i in range(0, num_examples, batch_size):
        batch_indices = indices[i:min(i + batch_size, num_examples)]
        yield features[batch_indices], labels[batch_indices]


def linreg(X, w, b):
    """The linear regression model."""
    return jnp.dot(X, w) + b


def squared_loss(y_hat, y):
    """Squared loss, one value per example."""
    return (y_hat - y.reshape(y_hat.shape)) ** 2 / 2


def sgd(params: list, grads: list, lr: float, batch_size: int) -> list:
    """Minibatch stochastic gradient descent: the updated parameters (``grads`` are of the summed loss)."""
    return [param - lr * grad / batch_size for param, grad in zip(params, grads)]


def main(num_epochs: int = 3, lr: float = 0.03, batch_size: int = 10, num_examples: int = 1000,
         seed: int = 0) -> dict:
    """Fit ``y = Xw + b`` to synthetic data; returns the true and learned parameters and the loss per epoch."""
    rng = np.random.default_rng(seed)
    true_w, true_b = np.array([2, -3.4], np.float32), 4.2
    features, labels = synthetic_data(true_w, true_b, num_examples, rng)

    w = jnp.asarray(rng.normal(0, 0.01, (2, 1)), jnp.float32)  # no attach_grad(): any array can be differentiated
    b = jnp.zeros(1)
    net, loss = linreg, squared_loss
    losses = []
    for epoch in range(num_epochs):
        for X, y in data_iter(batch_size, features, labels, rng):
            with autograd.record():
                l = loss(net(X, w, b), y)  # minibatch loss in X and y
            grads = autograd.grad(l, [w, b])  # l.backward(); w.grad, b.grad: gradients of l.sum()
            w, b = sgd([w, b], grads, lr, batch_size)
        train_l = loss(net(features, w, b), labels)
        losses.append(float(train_l.mean()))
        print(f"epoch {epoch + 1}, loss {losses[-1]:f}")
    w, b = np.asarray(w).reshape(true_w.shape), float(np.asarray(b)[0])
    print(f"error in estimating w: {true_w - w}")
    print(f"error in estimating b: {true_b - b}")
    return {"w": w, "b": b, "true_w": true_w, "true_b": true_b, "loss": losses}


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--lr", type=float, default=0.03)
    parser.add_argument("--batch-size", type=int, default=10)
    args = parser.parse_args()
    main(args.epochs, args.lr, args.batch_size)
