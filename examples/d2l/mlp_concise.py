"""d2l 4.3, concise implementation of multilayer perceptrons.

    python examples/d2l/mlp_concise.py                                   # synthetic Fashion-MNIST stand-in
    python examples/d2l/mlp_concise.py --data-root ~/fashion-mnist       # the real files

A hidden layer of 256 ReLU units and an output layer, trained with SGD by d2l's ``train_ch3`` (in d2l_utils.py).
"""
from __future__ import annotations

import argparse

import hybrid
from hybrid import init, loss as gloss, nn, Trainer

from d2l_utils import load_data_fashion_mnist, train_ch3


def main(num_epochs: int = 10, lr: float = 0.1, batch_size: int = 256, num_hiddens: int = 256,
         root: str | None = None, num_train: int = 6000, num_test: int = 1000, seed: int = 0) -> dict:
    """Train the MLP; returns the per-epoch training loss and accuracy and the test accuracy."""
    hybrid.random.seed(seed)
    net = nn.Sequential()
    net.add(nn.Dense(num_hiddens, activation="relu"), nn.Dense(10))
    net.initialize(init.Normal(sigma=0.01))
    loss = gloss.SoftmaxCrossEntropyLoss()
    trainer = Trainer(net.collect_params(), "sgd", {"learning_rate": lr})
    train_iter, test_iter = load_data_fashion_mnist(batch_size, root=root, num_train=num_train,
                                                    num_test=num_test, seed=seed)
    return train_ch3(net, train_iter, test_iter, loss, num_epochs, trainer)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--lr", type=float, default=0.1)
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--data-root", help="folder with the Fashion-MNIST files (default: synthetic data)")
    args = parser.parse_args()
    main(args.epochs, args.lr, args.batch_size, root=args.data_root)
