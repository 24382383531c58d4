"""Fine-tune a torchvision ResNet-18 in hybrid: load its weights into the model zoo's resnet18_v1, give it a
new output layer, and train that layer on a small generated image set with Estimator.fit.

    python examples/finetune_from_torch.py                       # torchvision's architecture, random weights
    python examples/finetune_from_torch.py --weights resnet18.pth    # a saved torchvision state_dict
    python examples/finetune_from_torch.py --quick               # a few seconds: fewer, smaller images

Nothing is downloaded. For trained weights, save them once where the network is reachable, e.g.
``torch.save(torchvision.models.resnet18(weights="DEFAULT").state_dict(), "resnet18.pth")``, and pass the
file with --weights. Without it, the script uses torchvision's ResNet-18 with its random initialisation:
the weights are then not useful features, but every step is the same.

The data set has four classes of textures (horizontal stripes, vertical stripes, checkerboards, rings) with
random frequency, phase, colour and noise, normalised with ImageNet's channel statistics as torchvision's
weights expect. By default only the new output layer trains (the loaded layers keep their values, their
BatchNorm layers use their running statistics); --train-all fine-tunes every layer.
"""
from __future__ import annotations

import argparse

import numpy as np
import torch
import torchvision

import hybrid
from hybrid import autograd, data, estimator, loss, model_zoo, nn
from hybrid.interop.torch import load_torchvision

CLASSES = ("horizontal stripes", "vertical stripes", "checkerboard", "rings")
IMAGENET_MEAN = np.array([0.485, 0.456, 0.406], np.float32)
IMAGENET_STD = np.array([0.229, 0.224, 0.225], np.float32)


def textures(count: int, size: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """``count`` images ``(N, 3, size, size)`` float32, normalised, with labels ``(N,)`` int32 in 0-3."""
    labels = rng.permutation(np.arange(count) % len(CLASSES)).astype(np.int32)
    y, x = np.mgrid[0:size, 0:size] / size
    images = np.empty((count, 3, size, size), np.float32)
    for i, label in enumerate(labels):
        frequency, phase = rng.uniform(3, 6), rng.uniform(0, 2 * np.pi)
        if label == 0:
            pattern = np.sin(2 * np.pi * frequency * y + phase)
        elif label == 1:
            pattern = np.sin(2 * np.pi * frequency * x + phase)
        elif label == 2:
            pattern = np.sign(np.sin(2 * np.pi * frequency * x + phase) * np.sin(2 * np.pi * frequency * y))
        else:
            cy, cx = rng.uniform(0.3, 0.7, size=2)
            pattern = np.sin(2 * np.pi * frequency * np.hypot(y - cy, x - cx) + phase)
        colour = rng.uniform(0.3, 0.7, size=3)[:, None, None]
        image = colour + 0.25 * pattern + rng.normal(0, 0.05, (3, size, size))
        images[i] = (np.clip(image, 0, 1) - IMAGENET_MEAN[:, None, None]) / IMAGENET_STD[:, None, None]
    return images, labels


def torchvision_weights(path: str | None) -> dict:
    """The state_dict in ``path`` (saved with ``torch.save``), else a fresh torchvision ResNet-18's."""
    if path is not None:
        return torch.load(path, map_location="cpu", weights_only=True)
    torch.manual_seed(0)
    return torchvision.models.resnet18().state_dict()


def build(weights: dict, classes: int, train_all: bool) -> hybrid.HybridBlock:
    """The zoo's ResNet-18 with ``weights`` loaded and a new ``Dense(classes)`` output layer."""
    net = model_zoo.resnet18_v1()
    loaded = load_torchvision(net, weights, "resnet18")
    print(f"loaded {len(loaded)} parameters from torchvision's resnet18 (e.g. {loaded['features.0.weight']} -> "
          f"features.0.weight)")
    net.output = nn.Dense(classes, in_units=512)
    net.output.initialize(hybrid.init.Xavier())
    if not train_all:
        net.features.collect_params().setattr("grad_req", "null")
    return net


class FrozenFeatures(estimator.BatchProcessor):
    """Runs the loaded layers in predict mode (BatchNorm with its running statistics) and only the new
    output layer in training mode, the usual way to train a head on a pretrained network."""

    def fit_batch(self, est, train_batch, batch_axis=0):
        images, labels = train_batch
        with autograd.record():
            with autograd.predict_mode():
                features = est.net.features(images)
            predictions = est.net.output(features)
            losses = est.loss(predictions, labels)
        autograd.backward(losses)
        return [images], [labels], [predictions], [losses]


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--weights", help="a torchvision ResNet-18 state_dict saved with torch.save")
    parser.add_argument("--train-all", action="store_true", help="fine-tune every layer, not only the output")
    parser.add_argument("--images", type=int, default=512, help="generated training images")
    parser.add_argument("--size", type=int, default=64, help="image height and width")
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--lr", type=float, default=0.01)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--quick", action="store_true", help="a smoke run: 64 images of 32x32, 2 epochs")
    args = parser.parse_args(argv)
    if args.quick:
        args.images, args.size, args.epochs, args.batch_size = 64, 32, 2, 16
    hybrid.random.seed(args.seed)
    rng = np.random.default_rng(args.seed)
    images, labels = textures(args.images, args.size, rng)
    loader = data.DataLoader(data.ArrayDataset(images, labels), batch_size=args.batch_size, shuffle=True,
                             last_batch="discard")

    net = build(torchvision_weights(args.weights), len(CLASSES), args.train_all)
    net.hybridize()
    trainer = hybrid.Trainer(net.collect_params(), "sgd", {"learning_rate": args.lr, "momentum": 0.9})
    processor = None if args.train_all else FrozenFeatures()
    est = estimator.Estimator(net, loss.SoftmaxCrossEntropyLoss(), trainer=trainer, batch_processor=processor)
    history = est.fit(loader, epochs=args.epochs)
    losses = history.epoch["training SoftmaxCrossEntropyLoss"]
    accuracy = history.epoch["training accuracy"]
    print(f"training loss {losses[0]:.3f} -> {losses[-1]:.3f}, accuracy {accuracy[-1]:.3f}")
    return {"loss": losses, "accuracy": accuracy, "net": net}


if __name__ == "__main__":
    main()
