"""d2l 6.6, convolutional neural networks (LeNet).

    python examples/d2l/lenet.py                                   # synthetic Fashion-MNIST stand-in
    python examples/d2l/lenet.py --data-root ~/fashion-mnist       # the real files

LeNet-5 as in the book (sigmoid activations, average pooling), trained with d2l's ``train_ch6`` written
out. MXNet's ``ctx=device`` arguments go: JAX places the arrays on its default device.

``--activation relu`` trains the chapter exercise's ReLU variant. The sigmoid net stays near chance for
its first thousand or so SGD steps on the synthetic data (about 30 epochs of 2048 images in batches of
64) before it starts to learn; the ReLU net learns within a few epochs.
"""
from __future__ import annotations

import argparse
import time

import hybrid
from hybrid import autograd, init, loss as gloss, nn, Trainer

from d2l_utils import Accumulator, accuracy, evaluate_accuracy, load_data_fashion_mnist


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


def train_ch6(net: hybrid.Block, train_iter, test_iter, num_epochs: int, lr: float) -> dict:
    """Train ``net`` with SGD (Xavier initialisation, as d2l); returns per-epoch metrics."""
    net.initialize(force_reinit=True, init=init.Xavier())
    loss = gloss.SoftmaxCrossEntropyLoss()
    trainer = Trainer(net.collect_params(), "sgd", {"learning_rate": lr})
    history = {"train_loss": [], "train_acc": [], "test_acc": []}
    num_examples, start = 0, time.perf_counter()
    for epoch in range(num_epochs):
        metric = Accumulator(3)  # sum of training loss, sum of training accuracy, no. of examples
        for X, y in train_iter:
            with autograd.record():
                y_hat = net(X)
                l = loss(y_hat, y)
            autograd.backward(l)
            trainer.step(X.shape[0])
            metric.add(float(l.sum()), accuracy(y_hat, y), X.shape[0])
        num_examples += metric[2]
        train_loss, train_acc = metric[0] / metric[2], metric[1] / metric[2]
        test_acc = evaluate_accuracy(net, test_iter)
        for key, value in zip(history, (train_loss, train_acc, test_acc)):
            history[key].append(value)
        print(f"epoch {epoch + 1}, loss {train_loss:.3f}, train acc {train_acc:.3f}, test acc {test_acc:.3f}")
    print(f"{num_examples / (time.perf_counter() - start):.1f} examples/sec")
    return history


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
