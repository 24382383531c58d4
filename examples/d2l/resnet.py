"""d2l 7.6, residual networks (ResNet).

    python examples/d2l/resnet.py                                   # synthetic Fashion-MNIST stand-in
    python examples/d2l/resnet.py --data-root ~/fashion-mnist       # the real files

The ``Residual`` block and ResNet-18 as in the book (a 7x7 stem, four modules of two residual blocks,
global average pooling). ``channels`` scales the widths (the book's are 64, 128, 256 and 512) and
``resize`` the input images (the book resizes Fashion-MNIST to 96x96).
"""
from __future__ import annotations

import argparse

import jax

import hybrid
from hybrid import nn

from d2l_utils import load_data_fashion_mnist, train_ch6


class Residual(nn.Block):
    """The residual block: two 3x3 convolutions with batch normalization, and a 1x1 convolution on the
    shortcut when the shape changes."""

    def __init__(self, num_channels: int, use_1x1conv: bool = False, strides: int = 1, **kwargs):
        super().__init__(**kwargs)
        self.conv1 = nn.Conv2D(num_channels, kernel_size=3, padding=1, strides=strides)
        self.conv2 = nn.Conv2D(num_channels, kernel_size=3, padding=1)
        if use_1x1conv:
            self.conv3 = nn.Conv2D(num_channels, kernel_size=1, strides=strides)
        else:
            self.conv3 = None
        self.bn1 = nn.BatchNorm()
        self.bn2 = nn.BatchNorm()

    def forward(self, X):
        Y = jax.nn.relu(self.bn1(self.conv1(X)))
        Y = self.bn2(self.conv2(Y))
        if self.conv3:
            X = self.conv3(X)
        return jax.nn.relu(Y + X)


def resnet_block(num_channels: int, num_residuals: int, first_block: bool = False) -> nn.Sequential:
    """A ResNet module: ``num_residuals`` residual blocks, the first halving height and width (except in
    the first module, which follows a max-pooling layer)."""
    blk = nn.Sequential()
    for i in range(num_residuals):
        if i == 0 and not first_block:
            blk.add(Residual(num_channels, use_1x1conv=True, strides=2))
        else:
            blk.add(Residual(num_channels))
    return blk


def resnet18(num_classes: int = 10, channels: tuple[int, ...] = (64, 128, 256, 512)) -> nn.Sequential:
    """ResNet-18: the stem, four modules of two residual blocks, global average pooling and a dense layer."""
    net = nn.Sequential()
    net.add(nn.Conv2D(channels[0], kernel_size=7, strides=2, padding=3),
            nn.BatchNorm(), nn.Activation("relu"),
            nn.MaxPool2D(pool_size=3, strides=2, padding=1))
    net.add(resnet_block(channels[0], 2, first_block=True),
            *(resnet_block(c, 2) for c in channels[1:]))
    net.add(nn.GlobalAvgPool2D(), nn.Dense(num_classes))
    return net


def main(num_epochs: int = 10, lr: float = 0.05, batch_size: int = 256, resize: int | None = 96,
         channels: tuple[int, ...] = (64, 128, 256, 512), root: str | None = None, num_train: int = 6000,
         num_test: int = 1000, seed: int = 0) -> dict:
    """Train ResNet-18; returns the per-epoch training loss and accuracy and the test accuracy."""
    hybrid.random.seed(seed)
    train_iter, test_iter = load_data_fashion_mnist(batch_size, resize=resize, root=root, num_train=num_train,
                                                    num_test=num_test, seed=seed)
    return train_ch6(resnet18(10, channels), train_iter, test_iter, num_epochs, lr)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--resize", type=int, default=96)
    parser.add_argument("--width", type=int, default=64, help="channels of the first module (doubling after)")
    parser.add_argument("--data-root", help="folder with the Fashion-MNIST files (default: synthetic data)")
    args = parser.parse_args()
    main(args.epochs, args.lr, args.batch_size, args.resize, tuple(args.width * 2 ** i for i in range(4)),
         root=args.data_root)
