"""Train a CIFAR ResNet (He et al., 2015) on CIFAR-10-format data, hybridized.

    python examples/train_cifar_resnet.py            # synthetic data, about two minutes on a laptop CPU
    python examples/train_cifar_resnet.py --quick    # a few seconds: a smaller network and data set
    python examples/train_cifar_resnet.py --data ~/data/cifar-10-batches-bin --epochs 30 --model resnet18_v1

Without --data, the script writes a small synthetic data set in the real CIFAR-10 binary format to a
temporary folder (10 classes: 5 kinds of texture -- horizontal or vertical stripes, checkerboards, rings,
cross-hatching -- in warm or cool colours, with random frequency, phase, brightness and noise) and trains on
it. With --data FOLDER it reads the real files (data_batch_1.bin ... data_batch_5.bin, test_batch.bin) from
FOLDER instead. Either way the images go through hybrid.data.vision.CIFAR10, the standard augmentation
(random crops of the padded image, horizontal flips) and a DataLoader, and hybrid.estimator's fit trains
on them: a progress bar (or progress lines), per-epoch loss and accuracy, and the held-out accuracy.
"""
from __future__ import annotations

import argparse
import os
import tempfile

import numpy as np

import hybrid
from hybrid import data, estimator, loss, lr_scheduler, model_zoo
from hybrid.data.vision import CIFAR10, transforms as T


def _texture(kind: int, rng: np.random.Generator) -> np.ndarray:
    """A (32, 32) pattern in [-1, 1] that a horizontal flip maps to the same kind of pattern."""
    y, x = np.mgrid[0:32, 0:32] / 32.0
    frequency, phase = rng.uniform(2.5, 4.5), rng.uniform(0, 2 * np.pi)
    wave = lambda u: np.sin(2 * np.pi * frequency * u + phase)  # noqa: E731
    if kind == 0:
        return wave(y)
    if kind == 1:
        return wave(x)
    if kind == 2:
        return np.sign(wave(x) * np.sin(2 * np.pi * frequency * y))
    if kind == 3:
        cy, cx = rng.uniform(0.3, 0.7, size=2)
        return wave(np.hypot(y - cy, x - cx))
    return 0.5 * (wave(x + y) + wave(x - y))


def synthetic_images(count: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """``count`` images (N, 32, 32, 3) uint8 with labels 0-9: texture ``label % 5`` in warm (labels 0-4) or
    cool (5-9) colours."""
    labels = np.arange(count) % 10
    rng.shuffle(labels)
    images = np.empty((count, 32, 32, 3), np.uint8)
    for i, label in enumerate(labels):
        colour = np.array([0.75, 0.45, 0.25]) if label < 5 else np.array([0.25, 0.45, 0.75])
        colour = colour + rng.uniform(-0.15, 0.15, 3)
        pattern = _texture(label % 5, rng)[..., None] * rng.uniform(0.2, 0.35)
        image = colour * rng.uniform(0.7, 1.1) + pattern + rng.normal(0, 0.08, (32, 32, 3))
        images[i] = np.clip(image * 255, 0, 255).astype(np.uint8)
    return images, labels.astype(np.uint8)


def write_cifar_batch(path: str, images: np.ndarray, labels: np.ndarray) -> None:
    """CIFAR-10 binary records: a label byte, then the red, green and blue 32x32 planes, row by row."""
    planes = images.transpose(0, 3, 1, 2).reshape(len(images), -1)
    with open(path, "wb") as f:
        f.write(np.concatenate([labels[:, None], planes], axis=1).tobytes())


def write_synthetic_cifar(folder: str, train_size: int, test_size: int, seed: int) -> None:
    """The five training batches and the test batch of a synthetic CIFAR-10 in ``folder``."""
    rng = np.random.default_rng(seed)
    images, labels = synthetic_images(train_size, rng)
    for i, part in enumerate(np.array_split(np.arange(train_size), 5), start=1):
        write_cifar_batch(os.path.join(folder, f"data_batch_{i}.bin"), images[part], labels[part])
    write_cifar_batch(os.path.join(folder, "test_batch.bin"), *synthetic_images(test_size, rng))


def channel_statistics(dataset: CIFAR10, limit: int = 5000) -> tuple[np.ndarray, np.ndarray]:
    """Per-channel mean and standard deviation of the images in [0, 1], from at most ``limit`` of them."""
    step = max(1, len(dataset) // limit)
    pixels = np.stack([dataset[i][0] for i in range(0, len(dataset), step)]).reshape(-1, 3)
    return pixels.mean(axis=0, dtype=np.float64) / 255.0, pixels.std(axis=0, dtype=np.float64) / 255.0


def build_model(name: str | None, depth: int) -> hybrid.HybridBlock:
    """``name`` from the model zoo (ImageNet ResNets get the CIFAR stem), else a CIFAR ResNet v1 of ``depth``."""
    if name is None:
        return model_zoo.get_cifar_resnet(1, depth, in_channels=3)
    extra = {"stem": "cifar"} if name.startswith("resnet") else {}
    return model_zoo.get_model(name, classes=10, in_channels=3, **extra)


def train(args: argparse.Namespace, root: str) -> dict:
    hybrid.random.seed(args.seed)
    train_set, test_set = CIFAR10(root, train=True), CIFAR10(root, train=False)
    mean, std = channel_statistics(train_set)
    normalise = [T.ToTensor(), T.Normalize(mean.tolist(), std.tolist())]
    augment = T.Compose([T.RandomCrop(32, pad=4), T.RandomFlipLeftRight()] + normalise)
    train_loader = data.DataLoader(train_set.transform_first(augment), batch_size=args.batch_size, shuffle=True,
                                   last_batch="discard", num_workers=args.workers)
    test_loader = data.DataLoader(test_set.transform_first(T.Compose(normalise)), batch_size=256,
                                  num_workers=args.workers)

    net = build_model(args.model, args.depth)
    net.initialize(hybrid.init.Xavier(magnitude=2))
    net.hybridize()
    loss_fn = loss.SoftmaxCrossEntropyLoss()
    loss_fn.hybridize()
    steps = args.epochs * len(train_loader)
    schedule = lr_scheduler.CosineScheduler(max_update=steps, warmup_steps=min(50, steps // 10))
    trainer = hybrid.Trainer(net.collect_params(), "sgd", {"learning_rate": args.lr, "momentum": 0.9,
                                                           "wd": args.wd, "lr_scheduler": schedule})
    print(f"{len(train_set)} training and {len(test_set)} held-out images, {type(net).__name__} with "
          f"{sum(p.data().size for p in net.collect_params().values() if p.grad_req != 'null'):,} trainable parameters")
    est = estimator.Estimator(net, loss_fn, trainer=trainer)  # metrics: accuracy and the loss
    fitted = est.fit(train_loader, val_data=test_loader, epochs=args.epochs)  # progress and a line per epoch
    history = {"loss": fitted.epoch["training SoftmaxCrossEntropyLoss"], "train_acc": fitted.epoch["training accuracy"],
               "test_acc": fitted.epoch["validation accuracy"]}
    print(f"final held-out accuracy: {history['test_acc'][-1]:.4f}")
    train_loader.close()
    test_loader.close()
    return history


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", help="folder with the real CIFAR-10 binary files (default: synthetic data)")
    parser.add_argument("--model", help="a model-zoo image classifier such as resnet18_v1, cifar_resnet56_v2, "
                                        "vgg11_bn or mobilenetv2_0.5 (default: a CIFAR ResNet v1 of --depth layers)")
    parser.add_argument("--depth", type=int, default=20, help="layers of the default CIFAR ResNet (6n + 2)")
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--lr", type=float, default=0.1)
    parser.add_argument("--wd", type=float, default=5e-4)
    parser.add_argument("--train-size", type=int, default=5000, help="synthetic training images")
    parser.add_argument("--test-size", type=int, default=1000, help="synthetic held-out images")
    parser.add_argument("--workers", type=int, default=1, help="DataLoader worker processes (0: none)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--quick", action="store_true",
                        help="a smoke run: ResNet-8, 320 training images, 2 epochs")
    args = parser.parse_args(argv)
    if args.quick:
        args.depth, args.epochs, args.train_size, args.test_size, args.batch_size = 8, 2, 320, 100, 32
    if args.data is not None:
        return train(args, os.path.expanduser(args.data))
    with tempfile.TemporaryDirectory(prefix="synthetic-cifar10-") as folder:
        write_synthetic_cifar(folder, args.train_size, args.test_size, args.seed)
        return train(args, folder)


if __name__ == "__main__":
    main()
