"""Train a small CNN to tell generated shapes apart, and save the held-out confusion matrix as a PNG.

    pip install -e '.[examples,plot]' && python examples/train_cnn_confusion.py --out confusion.png

The images are drawn here with NumPy: a circle, a square, a triangle or a cross of random size, position
and brightness on a noisy 16x16 background, so nothing is downloaded. hybrid.estimator's fit trains the
hybridized CNN; the trained network then classifies the held-out images, and the counts of (true class,
predicted class) pairs are drawn with matplotlib. ``--quick`` trains on fewer images for three epochs.
"""
from __future__ import annotations

import argparse
import sys

import numpy as np

import hybrid
from hybrid import data, estimator, loss, nn

CLASSES = ("circle", "square", "triangle", "cross")


def draw_shapes(n: int, size: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """``n`` images ``(n, 1, size, size)`` float32 and their labels ``(n,)`` int32 (indices into CLASSES)."""
    labels = rng.integers(0, len(CLASSES), n).astype(np.int32)
    radius = rng.uniform(0.22, 0.4, (n, 1, 1)) * size
    cx = rng.uniform(radius + 0.5, size - radius - 0.5)
    cy = rng.uniform(radius + 0.5, size - radius - 0.5)
    y, x = np.mgrid[0:size, 0:size] + 0.5
    dx, dy = np.abs(x - cx), np.abs(y - cy)
    from_top = y - (cy - radius)  # a triangle with its apex up, as wide at the base as it is tall
    masks = np.stack([
        dx ** 2 + dy ** 2 <= radius ** 2,
        np.maximum(dx, dy) <= 0.8 * radius,
        (dy <= radius) & (dx <= from_top / 2),
        ((dx <= 0.3 * radius) & (dy <= radius)) | ((dy <= 0.3 * radius) & (dx <= radius)),
    ])[labels, np.arange(n)]
    brightness = rng.uniform(0.6, 1.0, (n, 1, 1))
    images = masks * brightness + rng.normal(0.0, 0.15, (n, size, size))
    return images[:, None].astype(np.float32), labels


def build_net(classes: int) -> nn.HybridSequential:
    net = nn.HybridSequential()
    net.add(nn.Conv2D(16, 3, padding=1), nn.BatchNorm(), nn.Activation("relu"), nn.MaxPool2D(2),
            nn.Conv2D(32, 3, padding=1), nn.BatchNorm(), nn.Activation("relu"), nn.MaxPool2D(2),
            nn.Flatten(), nn.Dense(64, activation="relu"), nn.Dense(classes))
    return net


def confusion_matrix(labels: np.ndarray, predicted: np.ndarray, classes: int) -> np.ndarray:
    """``counts[i, j]``: how many images of class i were predicted as class j."""
    counts = np.zeros((classes, classes), np.int64)
    np.add.at(counts, (labels, predicted), 1)
    return counts


def save_confusion_png(counts: np.ndarray, names: tuple[str, ...], path: str) -> None:
    try:
        import matplotlib
        matplotlib.use("Agg", force=False)
        import matplotlib.pyplot as plt
    except ImportError:
        sys.exit("This example needs matplotlib: pip install -e '.[plot]'")
    accuracy = np.trace(counts) / counts.sum()
    figure, ax = plt.subplots(figsize=(4.8, 4.2))
    image = ax.imshow(counts, cmap="Blues")
    for (i, j), value in np.ndenumerate(counts):
        ax.text(j, i, str(value), ha="center", va="center",
                color="white" if value > counts.max() / 2 else "black")
    ax.set_xticks(range(len(names)), names)
    ax.set_yticks(range(len(names)), names)
    ax.set_xlabel("predicted")
    ax.set_ylabel("true")
    ax.set_title(f"held-out images: accuracy {accuracy:.3f}")
    figure.colorbar(image, ax=ax)
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--train", type=int, default=3000, help="training images")
    parser.add_argument("--test", type=int, default=800, help="held-out images")
    parser.add_argument("--epochs", type=int, default=8)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--lr", type=float, default=0.003)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default="confusion.png", help="where to save the confusion matrix (PNG)")
    parser.add_argument("--quick", action="store_true", help="600 training images, 3 epochs of batches of 32")
    args = parser.parse_args(argv)
    if args.quick:
        args.train, args.test, args.epochs, args.batch_size = 600, 200, 3, 32

    hybrid.random.seed(args.seed)
    rng = np.random.default_rng(args.seed)
    x_train, y_train = draw_shapes(args.train, 16, rng)
    x_test, y_test = draw_shapes(args.test, 16, rng)
    net = build_net(len(CLASSES))
    net.initialize(hybrid.init.Xavier())
    loss_fn = loss.SoftmaxCrossEntropyLoss()
    net.hybridize()
    loss_fn.hybridize()
    trainer = hybrid.Trainer(net.collect_params(), "adam", {"learning_rate": args.lr})
    train = data.DataLoader(data.ArrayDataset(x_train, y_train), batch_size=args.batch_size, shuffle=True)
    held_out = data.DataLoader(data.ArrayDataset(x_test, y_test), batch_size=256)
    print(f"shapes {CLASSES}: {len(x_train)} training and {len(x_test)} held-out 16x16 images")
    history = estimator.Estimator(net, loss_fn, trainer=trainer).fit(train, val_data=held_out,
                                                                     epochs=args.epochs)

    predicted = np.concatenate([np.asarray(net(x)).argmax(axis=1) for x, _ in held_out])
    counts = confusion_matrix(y_test, predicted, len(CLASSES))
    save_confusion_png(counts, CLASSES, args.out)
    accuracy = float(np.trace(counts) / counts.sum())
    print(f"held-out accuracy {accuracy:.4f}; confusion matrix (rows: true, columns: predicted):")
    for name, row in zip(CLASSES, counts):
        print(f"  {name:>8}: " + " ".join(f"{v:4d}" for v in row))
    print(f"saved {args.out}")
    return {"confusion": counts, "accuracy": accuracy, "history": history, "path": args.out}


if __name__ == "__main__":
    main()
