"""examples/finetune_from_torch.py runs end to end: torchvision weights (random or from a saved file) reach the
zoo's ResNet-18, the new output layer trains and its loss decreases, the loaded layers stay as loaded."""
import importlib.util
import os

import numpy as np
import torch
import torchvision

EXAMPLE = os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, "examples", "finetune_from_torch.py")


def _load():
    spec = importlib.util.spec_from_file_location("finetune_from_torch", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_finetune_from_saved_torchvision_weights(tmp_path, capsys):
    torch.manual_seed(5)
    weights = torchvision.models.resnet18().state_dict()
    path = tmp_path / "resnet18.pth"
    torch.save(weights, path)
    result = _load().main(["--quick", "--weights", str(path)])
    assert len(result["loss"]) == 2 and result["loss"][-1] < result["loss"][0]
    net = result["net"]
    np.testing.assert_array_equal(np.asarray(net.features[0].weight.data()), weights["conv1.weight"].numpy())
    np.testing.assert_array_equal(np.asarray(net.features[7][1].body[4].running_var.data()),
                                  weights["layer4.1.bn2.running_var"].numpy())
    assert net.output.weight.shape == (4, 512)
    out = capsys.readouterr().out
    assert "loaded 102 parameters from torchvision's resnet18" in out and "training loss" in out


def test_textures_are_normalised_and_balanced():
    images, labels = _load().textures(40, 16, np.random.default_rng(0))
    assert images.shape == (40, 3, 16, 16) and images.dtype == np.float32
    assert np.bincount(labels).tolist() == [10, 10, 10, 10]
    assert -2.2 < images.min() and images.max() < 2.7  # ImageNet-normalised values of [0, 1] pixels
