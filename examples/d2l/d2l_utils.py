"""What the d2l chapters share (d2l's own ``d2l`` package, reduced): Fashion-MNIST loading with a
synthetic stand-in, and accuracy evaluation.

The MXNet edition of *Dive into Deep Learning* downloads Fashion-MNIST. hybrid downloads nothing, so
:func:`load_data_fashion_mnist` builds a synthetic Fashion-MNIST-like dataset by default: 28x28 grayscale
uint8 images in 10 classes, each class a clothing-like silhouette drawn shifted, with random brightness,
texture and noise, so that the task is learnable but not trivial. Pass ``root=`` the folder
holding the original Fashion-MNIST files (``train-images-idx3-ubyte[.gz]`` ...) to train on the real data.

The chapter scripts import this module from their own folder (``python examples/d2l/lenet.py`` puts
``examples/d2l`` on ``sys.path``).
"""
from __future__ import annotations

import time
from typing import Any, Iterable

import numpy as np

import hybrid
from hybrid import Trainer, autograd, data, init
from hybrid import loss as gloss
from hybrid.data.vision import transforms

TEXT_LABELS = ["t-shirt", "trouser", "pullover", "dress", "coat", "sandal", "shirt", "sneaker", "bag",
               "ankle boot"]


def get_fashion_mnist_labels(labels: Iterable[int]) -> list[str]:
    """Text labels of Fashion-MNIST class indices."""
    return [TEXT_LABELS[int(i)] for i in labels]


def _silhouettes(size: int = 28) -> np.ndarray:
    """Ten filled clothing-like shapes in Fashion-MNIST's class order, ``(10, size, size)`` in [0, 1]."""
    yy, xx = np.mgrid[0:size, 0:size].astype(np.float32) / (size - 1)  # rows and columns in [0, 1]

    def box(y0: float, y1: float, x0: float, x1: float) -> np.ndarray:
        return ((yy >= y0) & (yy <= y1) & (xx >= x0) & (xx <= x1)).astype(np.float32)

    shapes = [
        box(.2, .8, .3, .7) + box(.2, .4, .15, .85),                                  # t-shirt: short sleeves
        box(.15, .9, .3, .47) + box(.15, .9, .53, .7) + box(.15, .3, .3, .7),        # trouser: two legs
        box(.2, .8, .3, .7) + box(.2, .75, .12, .3) + box(.2, .75, .7, .88),         # pullover: long sleeves
        ((yy >= .15) & (yy <= .9) & (np.abs(xx - .5) <= .1 + .3 * (yy - .15))).astype(np.float32),  # dress
        box(.1, .9, .25, .75) + box(.1, .85, .1, .25) + box(.1, .85, .75, .9)
        - .7 * box(.1, .9, .48, .52),                                                 # coat: long, open front
        box(.6, .65, .1, .9) + box(.72, .77, .1, .9) + box(.84, .88, .1, .9),        # sandal: straps
        box(.15, .85, .3, .7) + box(.15, .6, .15, .3) + box(.15, .6, .7, .85)
        - .6 * box(.15, .3, .45, .55),                                                # shirt: collar
        box(.6, .8, .1, .9) * (xx + .3 >= yy),                                        # sneaker: a low wedge
        box(.35, .85, .2, .8) + box(.15, .35, .35, .4) + box(.15, .35, .6, .65)
        + box(.15, .2, .35, .65),                                                     # bag with a handle
        box(.2, .85, .5, .7) + box(.65, .85, .15, .7),                                # ankle boot: an L
    ]
    return np.clip(np.stack(shapes), 0, 1)


def synthetic_fashion_mnist(num_examples: int, seed: int = 0, size: int = 28) -> tuple[np.ndarray, np.ndarray]:
    """``num_examples`` synthetic images ``(N, size, size, 1)`` uint8 (Fashion-MNIST's layout) and int32
    labels, balanced over the 10 classes.

    Each image is its class silhouette (:func:`_silhouettes`) shifted by up to 3 pixels, with a random
    brightness in [0.5, 1], a multiplicative texture and additive Gaussian noise (standard deviation 0.1).
    Shirts, pullovers and coats look alike, as in the real data.
    """
    rng = np.random.default_rng(seed)
    shapes = _silhouettes(size)
    labels = rng.permutation(np.arange(num_examples) % len(shapes)).astype(np.int32)
    shifts = rng.integers(-3, 4, (num_examples, 2))
    images = np.stack([np.roll(shapes[y], tuple(s), axis=(0, 1)) for y, s in zip(labels, shifts)])
    images = images * rng.uniform(0.5, 1.0, (num_examples, 1, 1)) * rng.uniform(0.7, 1.0, images.shape)
    images = images + rng.normal(0, 0.1, images.shape)
    images = np.clip(images * 255, 0, 255).astype(np.uint8)
    return images[..., None], labels


def load_data_fashion_mnist(batch_size: int, resize: int | None = None, root: str | None = None,
                            num_train: int = 6000, num_test: int = 1000,
                            seed: int = 0) -> tuple[data.DataLoader, data.DataLoader]:
    """Training and test DataLoaders of ``(X, y)`` batches, ``X`` of shape ``(B, 1, H, W)`` float32 in
    [0, 1], as d2l's ``load_data_fashion_mnist``.

    With ``root`` (a folder holding the Fashion-MNIST files) the real data is read and ``num_train``,
    ``num_test`` and ``seed`` are ignored; without it a synthetic dataset of ``num_train`` and
    ``num_test`` images is built (:func:`synthetic_fashion_mnist`). ``resize`` resizes the images.
    The training loader drops the last incomplete batch (d2l keeps it): a batch of another size would
    compile a training step of its own.
    """
    trans = [transforms.ToTensor()]
    if resize:
        trans.insert(0, transforms.Resize(resize))
    trans = transforms.Compose(trans)
    if root is not None:
        mnist_train = data.vision.FashionMNIST(root, train=True)
        mnist_test = data.vision.FashionMNIST(root, train=False)
    else:
        mnist_train = data.ArrayDataset(*synthetic_fashion_mnist(num_train, seed=seed))
        mnist_test = data.ArrayDataset(*synthetic_fashion_mnist(num_test, seed=seed + 1))
    mnist_train, mnist_test = mnist_train.transform_first(trans), mnist_test.transform_first(trans)
    return (data.DataLoader(mnist_train, batch_size, shuffle=True, last_batch="discard"),
            data.DataLoader(mnist_test, batch_size, shuffle=False))


class Accumulator:
    """Sums over ``n`` variables (d2l's ``Accumulator``)."""

    def __init__(self, n: int):
        self.data = [0.0] * n

    def add(self, *args: Any) -> None:
        self.data = [a + float(b) for a, b in zip(self.data, args)]

    def reset(self) -> None:
        self.data = [0.0] * len(self.data)

    def __getitem__(self, idx: int) -> float:
        return self.data[idx]


def accuracy(y_hat: Any, y: Any) -> float:
    """The number of correct predictions (``y_hat``: scores ``(B, classes)`` or class indices)."""
    y_hat, y = np.asarray(y_hat), np.asarray(y)
    if y_hat.ndim > 1 and y_hat.shape[1] > 1:
        y_hat = y_hat.argmax(axis=1)
    return float((y_hat.astype(y.dtype) == y).sum())


def evaluate_accuracy(net: hybrid.Block, data_iter: Iterable) -> float:
    """The accuracy of ``net`` over a dataset, in predict mode (outside ``autograd.record``)."""
    metric = Accumulator(2)  # correct predictions, predictions
    for X, y in data_iter:
        metric.add(accuracy(net(X), y), y.size)
    return metric[0] / metric[1]


def train_epoch_ch3(net: hybrid.Block, train_iter: Iterable, loss: gloss.Loss, trainer: Trainer,
                    reduction: str = "sum") -> tuple[float, float, int]:
    """One training epoch; returns the training loss, the training accuracy and the examples seen.
    ``reduction='mean'`` trains on ``l.mean()`` with ``trainer.step(1)`` instead of on the per-example
    losses with ``trainer.step(batch_size)``: the two give the same gradients."""
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
    return metric[0] / metric[2], metric[1] / metric[2], int(metric[2])


def train_ch3(net: hybrid.Block, train_iter: Iterable, test_iter: Iterable, loss: gloss.Loss, num_epochs: int,
              trainer: Trainer, reduction: str = "sum") -> dict:
    """Train ``net`` for ``num_epochs``; returns the per-epoch training loss, training accuracy and test
    accuracy, and prints them with the throughput."""
    history = {"train_loss": [], "train_acc": [], "test_acc": []}
    num_examples, start = 0, time.perf_counter()
    for epoch in range(num_epochs):
        train_loss, train_acc, seen = train_epoch_ch3(net, train_iter, loss, trainer, reduction)
        num_examples += seen
        test_acc = evaluate_accuracy(net, test_iter)
        for key, value in zip(history, (train_loss, train_acc, test_acc)):
            history[key].append(value)
        print(f"epoch {epoch + 1}, loss {train_loss:.3f}, train acc {train_acc:.3f}, test acc {test_acc:.3f}")
    print(f"{num_examples / (time.perf_counter() - start):.1f} examples/sec")
    return history


def train_ch6(net: hybrid.Block, train_iter: Iterable, test_iter: Iterable, num_epochs: int, lr: float,
              initialize: bool = True) -> dict:
    """Train ``net`` with SGD and softmax cross-entropy; returns per-epoch metrics. With ``initialize`` the
    net is first re-initialised with Xavier, as d2l does; ``False`` keeps weights set by the caller."""
    if initialize:
        net.initialize(force_reinit=True, init=init.Xavier())
    trainer = Trainer(net.collect_params(), "sgd", {"learning_rate": lr})
    return train_ch3(net, train_iter, test_iter, gloss.SoftmaxCrossEntropyLoss(), num_epochs, trainer)
