"""``mx.io.ImageRecordIter`` against MXNet 1.9.1: batches, labels and pads, epoch after epoch, for resizes,
normalisation, dtypes, parts, shuffles and the last-batch modes; then random augmentation (shapes, values
taken from the images, seeds) and the errors bad input gets.

The scenarios are ``fixtures/mxnet_image_record/cases.py``; MXNet's batches and the record files it wrote
were saved by its ``make_fixtures.py``. The fixtures keep each record's image once (keyed by its label, unique
per record), so a batch is checked row by row through its labels.

Pixels are MXNet's exactly, except where OpenCV's bicubic resize runs (``inter_method=2``, and 9 when an
image grows): MXNet links OpenCV 3.4.2, whose bicubic resize of uint8 images rounds differently from OpenCV
4.x/5.x (measured: OpenCV 4.8.1 and 5.1.0 agree with each other; against MXNet, 161 of 6000 values differ in
``resize_cubic``'s first epoch and 21 of 6000 in ``resize_auto``'s, each by 1).
"""
import json
import os
import re
import shutil

import numpy as np
import pytest

import hybrid.mxnet as mx
from hybrid.recordio import RecordIOError
from helpers import fixture_module

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", "mxnet_image_record")
cases = fixture_module("mxnet_image_record")

ARRAYS = np.load(os.path.join(HERE, "results.npz"))
with open(os.path.join(HERE, "results.json")) as f:
    VALUES = json.load(f)

BICUBIC = {"resize_cubic", "resize_auto"}     # at most 1 apart: OpenCV 3.4.2's bicubic resize (see above)
REC, IDX = os.path.join(HERE, "images.rec"), os.path.join(HERE, "images.idx")


def _expected_images(case, prefix, label):
    """MXNet's image for each row of ``label`` (found by the row's first label)."""
    first = label.reshape(label.shape[0], -1)[:, 0]
    keys = ARRAYS[f"{case}/{prefix}image_labels"]
    at = np.searchsorted(keys, first)
    assert np.all(at < len(keys)) and np.array_equal(keys[at], first), (case, prefix, first)
    return ARRAYS[f"{case}/{prefix}images"][at]


@pytest.mark.parametrize("case", sorted(cases.CASES))
def test_case_gives_mxnets_batches(case, tmp_path):
    results = cases.CASES[case](mx, HERE, str(tmp_path))
    expected_names = {re.sub(r"(p\d_)?image(_label)?s$", "", k.split("/", 1)[1])
                      for k in list(ARRAYS.files) + list(VALUES) if k.startswith(case + "/")}
    names = {k for k in results if not re.fullmatch(r"(p\d_)?e\d_data", k)}
    assert names | {""} == expected_names | {""}
    for name, value in results.items():
        key = f"{case}/{name}"
        if re.fullmatch(r"(p\d_)?e\d_data", name):
            label = results[name.replace("_data", "_label")]
            expected = _expected_images(case, name[:-len("e0_data")], label).astype(np.float32)
            assert value.shape == expected.shape, (key, value.shape, expected.shape)
            if case in BICUBIC:
                difference = np.abs(value.astype(np.float32) - expected)
                assert difference.max() <= 1 and np.mean(difference > 0) < 0.05, (key, difference.max())
            else:
                np.testing.assert_array_equal(value.astype(np.float32), expected, err_msg=key)
        elif name.endswith("_pads"):
            # the last batch's pad is MXNet's; MXNet reports a stale pad on some full batches (its recycled
            # batch buffers keep the count; which ones changes from run to run), the full batches here pad 0
            assert len(value) == len(VALUES[key]) and value[-1] == VALUES[key][-1], (key, value, VALUES[key])
            assert not any(value[:-1]), (key, value)
        elif key in ARRAYS.files:
            np.testing.assert_array_equal(value, ARRAYS[key], err_msg=key)
        else:
            assert value == VALUES[key], (key, value, VALUES[key])


def test_batches_are_ndarrays_with_mxnets_descriptions():
    it = mx.io.ImageRecordIter(path_imgrec=REC, path_imgidx=IDX, data_shape=(3, 8, 10), batch_size=4,
                               verbose=False)
    assert isinstance(it, mx.io.DataIter)
    batch = it.next()
    assert type(batch.data[0]) is mx.nd.NDArray and type(batch.label[0]) is mx.nd.NDArray
    assert batch.data[0].shape == (4, 3, 8, 10) and batch.data[0].dtype == np.float32
    assert it.provide_data[0].name == "data" and it.provide_data[0].shape == (4, 3, 8, 10)
    assert it.provide_label[0].name == "softmax_label" and it.provide_label[0].shape == (4,)
    np.testing.assert_array_equal(batch.index, [0, 1, 2, 3])       # the records' ids (MXNet gives zeros)
    assert it.getpad() == 0 and it.batch_size == 4


def _pixels(index):
    """Record ``index`` of images.rec decoded as MXNet does, (H, W, 3) RGB."""
    import cv2
    rec = mx.recordio.MXIndexedRecordIO(IDX, REC, "r")
    header, payload = mx.recordio.unpack(rec.read_idx(index))
    rec.close()
    img = cv2.imdecode(np.frombuffer(payload, np.uint8), cv2.IMREAD_COLOR)
    return int(header.id), img[:, :, ::-1]


def _windows(image, h, w):
    """Every h x w window of ``image`` (H, W, C) as (C, h, w), with their offsets."""
    rows, cols = image.shape[:2]
    return {(y, x): image[y:y + h, x:x + w].transpose(2, 0, 1) for y in range(rows - h + 1)
            for x in range(cols - w + 1)}


def _random_epochs(epochs=2, **kwargs):
    it = mx.io.ImageRecordIter(path_imgrec=REC, path_imgidx=IDX, data_shape=(3, 6, 7), batch_size=6, dtype="uint8",
                               verbose=False, **kwargs)
    out = []
    for epoch in range(epochs):
        if epoch:
            it.reset()
        out.append([(b.data[0].asnumpy(), b.label[0].asnumpy(), b.index.copy(), b.pad) for b in it])
    return out


def test_random_crop_and_mirror_take_windows_of_the_images():
    sources = dict(_pixels(i) for i in range(23))
    offsets, mirrored = set(), 0
    for batches in _random_epochs(rand_crop=True, rand_mirror=True, seed=1):
        for data, _, index, pad in batches:
            assert data.shape == (6, 3, 6, 7) and data.dtype == np.uint8
            for row in range(6 - pad):
                windows = _windows(sources[int(index[row])], 6, 7)
                plain = [at for at, w in windows.items() if np.array_equal(w, data[row])]
                flipped = [at for at, w in windows.items() if np.array_equal(w[:, :, ::-1], data[row])]
                assert plain or flipped, (index[row], "not a window of its image")
                offsets.update(plain or flipped)
                mirrored += bool(flipped and not plain)
    assert len(offsets) > 10 and mirrored > 5   # the crops move and about half the images are mirrored


def test_random_augmentation_is_reproducible_for_a_seed_whatever_the_threads():
    first = _random_epochs(rand_crop=True, rand_mirror=True, seed=4, preprocess_threads=1)
    again = _random_epochs(rand_crop=True, rand_mirror=True, seed=4, preprocess_threads=4, prefetch_buffer=1)
    other = _random_epochs(rand_crop=True, rand_mirror=True, seed=5)
    flat = [np.concatenate([b[0] for b in epoch]) for epoch in first]
    for epoch, epoch_again in zip(first, again):
        for (d1, l1, i1, p1), (d2, l2, i2, p2) in zip(epoch, epoch_again):
            np.testing.assert_array_equal(d1, d2)
            np.testing.assert_array_equal(l1, l2)
            np.testing.assert_array_equal(i1, i2)
            assert p1 == p2
    assert not np.array_equal(flat[0], np.concatenate([b[0] for b in other[0]]))
    # the second epoch draws anew: the same records, other crops
    assert not np.array_equal(flat[0][6:12], flat[1][6:12]) or not np.array_equal(flat[0][:6], flat[1][:6])
    seeded = _random_epochs(rand_crop=True, seed=4, seed_aug=9)
    assert not np.array_equal(seeded[0][0][0], _random_epochs(rand_crop=True, seed=4)[0][0][0])


def test_shuffle_visits_every_record_once_per_pass_and_follows_the_seed():
    order = [int(i) for b in _random_epochs(epochs=1, shuffle=True, seed=2)[0] for i in b[2]]
    assert sorted(order[:23]) == list(range(23)) and order[:23] != list(range(23))
    again = [int(i) for b in _random_epochs(epochs=1, shuffle=True, seed=2)[0] for i in b[2]]
    other = [int(i) for b in _random_epochs(epochs=1, shuffle=True, seed=3)[0] for i in b[2]]
    assert order == again and order != other


@pytest.mark.parametrize("kwargs", [
    {"random_resized_crop": True, "min_random_area": 0.3, "max_random_area": 1.0, "min_aspect_ratio": 0.75,
     "max_aspect_ratio": 1.33, "inter_method": 10},
    {"max_rotate_angle": 20, "max_shear_ratio": 0.1, "min_random_scale": 0.8, "max_random_scale": 1.3,
     "max_aspect_ratio": 0.2, "fill_value": 0, "resize": 12},
    {"brightness": 0.3, "contrast": 0.3, "saturation": 0.3, "random_h": 10, "random_s": 20, "random_l": 20,
     "pca_noise": 0.1},
])
def test_other_random_augmenters_give_images_of_data_shape(kwargs):
    plain = _random_epochs(epochs=1)[0]
    augmented = _random_epochs(epochs=1, seed=3, **kwargs)[0]
    assert [b[0].shape for b in augmented] == [b[0].shape for b in plain]
    assert [b[3] for b in augmented] == [b[3] for b in plain]
    assert not np.array_equal(np.concatenate([b[0] for b in augmented]), np.concatenate([b[0] for b in plain]))
    np.testing.assert_array_equal(np.concatenate([b[1] for b in augmented]), np.concatenate([b[1] for b in plain]))


def test_normalisation_over_uint8_pixels_and_a_mean_image_file(tmp_path):
    common = dict(path_imgrec=REC, path_imgidx=IDX, data_shape=(3, 8, 10), batch_size=23, verbose=False)
    pixels = mx.io.ImageRecordIter(dtype="uint8", **common).next().data[0].asnumpy().astype(np.float32)
    mean = np.random.RandomState(0).uniform(0, 255, (3, 8, 10)).astype(np.float32)
    mx.nd.save(str(tmp_path / "mean.nd"), {"mean_img": mx.nd.array(mean)})
    data = mx.io.ImageRecordIter(mean_img=str(tmp_path / "mean.nd"), std_r=2.0, std_g=4.0, std_b=8.0, scale=0.5,
                                 **common).next().data[0].asnumpy()
    multiplier = (np.float32(0.5) / np.array([2, 4, 8], np.float32))[:, None, None]
    np.testing.assert_array_equal(data, (pixels - mean) * multiplier)
    mx.nd.save(str(tmp_path / "wrong.nd"), {"mean_img": mx.nd.zeros((3, 4, 4))})
    with pytest.raises(ValueError, match=r"mean_img .*wrong.nd' has shape \(3, 4, 4\), data_shape is \(3, 8, 10\)"):
        mx.io.ImageRecordIter(mean_img=str(tmp_path / "wrong.nd"), **common)


def test_labels_from_an_image_list(tmp_path):
    lst = tmp_path / "images.lst"
    lst.write_text("".join(f"{i}\t{10 + i}\t{-i}\timage{i}.jpg\n" for i in range(23)))
    it = mx.io.ImageRecordIter(path_imgrec=REC, path_imgidx=IDX, path_imglist=str(lst), label_width=2,
                               data_shape=(3, 8, 10), batch_size=5, verbose=False)
    label = it.next().label[0].asnumpy()
    np.testing.assert_array_equal(label, [[10 + i, -i] for i in range(5)])
    assert it.provide_label[0].shape == (5, 2)


def test_reset_in_the_middle_of_an_epoch_starts_again():
    it = mx.io.ImageRecordIter(path_imgrec=REC, data_shape=(3, 8, 10), batch_size=5, verbose=False,
                               prefetch_buffer=3)
    whole = [b.index.copy() for b in it]
    it.reset()
    it.next()
    it.next()
    it.reset()     # before the last batch wrapped round: from the first record again
    assert [int(i) for i in it.next().index] == [0, 1, 2, 3, 4]
    assert [int(i) for i in whole[-1]] == [20, 21, 22, 0, 1]


def test_a_batch_is_a_copy():
    it = mx.io.ImageRecordIter(path_imgrec=REC, data_shape=(3, 8, 10), batch_size=5, round_batch=False,
                               verbose=False)
    batches = list(it)
    values = [b.data[0].asnumpy() for b in batches]
    assert len({v.tobytes() for v in values}) == len(values)   # no batch overwritten by a later one
    batches[0].data[0][:] = -1
    np.testing.assert_array_equal(batches[1].data[0].asnumpy(), values[1])
    it.reset()
    np.testing.assert_array_equal(it.next().data[0].asnumpy(), values[0])
    np.testing.assert_array_equal(values[-1][3:], values[-2][3:])   # past the data: the previous batch's rows


def test_prefetching_iter_over_image_record_iters():
    common = dict(path_imgrec=REC, data_shape=(3, 8, 10), batch_size=5, verbose=False)
    alone = [b.data[0].asnumpy() for b in mx.io.ImageRecordIter(**common)]
    joined = mx.io.PrefetchingIter([mx.io.ImageRecordIter(**common), mx.io.ImageRecordIter(dtype="uint8", **common)])
    batches = list(joined)
    assert len(batches) == len(alone) and [b.pad for b in batches] == [0, 0, 0, 0, 2]
    for batch, expected in zip(batches, alone):
        np.testing.assert_array_equal(batch.data[0].asnumpy(), expected)
        np.testing.assert_array_equal(batch.data[1].asnumpy(), expected.astype(np.uint8))


def test_mxnets_other_names():
    common = dict(path_imgrec=REC, data_shape=(3, 8, 10), batch_size=2, verbose=False)
    assert mx.io.ImageRecordUInt8Iter(**common).next().data[0].dtype == np.uint8
    assert mx.io.ImageRecordUInt8Iter_v1(**common).next().data[0].dtype == np.uint8
    assert mx.io.ImageRecordInt8Iter(**common).next().data[0].dtype == np.int8
    assert mx.io.ImageRecordIter_v1(**common).next().data[0].dtype == np.float32


def test_errors_name_the_argument_or_the_file(tmp_path):
    common = dict(data_shape=(3, 8, 10), batch_size=2, verbose=False)
    with pytest.raises(TypeError, match=r"unknown argument\(s\) \['rand_crops'\]"):
        mx.io.ImageRecordIter(path_imgrec=REC, rand_crops=True, **common)
    with pytest.raises(TypeError, match="keyword arguments only"):
        mx.io.ImageRecordIter(REC, **common)
    with pytest.raises(TypeError, match="missing required argument 'batch_size'"):
        mx.io.ImageRecordIter(path_imgrec=REC, data_shape=(3, 8, 10))
    with pytest.raises(FileNotFoundError, match=r"path_imgrec '.*missing.rec': no such file"):
        mx.io.ImageRecordIter(path_imgrec=str(tmp_path / "missing.rec"), **common)
    with pytest.raises(ValueError, match=r"path_imgrec '.*' is a folder"):
        mx.io.ImageRecordIter(path_imgrec=str(tmp_path), **common)
    with pytest.raises(FileNotFoundError, match=r"path_imgidx '.*missing.idx'"):
        mx.io.ImageRecordIter(path_imgrec=REC, path_imgidx=str(tmp_path / "missing.idx"), **common)
    with pytest.raises(ValueError, match="dtype must be one of"):
        mx.io.ImageRecordIter(path_imgrec=REC, dtype="float16", **common)
    with pytest.raises(ValueError, match=r"data_shape must be \(channels, height, width\)"):
        mx.io.ImageRecordIter(path_imgrec=REC, data_shape=(8, 10), batch_size=2)
    with pytest.raises(ValueError, match="inter_method must be one of"):
        mx.io.ImageRecordIter(path_imgrec=REC, inter_method=5, **common)
    with pytest.raises(ValueError, match=r"part_index must be in \[0, num_parts\)"):
        mx.io.ImageRecordIter(path_imgrec=REC, num_parts=2, part_index=2, **common)
    with pytest.raises(ValueError, match="holds one label; label_width=2"):
        mx.io.ImageRecordIter(path_imgrec=REC, label_width=2, **common)
    with pytest.raises(ValueError, match="holds 2 labels but label_width is 3"):
        mx.io.ImageRecordIter(path_imgrec=os.path.join(HERE, "vector.rec"), label_width=3, **common)
    with pytest.raises(ValueError, match="batch_size=50 needs more images than the 23"):
        mx.io.ImageRecordIter(path_imgrec=REC, data_shape=(3, 8, 10), batch_size=50, verbose=False)
    damaged = tmp_path / "damaged.rec"
    raw = bytearray(open(REC, "rb").read())
    second = int(open(IDX).read().splitlines()[1].split()[1])
    raw[second:second + 4] = b"\0\0\0\0"     # the second record's magic word
    damaged.write_bytes(bytes(raw))
    with pytest.raises(RecordIOError, match="damaged.rec"):
        mx.io.ImageRecordIter(path_imgrec=str(damaged), **common)
    truncated = tmp_path / "truncated.rec"
    truncated.write_bytes(open(REC, "rb").read()[:5000])
    shutil.copy(IDX, tmp_path / "truncated.idx")
    with pytest.raises(RecordIOError, match="truncated.rec"):
        list(mx.io.ImageRecordIter(path_imgrec=str(truncated), path_imgidx=str(tmp_path / "truncated.idx"),
                                   **common))
    not_images = tmp_path / "text.rec"
    with mx.recordio.MXRecordIO(str(not_images), "w") as rec:
        rec.write(mx.recordio.pack(mx.recordio.IRHeader(0, 1.0, 0, 0), b"not an image"))
    with pytest.raises(RecordIOError, match=r"text.rec' does not decode"):
        mx.io.ImageRecordIter(path_imgrec=str(not_images), **common)
