import gzip
import os
import struct

import numpy as np
import pytest

import hybrid
from hybrid import data
from hybrid.data.vision import CIFAR10, CIFAR100, MNIST, FashionMNIST, transforms as T

from conftest import assert_close


# ---------------------------------------------------------------------------------------------
# Transforms

def test_to_tensor_and_normalize(rng):
    img = rng.integers(0, 256, (4, 5, 3), dtype=np.uint8)
    tensor = T.ToTensor()(img)
    assert tensor.shape == (3, 4, 5) and tensor.dtype == np.float32
    assert_close(tensor[1, 2, 3], img[2, 3, 1] / 255.0)
    assert_close(T.ToTensor()(img[None]), tensor[None])
    mean, std = (0.1, 0.2, 0.3), (0.5, 0.25, 2.0)
    out = T.Compose([T.ToTensor(), T.Normalize(mean, std)])(img)
    for c in range(3):
        assert_close(out[c], (img[:, :, c] / 255.0 - mean[c]) / std[c])
    with pytest.raises(ValueError, match="mean has 2 values but the input has 3 channels"):
        T.Normalize((0.1, 0.2))(tensor)
    with pytest.raises(ValueError, match=r"ToTensor: expected an \(H, W, C\) image"):
        T.ToTensor()(img[:, :, 0])


def test_cast():
    out = T.Cast("float16")(np.array([[1, 2]], np.uint8))
    assert out.dtype == np.float16 and out.tolist() == [[1.0, 2.0]]


def test_resize_nearest_integer_upsampling_repeats_pixels(rng):
    img = rng.integers(0, 256, (3, 4, 2), dtype=np.uint8)
    out = T.Resize((8, 6), interpolation=0)(img)  # size is (width, height)
    np.testing.assert_array_equal(out, np.repeat(np.repeat(img, 2, axis=0), 2, axis=1))
    # 3 -> 5 columns: source column floor(i * 3 / 5) = 0, 0, 1, 1, 2
    row = np.array([[10, 20, 30]], np.float32)
    np.testing.assert_array_equal(T.Resize((5, 1), interpolation="nearest")(row), [[10, 10, 20, 20, 30]])


def test_resize_bilinear_matches_hand_computed_values(rng):
    # 2 -> 4 columns: source x = (i + 0.5) / 2 - 0.5 = -0.25, 0.25, 0.75, 1.25, clamped to [0, 1]
    row = np.array([[0.0, 10.0]], np.float32)
    assert_close(T.Resize((4, 1))(row), [[0.0, 2.5, 7.5, 10.0]])
    # 3 -> 2 columns: source x = 0.25 and 1.75
    row3 = np.array([[4.0, 8.0, 16.0]], np.float32)
    assert_close(T.Resize((2, 1))(row3), [[4 * 0.75 + 8 * 0.25, 8 * 0.25 + 16 * 0.75]])
    # halving: every output pixel lies between four inputs, so it is their mean
    img = rng.random((6, 8, 3)).astype(np.float32)
    assert_close(T.Resize((4, 3))(img), img.reshape(3, 2, 4, 2, 3).mean(axis=(1, 3)))
    # integers are rounded and keep their dtype
    out = T.Resize((4, 1))(np.array([[0, 255]], np.uint8))
    assert out.dtype == np.uint8 and out.tolist() == [[0, 64, 191, 255]]


def test_resize_sizes_keep_ratio_and_batches(rng):
    img = rng.random((20, 40, 3)).astype(np.float32)
    assert T.Resize(10)(img).shape == (10, 10, 3)
    assert T.Resize(10, keep_ratio=True)(img).shape == (10, 20, 3)
    assert T.Resize(10, keep_ratio=True)(img.transpose(1, 0, 2)).shape == (20, 10, 3)
    batch = rng.random((2, 6, 8, 1)).astype(np.float32)
    out = T.Resize((4, 3))(batch)
    assert_close(out, batch.reshape(2, 3, 2, 4, 2, 1).mean(axis=(2, 4)))
    with pytest.raises(ValueError, match="interpolation must be 0 / 'nearest' or 1 / 'bilinear', got 3"):
        T.Resize(4, interpolation=3)
    with pytest.raises(ValueError, match="size must be a positive int or a pair"):
        T.Resize((4, 0))


def test_center_crop(rng):
    img = rng.integers(0, 256, (10, 8, 3), dtype=np.uint8)
    np.testing.assert_array_equal(T.CenterCrop((4, 6))(img), img[2:8, 2:6])
    small = rng.random((4, 4, 1)).astype(np.float32)
    up = T.CenterCrop(8, interpolation=0)(small)  # too small: the whole image is scaled up
    np.testing.assert_array_equal(up, np.repeat(np.repeat(small, 2, axis=0), 2, axis=1))


def test_random_crop_with_padding_takes_windows_of_the_padded_image(rng):
    img = rng.integers(1, 256, (4, 4, 2), dtype=np.uint8)
    padded = np.pad(img, ((1, 1), (1, 1), (0, 0)))
    crop = T.RandomCrop(4, pad=1)
    offsets = set()
    for _ in range(30):
        out = crop(img)
        matches = [(y, x) for y in range(3) for x in range(3) if np.array_equal(padded[y:y + 4, x:x + 4], out)]
        assert matches, "the crop is not a window of the padded image"
        offsets.add(matches[0])
    assert len(offsets) > 3
    hybrid.random.seed(5)
    first = [crop(img) for _ in range(3)]
    hybrid.random.seed(5)
    assert all(np.array_equal(a, crop(img)) for a in first)
    with pytest.raises(ValueError, match="pad must be a non-negative int"):
        T.RandomCrop(4, pad=(1, 2))
    # uneven padding, (top, bottom, left, right): a 2x3 image padded to 3x6, whose only 3x6 window is all of it
    small = np.ones((2, 3), np.float32)
    expected = np.pad(small, ((1, 0), (0, 3)), constant_values=-1)
    np.testing.assert_array_equal(T.RandomCrop((6, 3), pad=(1, 0, 0, 3), pad_value=-1)(small), expected)
    np.testing.assert_array_equal(T.RandomCrop((6, 3), pad=((1, 0), (0, 3)), pad_value=-1)(small), expected)


def test_random_resized_crop(rng):
    img = rng.random((8, 8, 3)).astype(np.float32)
    whole = T.RandomResizedCrop(4, scale=(1.0, 1.0), ratio=(1.0, 1.0))(img)
    assert_close(whole, img.reshape(4, 2, 4, 2, 3).mean(axis=(1, 3)))
    # a 2:1 window of the full area never fits a square image: fall back to the centre crop
    fallback = T.RandomResizedCrop(4, scale=(1.0, 1.0), ratio=(2.0, 2.0))(img)
    np.testing.assert_array_equal(fallback, img[2:6, 2:6])
    outs = [T.RandomResizedCrop((5, 3), scale=(0.2, 0.6))(img) for _ in range(5)]
    assert all(o.shape == (3, 5, 3) for o in outs)
    assert not np.allclose(outs[0], outs[1])


def test_random_flip_left_right(rng):
    img = rng.random((3, 4, 2)).astype(np.float32)
    flip = T.RandomFlipLeftRight()
    outs = [flip(img) for _ in range(40)]
    flipped = [np.array_equal(o, img[:, ::-1]) for o in outs]
    assert all(f or np.array_equal(o, img) for f, o in zip(flipped, outs))
    assert 5 < sum(flipped) < 35
    np.testing.assert_array_equal(T.RandomFlipLeftRight(p=1.0)(img), img[:, ::-1])


# ---------------------------------------------------------------------------------------------
# Dataset files, written in their published formats

def write_idx(path, array, gz):
    header = struct.pack(">BBBB", 0, 0, 0x08, array.ndim) + struct.pack(f">{array.ndim}I", *array.shape)
    payload = header + array.astype(np.uint8).tobytes()
    with (gzip.open(path, "wb") if gz else open(path, "wb")) as f:
        f.write(payload)


def write_mnist(root, prefix, images, labels, gz):
    suffix = ".gz" if gz else ""
    write_idx(os.path.join(root, f"{prefix}-images-idx3-ubyte{suffix}"), images, gz)
    write_idx(os.path.join(root, f"{prefix}-labels-idx1-ubyte{suffix}"), labels, gz)


def cifar_records(images, *label_columns):
    """One record per image: the label bytes, then the R, G and B planes row by row."""
    out = bytearray()
    for i, img in enumerate(images):
        out += bytes(int(col[i]) for col in label_columns)
        for channel in range(3):
            out += img[:, :, channel].tobytes()
    return bytes(out)


def test_mnist_reads_gzip_and_raw_idx(tmp_path, rng):
    train_x, train_y = rng.integers(0, 256, (5, 28, 28), dtype=np.uint8), np.array([3, 1, 4, 1, 5], np.uint8)
    test_x, test_y = rng.integers(0, 256, (2, 28, 28), dtype=np.uint8), np.array([9, 2], np.uint8)
    write_mnist(tmp_path, "train", train_x, train_y, gz=True)
    write_mnist(tmp_path, "t10k", test_x, test_y, gz=False)
    train = MNIST(root=str(tmp_path))
    assert len(train) == 5
    image, label = train[2]
    assert image.shape == (28, 28, 1) and image.dtype == np.uint8
    np.testing.assert_array_equal(image[:, :, 0], train_x[2])
    assert label == 4 and label.dtype == np.int32
    test = FashionMNIST(root=str(tmp_path), train=False, transform=lambda x, y: (x.sum(), y + 100))
    assert len(test) == 2 and test[1] == (test_x[1].sum(), 102)


def test_mnist_missing_and_corrupt_files(tmp_path, rng):
    with pytest.raises(FileNotFoundError, match=r"train-images-idx3-ubyte.*not download") as info:
        MNIST(root=str(tmp_path))
    assert str(tmp_path) in str(info.value)
    images, labels = rng.integers(0, 256, (3, 28, 28), dtype=np.uint8), np.arange(3, dtype=np.uint8)
    write_mnist(tmp_path, "train", images, labels, gz=False)
    image_file = tmp_path / "train-images-idx3-ubyte"
    image_file.write_bytes(image_file.read_bytes()[:-100])
    with pytest.raises(ValueError, match=r"truncated IDX file.*\(3, 28, 28\).*2252"):
        MNIST(root=str(tmp_path))
    write_idx(image_file, labels, gz=False)  # a 1-D file where images belong
    with pytest.raises(ValueError, match="magic number 0x00000801, expected 0x00000803"):
        MNIST(root=str(tmp_path))
    write_idx(image_file, images[:2], gz=False)
    with pytest.raises(ValueError, match="holds 2 images but .* holds 3 labels"):
        MNIST(root=str(tmp_path))
    image_file.unlink()
    gz_file = tmp_path / "train-images-idx3-ubyte.gz"
    write_idx(gz_file, images, gz=True)
    gz_file.write_bytes(gz_file.read_bytes()[:-20])
    with pytest.raises(ValueError, match="corrupt or truncated gzip file"):
        MNIST(root=str(tmp_path))


def test_cifar10_reads_binary_batches(tmp_path, rng):
    folder = tmp_path / "cifar-10-batches-bin"
    folder.mkdir()
    images = rng.integers(0, 256, (11, 32, 32, 3), dtype=np.uint8)
    labels = rng.integers(0, 10, 11)
    for b in range(5):
        (folder / f"data_batch_{b + 1}.bin").write_bytes(cifar_records(images[2 * b:2 * b + 2], labels[2 * b:2 * b + 2]))
    (tmp_path / "test_batch.bin").write_bytes(cifar_records(images[10:], labels[10:]))
    train = CIFAR10(root=str(tmp_path))
    assert len(train) == 10
    for i in (0, 7):
        image, label = train[i]
        assert image.shape == (32, 32, 3) and image.dtype == np.uint8
        np.testing.assert_array_equal(image, images[i])
        assert label == labels[i]
    test = CIFAR10(root=str(tmp_path), train=False)
    np.testing.assert_array_equal(test[0][0], images[10])


def test_cifar100_labels_and_corrupt_files(tmp_path, rng):
    images = rng.integers(0, 256, (3, 32, 32, 3), dtype=np.uint8)
    coarse, fine = np.array([19, 0, 7]), np.array([99, 3, 42])
    (tmp_path / "test.bin").write_bytes(cifar_records(images, coarse, fine))
    assert [CIFAR100(str(tmp_path), train=False)[i][1] for i in range(3)] == [19, 0, 7]
    fine_ds = CIFAR100(str(tmp_path), fine_label=True, train=False)
    assert [fine_ds[i][1] for i in range(3)] == [99, 3, 42]
    np.testing.assert_array_equal(fine_ds[2][0], images[2])
    with pytest.raises(FileNotFoundError, match=r"\['train.bin', 'cifar-100-binary/train.bin'\]"):
        CIFAR100(str(tmp_path))
    (tmp_path / "train.bin").write_bytes(cifar_records(images, coarse, fine)[:-5])
    with pytest.raises(ValueError, match="not a whole number of 3074-byte records"):
        CIFAR100(str(tmp_path))
    (tmp_path / "train.bin").write_bytes(cifar_records(images, fine, fine))
    with pytest.raises(ValueError, match="record 0 has label 99, but labels must be below 20"):
        CIFAR100(str(tmp_path))


def test_vision_pipeline_in_worker_processes(tmp_path, rng):
    write_mnist(tmp_path, "train", rng.integers(0, 256, (6, 28, 28), dtype=np.uint8), np.arange(6, dtype=np.uint8),
                gz=True)
    augment = T.Compose([T.RandomResizedCrop(20), T.RandomFlipLeftRight(), T.ToTensor(), T.Normalize(0.5, 0.25)])
    ds = MNIST(root=str(tmp_path)).transform_first(augment)

    def epoch(**kwargs):
        hybrid.random.seed(2)
        loader = data.DataLoader(ds, batch_size=4, **kwargs)
        try:
            return [(np.asarray(x), np.asarray(y)) for x, y in loader]
        finally:
            loader.close()

    expected = epoch()
    assert expected[0][0].shape == (4, 1, 20, 20) and expected[1][1].tolist() == [4, 5]
    for (x, y), (ex, ey) in zip(epoch(num_workers=2, timeout=30), expected):
        assert_close(x, ex)
        np.testing.assert_array_equal(y, ey)
