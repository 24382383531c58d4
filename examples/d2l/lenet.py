"""d2l 6.6, convolutional neural networks (LeNet).

    python examples/d2l/lenet.py                                   # synthetic Fashion-MNIST stand-in
    python examples/d2l/lenet.py --data-root ~/fashion-mnist       # the real files

LeNet-5 as in the book (sigmoid activations, average pooling), trained with d2l's ``train_ch6`` (in
``d2l_utils.py``). MXNet's ``ctx=device`` arguments go: JAX places the arrays on its default device.

``--activation relu`` trains the chapter exercise's ReLU variant. The sigmoid net stays near chance for
its first thousand or so SGD steps on the synthetic data (about 30 epochs of 2048 images in batches of
64) before it starts to learn; the ReLU net learns within a few epochs.
"""
from __future__ import annotations

import argparse

import hybrid
from hybrid import nn

from d2l_utils import load_data_fashion_mnist, train_ch6


def lenet(activation: str = "sigmoid") -> nn.Sequential:
    """LeNet-5 for 28x28 single-channel images; ``activation='relu'`` is the exercise's modern variant."""
    net = nn.Sequential()
    net.add(nn.Conv2D(channels=6, kernel_size=5, padding=2, activation=activation),
            nn.AvgPool2D(pool_size=2, strides=2),
            nn.Conv2D(channels=16, kernel_size=5, activation=activation),
            nn.AvgPool2D(pool_size=2, strides=2),
            # Dense transforms (batch size, channels, height, width) into (batch size, channels * height * width)
            nn.Dense(120, activation=activation),
            nn.Dense(84, activation=activation),
            nn.Dense(10))
    return net


def main(num_epochs: int = 10, lr: float = 0.9, batch_size: int = 256, root: str | None = None,
         num_train: int = 6000, num_test: int = 1000, activation: str = "sigmoid", seed: int = 0) -> dict:
    """Train LeNet; returns the per-epoch training loss and accuracy and the test accuracy."""
    hybrid.random.seed(seed)
    train_iter, test_iter = load_data_fashion_mnist(batch_size, root=root, num_train=num_train,
                                                    num_test=num_test, seed=seed)
    return train_ch6(lenet(activation), train_iter, test_iter, num_epochs, lr)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--lr", type=float, default=0.9)
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--activation", choices=["sigmoid", "relu"], default="sigmoid")
    parser.add_argument("--data-root", help="folder with the Fashion-MNIST files (default: synthetic data)")
    args = parser.parse_args()
    main(args.epochs, args.lr, args.batch_size, root=args.data_root, activation=args.activation)
