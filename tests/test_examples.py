"""The examples run end to end with their smallest settings, and their losses decrease."""
import importlib.util
import os

import numpy as np

from hybrid.data.vision import CIFAR10

EXAMPLES = os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, "examples")


def _load(name):
    spec = importlib.util.spec_from_file_location(name, os.path.join(EXAMPLES, f"{name}.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_synthetic_cifar_files_use_the_binary_format(tmp_path):
    example = _load("train_cifar_resnet")
    images = np.arange(2 * 32 * 32 * 3, dtype=np.uint8).reshape(2, 32, 32, 3)
    labels = np.array([3, 9], np.uint8)
    path = tmp_path / "test_batch.bin"
    example.write_cifar_batch(str(path), images, labels)
    raw = np.frombuffer(path.read_bytes(), np.uint8).reshape(2, 3073)
    np.testing.assert_array_equal(raw[:, 0], labels)
    np.testing.assert_array_equal(raw[1, 1:1025], images[1, :, :, 0].ravel())   # the red plane, row by row
    dataset = CIFAR10(str(tmp_path), train=False)
    np.testing.assert_array_equal(dataset[1][0], images[1])
    assert dataset[1][1] == 9


def test_train_cifar_resnet_quick(capsys):
    history = _load("train_cifar_resnet").main(["--quick", "--workers", "0"])
    assert len(history["loss"]) == 2 and history["loss"][-1] < history["loss"][0]
    assert 0.0 <= history["test_acc"][-1] <= 1.0
    assert "final held-out accuracy" in capsys.readouterr().out


def test_train_lm_quick(capsys):
    history = _load("train_lm").main(["--quick"])
    assert len(history["loss"]) == 2 and history["loss"][-1] < history["loss"][0]
    assert history["sample"].startswith("A HybridBlock ") and len(history["sample"]) == len("A HybridBlock ") + 60
    out = capsys.readouterr().out
    assert "perplexity" in out and "sample:" in out


def test_train_with_optax_quick(capsys):
    accuracy = _load("train_with_optax").main(["--quick"])
    out = capsys.readouterr().out
    losses = [float(line.split("loss ")[1]) for line in out.splitlines() if line.startswith("step ")]
    assert len(losses) == 3 and losses[-1] < losses[0]
    assert accuracy > 0.9  # chance is 1/3
    path = out.split("saved the trained state to ")[1].strip()
    import safetensors.numpy
    assert "1.running_mean" in safetensors.numpy.load_file(path)


def test_train_digits_reaches_high_accuracy(capsys):
    accuracy = _load("train_digits").main(["--epochs", "2"])
    assert accuracy > 0.9  # the README's first example: a CNN on scikit-learn's 8x8 digits
    assert "final held-out accuracy" in capsys.readouterr().out
