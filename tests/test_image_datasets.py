"""Image decoding, ImageFolderDataset and ImageListDataset on small PNG/JPEG files made with Pillow."""
import io
import sys

import numpy as np
import pytest

Image = pytest.importorskip("PIL.Image")

from hybrid.data.vision._decode import decode_file, decode_image  # noqa: E402


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


def test_png_grey_flag0_uses_itu601_weights():
    a = _pixels(seed=1)
    got = decode_image(_encoded(Image.fromarray(a), "PNG"), flag=0)
    assert got.shape == (6, 8, 1) and got.dtype == np.uint8
    r, g, b = (a[..., i].astype(np.int64) for i in range(3))
    want = (r * 19595 + g * 38470 + b * 7471 + 0x8000) >> 16  # L = 0.299 R + 0.587 G + 0.114 B, rounded
    np.testing.assert_array_equal(got[..., 0], want)


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
    np.testing.assert_array_equal(decode_file(str(path), 0)[..., 0], np.asarray(Image.fromarray(a).convert("L")))
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
