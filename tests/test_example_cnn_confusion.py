"""examples/train_cnn_confusion.py: a CNN trained with Estimator.fit on generated shapes, and its confusion
matrix saved as a PNG."""
import importlib.util
import os

import matplotlib.image
import numpy as np

EXAMPLE = os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, "examples", "train_cnn_confusion.py")


def _load():
    spec = importlib.util.spec_from_file_location("train_cnn_confusion", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_confusion_matrix_counts_pairs():
    counts = _load().confusion_matrix(np.array([0, 1, 1, 2, 2, 2]), np.array([0, 1, 2, 2, 2, 0]), 3)
    np.testing.assert_array_equal(counts, [[1, 0, 0], [0, 1, 1], [1, 0, 2]])


def test_train_cnn_confusion_quick(tmp_path, capsys):
    path = tmp_path / "confusion.png"
    result = _load().main(["--quick", "--out", str(path)])
    counts, history = result["confusion"], result["history"]
    assert counts.shape == (4, 4) and counts.sum() == 200  # every held-out image once
    # the matrix's accuracy is the one the Estimator's validation metric measured on the same images
    assert abs(result["accuracy"] - history.epoch["validation accuracy"][-1]) < 1e-6
    losses = history.epoch["training SoftmaxCrossEntropyLoss"]
    assert len(losses) == 3 and losses[-1] < losses[0]
    assert result["accuracy"] > 0.6  # chance is 0.25
    image = matplotlib.image.imread(path)
    assert image.ndim == 3 and image.shape[0] > 200 and image.shape[1] > 200 and image.std() > 0.05
    assert f"saved {path}" in capsys.readouterr().out
