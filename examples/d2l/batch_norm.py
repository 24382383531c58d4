"""d2l 7.5, batch normalization: from scratch and concise.

    python examples/d2l/batch_norm.py                                   # synthetic Fashion-MNIST stand-in
    python examples/d2l/batch_norm.py --data-root ~/fashion-mnist       # the real files

LeNet with a batch normalization layer after each convolutional and fully connected layer, trained
twice: with the from-scratch ``BatchNorm`` Block below, which keeps its moving statistics in the
plain attributes ``moving_mean`` and ``moving_var`` assigned in ``forward``, and with ``nn.BatchNorm``.
Both nets start from the same weights and see the same batches, so their moving statistics agree.

The book's from-scratch layer uses ``eps=1e-12``; this port uses ``nn.BatchNorm``'s default ``1e-5``, so
that the two implementations compute the same thing.
"""
from __future__ import annotations

import argparse

import jax.numpy as jnp
import numpy as np

import hybrid
from hybrid import autograd, init, nn, Parameter

from d2l_utils import load_data_fashion_mnist, train_ch6


def batch_norm(X, gamma, beta, moving_mean, moving_var, eps: float, momentum: float):
    """Normalise ``X``; returns ``(Y, moving_mean, moving_var)`` with the moving statistics updated in
    training mode."""
    if not autograd.is_training():
        # In prediction mode, use the moving mean and variance
        X_hat = (X - moving_mean) / jnp.sqrt(moving_var + eps)
    else:
        assert len(X.shape) in (2, 4)
        if len(X.shape) == 2:
            # Fully connected layer: statistics over the feature dimension
            mean = X.mean(axis=0)
            var = ((X - mean) ** 2).mean(axis=0)
        else:
            # Convolutional layer: statistics per channel (axis=1), keeping the shape for broadcasting
            mean = X.mean(axis=(0, 2, 3), keepdims=True)
            var = ((X - mean) ** 2).mean(axis=(0, 2, 3), keepdims=True)
        # In training mode, normalise with the batch statistics
        X_hat = (X - mean) / jnp.sqrt(var + eps)
        # Update the moving statistics
        moving_mean = momentum * moving_mean + (1.0 - momentum) * mean
        moving_var = momentum * moving_var + (1.0 - momentum) * var
    Y = gamma * X_hat + beta  # scale and shift
    return Y, moving_mean, moving_var


class BatchNorm(nn.Block):
    """Batch normalization from scratch. ``num_features``: outputs of a fully connected layer or
    channels of a convolutional layer; ``num_dims``: 2 (fully connected) or 4 (convolutional)."""

    def __init__(self, num_features: int, num_dims: int, **kwargs):
        super().__init__(**kwargs)
        shape = (1, num_features) if num_dims == 2 else (1, num_features, 1, 1)
        # The scale and shift parameters, trained by the Trainer
        self.gamma = Parameter("gamma", shape=shape, init=init.One())
        self.beta = Parameter("beta", shape=shape, init=init.Zero())
        # The moving statistics are not parameters: plain arrays, replaced in forward
        self.moving_mean = jnp.zeros(shape)
        self.moving_var = jnp.ones(shape)

    def forward(self, X):
        # MXNet's copyto(X.ctx) goes: JAX places arrays on its default device
        Y, self.moving_mean, self.moving_var = batch_norm(
            X, self.gamma.data(), self.beta.data(), self.moving_mean, self.moving_var, eps=1e-5, momentum=0.9)
        return Y


def lenet_batch_norm(concise: bool = False) -> nn.Sequential:
    """LeNet with batch normalization: the from-scratch ``BatchNorm`` or ``nn.BatchNorm`` (``concise``)."""
    def bn(num_features: int, num_dims: int) -> nn.Block:
        return nn.BatchNorm() if concise else BatchNorm(num_features, num_dims=num_dims)

    net = nn.Sequential()
    net.add(nn.Conv2D(6, kernel_size=5), bn(6, 4), nn.Activation("sigmoid"),
            nn.AvgPool2D(pool_size=2, strides=2),
            nn.Conv2D(16, kernel_size=5), bn(16, 4), nn.Activation("sigmoid"),
            nn.AvgPool2D(pool_size=2, strides=2),
            nn.Dense(120), bn(120, 2), nn.Activation("sigmoid"),
            nn.Dense(84), bn(84, 2), nn.Activation("sigmoid"),
            nn.Dense(10))
    return net


def copy_weights(source: hybrid.Block, target: hybrid.Block) -> None:
    """Copy the trainable parameters of ``source`` into ``target`` in order, reshaping (the from-scratch
    gamma and beta are ``(1, C, 1, 1)`` or ``(1, C)``, ``nn.BatchNorm``'s are ``(C,)``)."""
    trainable = [p for p in target.collect_params().values() if p.grad_req != "null"]
    for src, dst in zip(source.collect_params().values(), trainable, strict=True):
        dst.set_data(jnp.reshape(src.data(), dst.shape))


def moving_statistics(net: hybrid.Block) -> list[tuple[np.ndarray, np.ndarray]]:
    """``(mean, variance)`` per channel of each batch normalization layer of ``net``, in order."""
    stats = []
    for layer in net:
        if isinstance(layer, BatchNorm):
            stats.append((np.asarray(layer.moving_mean).ravel(), np.asarray(layer.moving_var).ravel()))
        elif isinstance(layer, nn.BatchNorm):
            stats.append((np.asarray(layer.running_mean.data()), np.asarray(layer.running_var.data())))
    return stats


def main(num_epochs: int = 10, lr: float = 1.0, batch_size: int = 256, root: str | None = None,
         num_train: int = 6000, num_test: int = 1000, seed: int = 0) -> dict:
    """Train the from-scratch and the concise net from the same weights on the same batches; returns
    ``{'scratch': metrics, 'concise': metrics}``, each with its ``net`` and its moving ``statistics``."""
    hybrid.random.seed(seed)
    train_iter, test_iter = load_data_fashion_mnist(batch_size, root=root, num_train=num_train,
                                                    num_test=num_test, seed=seed)
    nets = {"scratch": lenet_batch_norm(concise=False), "concise": lenet_batch_norm(concise=True)}
    example = next(iter(test_iter))[0]
    for net in nets.values():
        net.initialize(init.Xavier())
        net(example)  # completes the deferred shapes
    copy_weights(nets["scratch"], nets["concise"])
    results = {}
    for name, net in nets.items():
        print(f"{name}:")
        hybrid.random.seed(seed + 1)  # the same batch order for both nets
        results[name] = train_ch6(net, train_iter, test_iter, num_epochs, lr, initialize=False)
        results[name]["net"] = net
        results[name]["statistics"] = moving_statistics(net)
    scratch_bn = nets["scratch"][1]
    print("first layer's gamma and beta:", np.asarray(scratch_bn.gamma.data()).ravel(),
          np.asarray(scratch_bn.beta.data()).ravel())
    return results


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--lr", type=float, default=1.0)
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--data-root", help="folder with the Fashion-MNIST files (default: synthetic data)")
    args = parser.parse_args()
    main(args.epochs, args.lr, args.batch_size, root=args.data_root)
