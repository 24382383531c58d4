"""d2l 3.7, concise implementation of softmax regression.

    python examples/d2l/softmax_regression_concise.py                      # synthetic Fashion-MNIST stand-in
    python examples/d2l/softmax_regression_concise.py --data-root ~/fashion-mnist   # the real files

One Dense layer trained with SGD on (synthetic) Fashion-MNIST by d2l's ``train_ch3`` (in d2l_utils.py).
``--reduction mean`` trains on ``l.mean()`` with ``trainer.step(1)`` instead of on the per-example
losses with ``trainer.step(batch_size)``: the two give the same gradients.
"""
from __future__ import annotations

import argparse

import hybrid
from hybrid import init, loss as gloss, nn, Trainer

from d2l_utils import load_data_fashion_mnist, train_ch3


def main(num_epochs: int = 10, lr: float = 0.1, batch_size: int = 256, root: str | None = None,
         num_train: int = 6000, num_test: int = 1000, reduction: str = "sum", seed: int = 0) -> dict:
    """Train softmax regression; returns the per-epoch training loss and accuracy, the test accuracy
    and the trained net."""
    hybrid.random.seed(seed)
    train_iter, test_iter = load_data_fashion_mnist(batch_size, root=root, num_train=num_train,
                                                    num_test=num_test, seed=seed)
    net = nn.Sequential()
    net.add(nn.Dense(10))  # Dense flattens (B, 1, 28, 28) images to (B, 784)
    net.initialize(init.Normal(sigma=0.01))
    loss = gloss.SoftmaxCrossEntropyLoss()
    trainer = Trainer(net.collect_params(), "sgd", {"learning_rate": lr})

    history = train_ch3(net, train_iter, test_iter, loss, num_epochs, trainer, reduction)
    history["net"] = net
    return history


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--lr", type=float, default=0.1)
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--reduction", choices=["sum", "mean"], default="sum")
    parser.add_argument("--data-root", help="folder with the Fashion-MNIST files (default: synthetic data)")
    args = parser.parse_args()
    main(args.epochs, args.lr, args.batch_size, root=args.data_root, reduction=args.reduction)
