"""d2l 4.3, concise implementation of multilayer perceptrons.

    python examples/d2l/mlp_concise.py                                   # synthetic Fashion-MNIST stand-in
    python examples/d2l/mlp_concise.py --data-root ~/fashion-mnist       # the real files

A hidden layer of 256 ReLU units and an output layer, trained with SGD; d2l's ``train_ch3`` written out.
"""
from __future__ import annotations

import argparse

import hybrid
from hybrid import autograd, init, loss as gloss, nn, Trainer

from d2l_utils import Accumulator, accuracy, evaluate_accuracy, load_data_fashion_mnist


def train_ch3(net: hybrid.Block, train_iter, test_iter, loss: gloss.Loss, num_epochs: int,
              trainer: Trainer) -> dict:
    """Train ``net``; returns the per-epoch training loss, training accuracy and test accuracy."""
    history = {"train_loss": [], "train_acc": [], "test_acc": []}
    for epoch in range(num_epochs):
        metric = Accumulator(3)  # sum of training loss, sum of training accuracy, no. of examples
        for X, y in train_iter:
            with autograd.record():
                y_hat = net(X)
                l = loss(y_hat, y)
            autograd.backward(l)
            trainer.step(X.shape[0])
            metric.add(float(l.sum()), accuracy(y_hat, y), y.size)
        train_loss, train_acc = metric[0] / metric[2], metric[1] / metric[2]
        test_acc = evaluate_accuracy(net, test_iter)
        for key, value in zip(history, (train_loss, train_acc, test_acc)):
            history[key].append(value)
        print(f"epoch {epoch + 1}, loss {train_loss:.3f}, train acc {train_acc:.3f}, test acc {test_acc:.3f}")
    return history


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
