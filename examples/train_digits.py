"""Train a small CNN on scikit-learn's handwritten digits (8x8 images, 10 classes), hybridized.

    pip install -e '.[examples]' && python examples/train_digits.py

The data ships with scikit-learn, so nothing is downloaded. Prints a progress bar,
per-epoch loss and accuracy, and the final held-out accuracy.
"""
from __future__ import annotations

import argparse
import sys
import time

import numpy as np

import hybrid
from hybrid import autograd, loss, nn


def load_digits(seed: int) -> tuple[np.ndarray, ...]:
    """(x_train, y_train, x_test, y_test): images (N, 1, 8, 8) scaled to [0, 1], 20% held out."""
    try:
        from sklearn.datasets import load_digits as sklearn_digits
    except ImportError:
        sys.exit("This example needs scikit-learn: pip install -e '.[examples]'")
    digits = sklearn_digits()
    x = (digits.images / 16.0).astype(np.float32)[:, None]
    y = digits.target.astype(np.int32)
    order = np.random.default_rng(seed).permutation(len(x))
    split = int(0.8 * len(x))
    train, test = order[:split], order[split:]
    return x[train], y[train], x[test], y[test]


def build_net() -> nn.HybridSequential:
    net = nn.HybridSequential()
    net.add(nn.Conv2D(16, 3, padding=1), nn.BatchNorm(), nn.Activation("relu"),
            nn.Conv2D(32, 3, padding=1), nn.BatchNorm(), nn.Activation("relu"),
            nn.MaxPool2D(2),
            nn.Flatten(), nn.Dense(64, activation="relu"), nn.Dropout(0.3), nn.Dense(10))
    return net


def batches(x: np.ndarray, y: np.ndarray, batch_size: int, rng: np.random.Generator | None):
    order = rng.permutation(len(x)) if rng is not None else np.arange(len(x))
    for start in range(0, len(x), batch_size):
        index = order[start:start + batch_size]
        yield x[index], y[index]


def accuracy(net: nn.HybridSequential, x: np.ndarray, y: np.ndarray) -> float:
    correct = 0
    for xb, yb in batches(x, y, 256, None):
        correct += int((np.asarray(net(xb)).argmax(axis=1) == yb).sum())
    return correct / len(x)


def progress(done: int, total: int, width: int = 30) -> None:
    """A one-line progress bar, redrawn in place (only on a terminal)."""
    if sys.stdout.isatty():
        filled = width * done // total
        print(f"\r  [{'#' * filled}{'.' * (width - filled)}] {done}/{total}", end="", flush=True)


def main(argv: list[str] | None = None) -> float:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--epochs", type=int, default=15)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--lr", type=float, default=0.003)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-hybridize", action="store_true", help="run eagerly")
    args = parser.parse_args(argv)

    hybrid.random.seed(args.seed)
    x_train, y_train, x_test, y_test = load_digits(args.seed)
    net = build_net()
    net.initialize(hybrid.init.Xavier())
    loss_fn = loss.SoftmaxCrossEntropyLoss()
    if not args.no_hybridize:
        net.hybridize()
        loss_fn.hybridize()
    trainer = hybrid.Trainer(net.collect_params(), "adam", {"learning_rate": args.lr})
    rng = np.random.default_rng(args.seed)
    n_batches = -(-len(x_train) // args.batch_size)
    print(f"digits: {len(x_train)} training and {len(x_test)} held-out images; "
          f"{'hybridized' if not args.no_hybridize else 'eager'} CNN")
    for epoch in range(1, args.epochs + 1):
        start, total_loss, correct = time.perf_counter(), 0.0, 0
        for i, (xb, yb) in enumerate(batches(x_train, y_train, args.batch_size, rng), start=1):
            with autograd.record():
                out = net(xb)
                batch_loss = loss_fn(out, yb)
            autograd.backward(batch_loss)
            trainer.step(len(xb))
            total_loss += float(batch_loss.sum())
            correct += int((np.asarray(out).argmax(axis=1) == yb).sum())
            progress(i, n_batches)
        print(f"\r  epoch {epoch:2d}  loss {total_loss / len(x_train):.4f}  train acc {correct / len(x_train):.3f}"
              f"  held-out acc {accuracy(net, x_test, y_test):.3f}  ({time.perf_counter() - start:.1f}s)")
    final = accuracy(net, x_test, y_test)
    print(f"final held-out accuracy: {final:.4f}")
    return final


if __name__ == "__main__":
    main()
