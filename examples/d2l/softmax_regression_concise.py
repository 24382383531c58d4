"""d2l 3.7, concise implementation of softmax regression.

    python examples/d2l/softmax_regression_concise.py                      # synthetic Fashion-MNIST stand-in
    python examples/d2l/softmax_regression_concise.py --data-root ~/fashion-mnist   # the real files

One Dense layer trained with SGD on (synthetic) Fashion-MNIST, with d2l's ``train_ch3`` loop written out.
``--reduction mean`` trains on ``l.mean()`` with ``trainer.step(1)`` instead of on the per-example
losses with ``trainer.step(batch_size)``: the two give the same gradients.
"""
from __future__ import annotations

import argparse

import hybrid
from hybrid import autograd, init, loss as gloss, nn, Trainer

from d2l_utils import Accumulator, accuracy, evaluate_accuracy, load_data_fashion_mnist


def train_epoch_ch3(net: hybrid.Block, train_iter, loss: gloss.Loss, trainer: Trainer,
                    reduction: str = "sum") -> tuple[float, float]:
    """One training epoch; returns the training loss and accuracy."""
    metric = Accumulator(3)  # sum of training loss, sum of training accuracy, no. of examples
    for X, y in train_iter:
        with autograd.record():
            y_hat = net(X)
            l = loss(y_hat, y)
            head = l.mean() if reduction == "mean" else l  # computed inside record(), to be differentiated
        autograd.backward(head)  # the gradient of head.sum()
        # the mean's gradient is already averaged over the batch; the sum's is rescaled by step
        trainer.step(1 if reduction == "mean" else X.shape[0])
        metric.add(float(l.sum()), accuracy(y_hat, y), y.size)
    return metric[0] / metric[2], metric[1] / metric[2]


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

    history = {"train_loss": [], "train_acc": [], "test_acc": []}
    for epoch in range(num_epochs):
        train_loss, train_acc = train_epoch_ch3(net, train_iter, loss, trainer, reduction)
        test_acc = evaluate_accuracy(net, test_iter)
        for key, value in zip(history, (train_loss, train_acc, test_acc)):
            history[key].append(value)
        print(f"epoch {epoch + 1}, loss {train_loss:.3f}, train acc {train_acc:.3f}, test acc {test_acc:.3f}")
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
