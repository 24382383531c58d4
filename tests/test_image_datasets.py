"""Image decoding, ImageFolderDataset and ImageListDataset on small PNG/JPEG files made with Pillow."""
import io
import json
import os
import pathlib
import sys

import numpy as np
import pytest

from PIL import Image

from hybrid.data.vision._decode import decode_file, decode_image

FIXTURES = pathlib.Path(__file__).parent / "fixtures"


def _pixels(h=6, w=8, seed=0):
    return np.random.default_rng(seed).integers(0, 256, (h, w, 3), dtype=np.uint8)


def _encoded(img: "Image.Image", fmt: str, **kw) -> bytes:
    out = io.BytesIO()
    img.save(out, fmt, **kw)
    return out.getvalue()


# ---------------------------------------------------------------- decoding

def test_png_rgb_decodes_exactly():
    a = _pixels()
    got = decode_image(_encoded(Image.fromarray(a), "PNG"))
    assert got.shape == (6, 8, 3) and got.dtype == np.uint8
    np.testing.assert_array_equal(got, a)
    assert not got.flags.writeable  # the decoder's buffer, not a copy (documented)


def test_png_grey_flag0_uses_libpng_weights():
    a = _pixels(seed=1)
    got = decode_image(_encoded(Image.fromarray(a), "PNG"), flag=0)
    assert got.shape == (6, 8, 1) and got.dtype == np.uint8
    r, g, b = (a[..., i].astype(np.int64) for i in range(3))
    want = (r * 9797 + g * 19234 + b * 3737) >> 15  # libpng's rgb_to_gray(0.299, 0.587), truncated, as OpenCV
    np.testing.assert_array_equal(got[..., 0], want)


@pytest.mark.parametrize("name", ["rgb.png", "rgba.png", "palette.png", "grey.png", "grey_alpha.png",
                                  "grey16.png", "rgb.jpg", "grey.jpg"])
@pytest.mark.parametrize("flag", [0, 1])
def test_pixels_equal_mxnet(name, flag):
    """mx.image.imread's pixels, saved by tests/fixtures/image_folder/make_decode_fixture.py (MXNet 1.9.1)."""
    want = np.load(FIXTURES / "image_folder" / "decode" / "mxnet_decoded.npz")[f"{name}:{flag}"]
    got = decode_file(FIXTURES / "image_folder" / "decode" / name, flag)
    assert got.dtype == np.uint8 and got.shape == want.shape
    np.testing.assert_array_equal(got, want)


def test_grey_png_repeated_to_three_channels_and_alpha_dropped():
    grey = _pixels()[..., 0]
    got = decode_image(_encoded(Image.fromarray(grey), "PNG"), flag=1)
    np.testing.assert_array_equal(got, np.repeat(grey[..., None], 3, axis=2))
    rgba = np.concatenate([_pixels(seed=2), np.full((6, 8, 1), 7, np.uint8)], axis=2)
    got = decode_image(_encoded(Image.fromarray(rgba), "PNG"))
    np.testing.assert_array_equal(got, rgba[..., :3])  # alpha dropped, not composited (as OpenCV)


def test_sixteen_bit_png_keeps_high_byte():
    a = (np.arange(48, dtype=np.uint16).reshape(6, 8) * 1361 + 5)
    got = decode_image(_encoded(Image.fromarray(a), "PNG"), flag=0)
    np.testing.assert_array_equal(got[..., 0], (a >> 8).astype(np.uint8))


def test_jpeg_matches_pillow_and_grey_is_libjpeg_luma():
    a = _pixels(16, 24, seed=3)
    buf = _encoded(Image.fromarray(a), "JPEG", quality=90)
    np.testing.assert_array_equal(decode_image(buf), np.asarray(Image.open(io.BytesIO(buf)).convert("RGB")))
    grey = decode_image(buf, flag=0)
    assert grey.shape == (16, 24, 1)
    # libjpeg's grey output is the decoded Y plane: within rounding of the colour decode's luma
    rgb = decode_image(buf).astype(np.float64)
    luma = rgb @ np.array([0.299, 0.587, 0.114])
    assert np.abs(grey[..., 0] - luma).max() <= 3


def test_exif_orientation_is_not_applied():
    a = _pixels()
    exif = Image.Exif()
    exif[0x0112] = 6  # "rotate 90 to display"
    got = decode_image(_encoded(Image.fromarray(a), "PNG", exif=exif.tobytes()))
    np.testing.assert_array_equal(got, a)  # as MXNet 1.9 and torchvision: stored layout


def test_decode_file_and_errors(tmp_path):
    a = _pixels()
    path = tmp_path / "cat.png"
    Image.fromarray(a).save(path)
    np.testing.assert_array_equal(decode_file(path), a)
    assert decode_file(str(path), 0).shape == (6, 8, 1)
    with pytest.raises(FileNotFoundError):
        decode_file(tmp_path / "missing.png")
    (tmp_path / "bad.jpg").write_bytes(b"not an image at all")
    with pytest.raises(ValueError, match=r"bad\.jpg: not a readable image"):
        decode_file(tmp_path / "bad.jpg")
    truncated = _encoded(Image.fromarray(_pixels(32, 32)), "JPEG")[:200]
    with pytest.raises(ValueError, match=r"rec 7: not a readable image \(200 bytes\)"):
        decode_image(truncated, 1, "rec 7")
    with pytest.raises(ValueError, match="flag must be 1 .* or 0"):
        decode_image(_encoded(Image.fromarray(a), "PNG"), flag=2)
    with pytest.raises(TypeError, match="expected the encoded bytes"):
        decode_image(a)


def test_missing_pillow_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "PIL", None)
    with pytest.raises(ImportError, match=r"pip install hybrid\[vision\]"):
        decode_image(b"\x89PNG")


# ---------------------------------------------------------------- ImageFolderDataset

import warnings  # noqa: E402

from hybrid.data import DataLoader  # noqa: E402
from hybrid.data.vision import ImageFolderDataset, ImageListDataset  # noqa: E402


def _make_tree(root, sizes=((5, 7), (4, 6), (6, 3))):
    """root/<class>/<n>.png with distinct pixels; returns {relative path: pixels}."""
    made = {}
    classes = {"zebra": ["b.png", "a.PNG"], "ant": ["x.png"], "Cat": ["1.png", "0.png"]}
    seed = 0
    for cls, files in classes.items():
        (root / cls).mkdir(parents=True)
        for name in files:
            h, w = sizes[seed % len(sizes)]
            a = _pixels(h, w, seed)
            Image.fromarray(a).save(root / cls / name, "PNG")
            made[f"{cls}/{name}"] = a
            seed += 1
    return made


def test_folder_classes_sorted_and_pixels_exact(tmp_path):
    made = _make_tree(tmp_path)
    ds = ImageFolderDataset(tmp_path)
    assert ds.synsets == ["Cat", "ant", "zebra"]  # sorted by name, byte order (upper case first)
    rel = [(os.path.relpath(p, tmp_path), lab) for p, lab in ds.items]
    assert rel == [("Cat/0.png", 0), ("Cat/1.png", 0), ("ant/x.png", 1), ("zebra/a.PNG", 2), ("zebra/b.png", 2)]
    assert len(ds) == 5
    for i, (path, label) in enumerate(ds.items):
        img, lab = ds[i]
        assert lab == label and isinstance(lab, int)
        np.testing.assert_array_equal(img, made[os.path.relpath(path, tmp_path)])
    grey = ImageFolderDataset(str(tmp_path), flag=0)[0][0]
    assert grey.shape[2] == 1 and grey.dtype == np.uint8


def test_folder_transform_and_warnings(tmp_path):
    _make_tree(tmp_path)
    (tmp_path / "README.txt").write_text("not a class")
    (tmp_path / "ant" / "notes.txt").write_text("skip me")
    (tmp_path / "ant" / ".DS_Store").write_bytes(b"\0")
    with pytest.warns(UserWarning) as record:
        ds = ImageFolderDataset(tmp_path, transform=lambda img, label: (img.shape, label * 10))
    messages = " | ".join(str(w.message) for w in record)
    assert "README.txt, which is not a folder" in messages
    assert "ignoring 2 file(s)" in messages and "notes.txt" in messages and ".DS_Store" in messages
    assert ds.synsets == ["Cat", "ant", "zebra"] and len(ds) == 5
    assert ds[2] == ((6, 3, 3), 10)


def test_folder_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        ImageFolderDataset(tmp_path / "nope")
    (tmp_path / "file.png").write_bytes(b"x")
    with pytest.raises(NotADirectoryError, match="file.png"):
        ImageFolderDataset(tmp_path / "file.png")
    empty = tmp_path / "empty"
    (empty / "cls").mkdir(parents=True)
    with pytest.raises(ValueError, match=r"no image .* found under .*empty.*class folders found: \['cls'\]"):
        ImageFolderDataset(empty)
    with pytest.raises(ValueError, match="flag must be 1"):
        ImageFolderDataset(tmp_path, flag=3)
    bad = tmp_path / "bad" / "cls"
    bad.mkdir(parents=True)
    (bad / "broken.jpg").write_bytes(b"\xff\xd8 not really a jpeg")
    ds = ImageFolderDataset(tmp_path / "bad")
    with pytest.raises(ValueError, match=r"broken\.jpg: not a readable image"):
        ds[0]


def test_folder_matches_mxnet_listing(tmp_path):
    """synsets/items of MXNet 1.9.1's ImageFolderDataset for the same tree of awkward names
    (fixture made by tests/fixtures/image_folder/make_fixture.py; listing never decodes)."""
    fixture = json.loads((FIXTURES / "image_folder" / "mxnet_listing.json").read_text(encoding="utf-8"))
    for rel in fixture["files"]:
        path = tmp_path.joinpath(*rel.split("/"))
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"x")
    for rel in fixture["empty_dirs"]:
        (tmp_path / rel).mkdir()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ds = ImageFolderDataset(tmp_path)
    assert ds.synsets == fixture["synsets"]
    assert [[os.path.relpath(p, tmp_path).replace(os.sep, "/"), lab] for p, lab in ds.items] == fixture["items"]


# ---------------------------------------------------------------- ImageListDataset

def test_list_forms_agree(tmp_path):
    made = _make_tree(tmp_path)
    gluon_form = [[2, "zebra/b.png"], [0.5, 1.5, "Cat/1.png"], [[3, 4], "ant/x.png"]]
    ds = ImageListDataset(str(tmp_path), gluon_form)
    assert len(ds) == 3
    img, label = ds[0]
    np.testing.assert_array_equal(img, made["zebra/b.png"])
    assert label.dtype == np.float32 and label.tolist() == [2.0]
    np.testing.assert_array_equal(ds[1][1], [0.5, 1.5])
    np.testing.assert_array_equal(ds[2][1], [3.0, 4.0])
    np.testing.assert_array_equal(ds[2][0], made["ant/x.png"])
    # (path, label) entries, e.g. another dataset's items, absolute paths ignore root
    folder = ImageFolderDataset(tmp_path)
    from_items = ImageListDataset("/somewhere/else", folder.items, flag=0)
    assert len(from_items) == len(folder)
    np.testing.assert_array_equal(from_items[3][0], folder_grey(folder, 3))
    assert from_items[3][1].tolist() == [2.0]


def folder_grey(folder, i):
    rgb = np.asarray(Image.open(folder.items[i][0]).convert("RGB")).astype(np.int64)
    return ((rgb[..., 0] * 9797 + rgb[..., 1] * 19234 + rgb[..., 2] * 3737) >> 15)[..., None]


def test_lst_file(tmp_path):
    made = _make_tree(tmp_path)
    (tmp_path / "train.lst").write_text("7\t1.000000\tant/x.png\n3\t0.000000\t2.5\tCat/0.png\n\n")
    ds = ImageListDataset(tmp_path, "train.lst")
    assert len(ds) == 2
    assert [os.path.relpath(p, tmp_path) for p, _ in ds.items] == ["ant/x.png", "Cat/0.png"]
    np.testing.assert_array_equal(ds[0][0], made["ant/x.png"])
    assert ds[0][1].tolist() == [1.0]
    assert ds[1][1].tolist() == [0.0, 2.5]
    ds[1][1][0] = 9  # samples own their label
    assert ds[1][1].tolist() == [0.0, 2.5]
    shaped = ImageListDataset(tmp_path, "train.lst", transform=lambda img, label: (img.shape, label.sum()))
    assert shaped[1] == (made["Cat/0.png"].shape, 2.5)


@pytest.mark.parametrize("line, match", [
    ("0\tant/x.png\n", r"line 2: expected 'index<TAB>label\(s\)<TAB>path'"),
    ("zero\t1\tant/x.png\n", r"line 2: the index 'zero' is not an integer"),
    ("1\tcat\tant/x.png\n", r"line 2: labels \['cat'\] are not all numbers"),
    ("0\t1\tant/x.png\n", r"line 2: index 0 already used on line 1"),
    ("1 1 ant/x.png\n", r"line 2: expected .*tab-separated"),
])
def test_bad_lst_lines_named(tmp_path, line, match):
    (tmp_path / "bad.lst").write_text("0\t1\tant/x.png\n" + line)
    with pytest.raises(ValueError, match=r"bad\.lst, " + match):
        ImageListDataset(tmp_path, "bad.lst")


def test_bad_list_arguments(tmp_path):
    with pytest.raises(FileNotFoundError, match="missing.lst"):
        ImageListDataset(tmp_path, "missing.lst")
    with pytest.raises(ValueError, match="imglist must be the path of a .lst file or a list"):
        ImageListDataset(tmp_path, None)
    with pytest.raises(ValueError, match=r"imglist\[1\]: expected \[label\(s\)..., path\]"):
        ImageListDataset(tmp_path, [[0, "a.png"], [0, 1]])
    with pytest.raises(ValueError, match=r"imglist\[0\]: labels must be numbers"):
        ImageListDataset(tmp_path, [["x", "a.png"]])


# ---------------------------------------------------------------- with the DataLoader

def _to_float(img):
    return img.astype(np.float32) / 255.0


def _resize_to_4x4(img):
    return np.asarray(Image.fromarray(img).resize((4, 4), Image.NEAREST))


def test_dataloader_two_workers_transform_first(tmp_path):
    made = _make_tree(tmp_path)
    ds = ImageFolderDataset(tmp_path).transform_first(_resize_to_4x4).transform_first(_to_float)
    loader = DataLoader(ds, batch_size=2, num_workers=2)
    images, labels = [], []
    for x, y in loader:
        images.append(np.asarray(x))
        labels.append(np.asarray(y))
    images, labels = np.concatenate(images), np.concatenate(labels)
    assert images.shape == (5, 4, 4, 3) and images.dtype == np.float32
    assert labels.tolist() == [0, 0, 1, 2, 2]
    order = ["Cat/0.png", "Cat/1.png", "ant/x.png", "zebra/a.PNG", "zebra/b.png"]
    for got, rel in zip(images, order):
        want = np.asarray(Image.fromarray(made[rel]).resize((4, 4), Image.NEAREST)).astype(np.float32) / 255
        np.testing.assert_array_equal(got, want)
    lst = ImageListDataset(tmp_path, [[i, rel] for i, rel in enumerate(order)]).transform_first(_resize_to_4x4)
    (x, y), = list(DataLoader(lst, batch_size=5, num_workers=2))
    assert np.asarray(x).shape == (5, 4, 4, 3) and np.asarray(y).tolist() == [[0], [1], [2], [3], [4]]


def test_decode_probe_smoke(tmp_path):
    import subprocess
    script = pathlib.Path(__file__).resolve().parents[1] / "benchmarks" / "probe_image_decode.py"
    out = tmp_path / "report.txt"
    proc = subprocess.run([sys.executable, str(script), "--images", "4", "--size", "16", "--repeats", "1",
                           "--without-torchvision", "--out", str(out)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "hybrid ImageFolderDataset[i]" in out.read_text() and "Pillow open + load" in out.read_text()


def test_list_labels_pickle_compactly_and_ragged_labels_work(tmp_path):
    import pickle
    paths = [f"cls/{i:07d}.jpg" for i in range(20000)]
    ds = ImageListDataset(tmp_path, [[i % 7, p] for i, p in enumerate(paths)])
    clone = pickle.loads(pickle.dumps(ds))
    path_bytes = sum(len(path) for path, _ in clone.items)
    assert len(pickle.dumps(ds)) < path_bytes + 20 * len(paths)  # one label array, not 20,000 small ones
    assert len(clone) == 20000 and clone.items[9][1].tolist() == [2.0]
    assert clone.items[9][0] == os.path.join(str(tmp_path), "cls/0000009.jpg")
    ragged = ImageListDataset(tmp_path, [[1, "a.png"], [1, 2, "b.png"]])
    assert [label.tolist() for _, label in ragged.items] == [[1.0], [1.0, 2.0]]
    assert len(ImageListDataset(tmp_path, [])) == 0
