"""Train a small CNN on scikit-learn's handwritten digits (8x8 images, 10 classes), hybridized.

    pip install -e '.[examples]' && python examples/train_digits.py

The data ships with scikit-learn, so nothing is downloaded. hybrid.estimator's fit trains it and
prints progress, per-epoch loss and accuracy (training and held-out), and the final held-out accuracy.
"""
from __future__ import annotations

import argparse
import sys

import numpy as np

import hybrid
from hybrid import data, estimator, loss, nn


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
    train = data.DataLoader(data.ArrayDataset(x_train, y_train), batch_size=args.batch_size, shuffle=True)
    held_out = data.DataLoader(data.ArrayDataset(x_test, y_test), batch_size=256)
    print(f"digits: {len(x_train)} training and {len(x_test)} held-out images; "
          f"{'hybridized' if not args.no_hybridize else 'eager'} CNN")
    est = estimator.Estimator(net, loss_fn, trainer=trainer)
    history = est.fit(train, val_data=held_out, epochs=args.epochs)
    final = history.epoch["validation accuracy"][-1]
    print(f"final held-out accuracy: {final:.4f}")
    return final


if __name__ == "__main__":
    main()
