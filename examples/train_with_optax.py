"""Train a hybrid network with plain optax and jax.jit, through the functional bridge.

    python examples/train_with_optax.py           # a few seconds on a CPU
    python examples/train_with_optax.py --quick   # fewer steps

The data are three noisy interleaved spirals in 2-D, generated here. The network is built with hybrid's
layers (Dense, BatchNorm, Dropout); its state goes to `net.apply`, a pure function, inside one `jax.jit`
training step with optax's Adam. At the end `net.load_state` gives the trained state back to the network,
which is then evaluated with an ordinary call and saved as a .safetensors file when the package is there.
"""
from __future__ import annotations

import argparse
import os
import tempfile

import jax
import jax.numpy as jnp
import numpy as np
import optax

from hybrid import init, metric, nn


def spirals(n_per_class: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """``(points (3n, 2) float32, labels (3n,) int32)``: three spirals with Gaussian noise."""
    rng = np.random.default_rng(seed)
    radius = np.linspace(0.1, 1.0, n_per_class)
    points, labels = [], []
    for c in range(3):
        angle = np.linspace(c * 2.1, c * 2.1 + 4.0, n_per_class) + rng.normal(0, 0.15, n_per_class)
        points.append(np.stack([radius * np.sin(angle), radius * np.cos(angle)], axis=1))
        labels.append(np.full(n_per_class, c))
    return np.concatenate(points).astype(np.float32), np.concatenate(labels).astype(np.int32)


def build_net() -> nn.HybridSequential:
    net = nn.HybridSequential()
    net.add(nn.Dense(64, activation="relu"), nn.BatchNorm(), nn.Dropout(0.1),
            nn.Dense(64, activation="relu"), nn.Dense(3))
    net.initialize(init.Xavier())
    return net


def trainable(state: dict) -> dict:
    """The entries optax updates: all but the running statistics."""
    return {name: value for name, value in state.items() if "running" not in name}


def train(steps: int = 600, batch_size: int = 64, seed: int = 0, log_every: int = 100) -> tuple:
    """Train on generated spirals; returns ``(net, test accuracy)``."""
    x_train, y_train = spirals(300, seed)
    x_test, y_test = spirals(100, seed + 1)
    net = build_net()
    net(jnp.asarray(x_train[:2]))  # the first call fixes the input sizes
    optimizer = optax.adam(3e-3)

    @jax.jit
    def step(state, opt_state, x, y, key):
        def loss_fn(params):
            logits, new_state = net.apply({**state, **params}, x, training=True, key=key)
            return optax.softmax_cross_entropy_with_integer_labels(logits, y).mean(), new_state
        (loss, new_state), grads = jax.value_and_grad(loss_fn, has_aux=True)(trainable(state))
        updates, opt_state = optimizer.update(grads, opt_state, trainable(state))
        return {**new_state, **optax.apply_updates(trainable(state), updates)}, opt_state, loss

    state = net.state()
    opt_state = optimizer.init(trainable(state))
    rng, key = np.random.default_rng(seed), jax.random.key(seed)
    for i in range(steps):
        batch = rng.integers(0, len(x_train), batch_size)
        key, sub = jax.random.split(key)
        state, opt_state, loss = step(state, opt_state, x_train[batch], y_train[batch], sub)
        if log_every and (i + 1) % log_every == 0:
            print(f"step {i + 1}: loss {float(loss):.4f}")
    net.load_state(state)

    accuracy = metric.Accuracy()
    accuracy.update(y_test, net(x_test))
    return net, accuracy.get()[1]


def main(argv: list[str] | None = None) -> float:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer steps")
    args = parser.parse_args(argv)
    net, accuracy = train(steps=150 if args.quick else 600, log_every=50 if args.quick else 100)
    print(f"test accuracy {accuracy:.3f}")
    try:
        import safetensors  # noqa: F401
    except ImportError:
        return accuracy
    path = os.path.join(tempfile.mkdtemp(), "spirals.safetensors")
    net.save_state(path)
    print(f"saved the trained state to {path}")
    return accuracy


if __name__ == "__main__":
    main()
