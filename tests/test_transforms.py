"""Gluon 2.0's image transforms beyond the basics: colour, lighting, rotation, flips, crops, composition.

References: MXNet 1.9.1's image operators (fixtures/transforms/, made by make_fixtures.py),
formulas computed by hand, Python's colorsys, Pillow's rotation and np.rot90.
"""
import colorsys
import os
import pickle

import jax
import numpy as np
import pytest

import hybrid
from hybrid import data
from hybrid.data.vision import transforms as T
from hybrid.data.vision.transforms import _color, _fast_resize, _rotation

from conftest import assert_close

FIXTURES = np.load(os.path.join(os.path.dirname(__file__), "fixtures", "transforms", "mxnet_transforms.npz"))
IMAGES = {"u8": FIXTURES["img_u8"], "f32": FIXTURES["img_f32"]}


def assert_matches(actual, expected, kind):
    """uint8 results within 1 (float rounding before truncation), float32 to float32 precision."""
    assert actual.dtype == expected.dtype and actual.shape == expected.shape
    atol = 1 if kind == "u8" else 1e-3
    np.testing.assert_allclose(actual.astype(np.float64), expected.astype(np.float64), rtol=0, atol=atol)


# ---------------------------------------------------------------------------------------------
# Against MXNet 1.9.1 (random operators with a fixed factor)

@pytest.mark.parametrize("kind", ["u8", "f32"])
def test_colour_operators_match_mxnet(kind):
    x = IMAGES[kind]
    for factor in (1.3, 0.4):
        np.testing.assert_array_equal(_color.adjust_brightness(x, factor), FIXTURES[f"brightness_{factor}_{kind}"])
    for factor in (0.6, 1.4):
        assert_matches(_color.adjust_contrast(x, factor), FIXTURES[f"contrast_{factor}_{kind}"], kind)
    for factor in (1.1, 0.7):
        assert_matches(_color.adjust_hue(x, factor - 1), FIXTURES[f"hue_{factor}_{kind}"], kind)
    assert_matches(_color.adjust_lighting(x, (0.1, -0.2, 0.3)), FIXTURES[f"lighting_{kind}"], kind)


@pytest.mark.parametrize("kind", ["u8", "f32"])
def test_flips_and_crop_resize_match_mxnet(kind):
    x = IMAGES[kind]
    np.testing.assert_array_equal(T.RandomFlipTopBottom(p=1)(x), FIXTURES[f"flip_tb_{kind}"])
    np.testing.assert_array_equal(T.RandomFlipLeftRight(p=1)(x), FIXTURES[f"flip_lr_{kind}"])
    np.testing.assert_array_equal(T.CropResize(2, 1, 6, 5)(x), FIXTURES[f"crop_{kind}"])
    assert_matches(T.CropResize(2, 1, 6, 5, size=(9, 7))(x), FIXTURES[f"crop_up_{kind}"], kind)
    assert_matches(T.CropResize(1, 0, 9, 8, size=(5, 3), interpolation=1)(x), FIXTURES[f"crop_down_{kind}"], kind)
    np.testing.assert_array_equal(T.CropResize(2, 1, 6, 5, size=(9, 7), interpolation=0)(x),
                                  FIXTURES[f"crop_nearest_{kind}"])


@pytest.mark.parametrize("degrees", [30.0, -75.0])
def test_rotation_matches_mxnet_imrotate(degrees):
    chw = FIXTURES["chw"]
    for suffix, kwargs in (("", {}), ("_zoom_in", {"zoom_in": True}), ("_zoom_out", {"zoom_out": True})):
        assert_close(_rotation.rotate(chw, degrees, **kwargs), FIXTURES[f"rotate_{degrees}{suffix}"], atol=1e-5)


# ---------------------------------------------------------------------------------------------
# Formulas by hand

def test_brightness_contrast_saturation_by_hand():
    px = np.array([[[200, 100, 10], [0, 50, 250]]], np.uint8)  # (1, 2, 3)
    # brightness 1.5: 300 -> 255 (clipped), 150, 15; 0, 75, 375 -> 255
    np.testing.assert_array_equal(_color.adjust_brightness(px, 1.5), [[[255, 150, 15], [0, 75, 255]]])
    grey = np.array([0.299 * 200 + 0.587 * 100 + 0.114 * 10, 0.299 * 0 + 0.587 * 50 + 0.114 * 250])
    f = px.astype(np.float64)
    expected = f * 0.5 + 0.5 * grey.mean()
    np.testing.assert_array_equal(_color.adjust_contrast(px, 0.5), np.floor(expected).astype(np.uint8))
    expected = f * 1.7 - 0.7 * grey[None, :, None]
    np.testing.assert_array_equal(_color.adjust_saturation(px, 1.7),
                                  np.floor(np.clip(expected, 0, 255)).astype(np.uint8))
    # factor 0: every pixel becomes its grey level; float images are not clipped
    desaturated = _color.adjust_saturation(f.astype(np.float32), 0.0)
    assert_close(desaturated, np.repeat(grey[None, :, None], 3, axis=2), atol=1e-4)
    assert_close(_color.adjust_brightness(f.astype(np.float32), 2.0), f * 2)
    grey_image = np.full((2, 2, 1), 7, np.uint8)
    np.testing.assert_array_equal(_color.adjust_saturation(grey_image, 3.0), grey_image)


def test_hue_against_colorsys(rng):
    img = (rng.random((6, 5, 3)) * 255).astype(np.float32)
    for shift in (0.1, -0.3, 0.5):
        expected = np.empty_like(img, dtype=np.float64)
        for (i, j), _ in np.ndenumerate(img[..., 0]):
            h, l, s = colorsys.rgb_to_hls(*(img[i, j] / 255.0))
            expected[i, j] = np.array(colorsys.hls_to_rgb((h + shift) % 1.0, l, s)) * 255
        assert_close(_color.adjust_hue(img, shift), expected, atol=2e-3)
    assert_close(_color.adjust_hue(img, 1.0), img, atol=2e-3)
    grey = np.full((2, 2, 3), 90, np.uint8)
    np.testing.assert_array_equal(_color.adjust_hue(grey, 0.25), grey)


def test_lighting_by_hand():
    eigval = np.array([55.46, 4.794, 1.148])
    eigvec = np.array([[-0.5675, 0.7192, 0.4009], [-0.5808, -0.0045, -0.8140], [-0.5836, -0.6948, 0.4203]])
    alpha = np.array([0.05, -0.1, 0.2])
    offset = [sum(eigvec[c, k] * alpha[k] * eigval[k] for k in range(3)) for c in range(3)]
    img = np.full((2, 3, 3), 100.0, np.float32)
    assert_close(_color.adjust_lighting(img, alpha), np.broadcast_to(100.0 + np.array(offset), img.shape), atol=1e-4)
    # RandomLighting draws alpha ~ N(0, alpha_std) per component: recover the draws from the offsets
    pixel = np.zeros((1, 1, 3), np.float32)
    lighting = T.RandomLighting(0.1)
    offsets = np.stack([lighting(pixel)[0, 0] for _ in range(2000)]).astype(np.float64)
    draws = offsets @ eigvec / eigval  # eigvec is orthonormal
    assert np.all(np.abs(draws.std(axis=0) - 0.1) < 0.01) and np.all(np.abs(draws.mean(axis=0)) < 0.01)
    np.testing.assert_array_equal(T.RandomLighting(0)(IMAGES["u8"]), IMAGES["u8"])


def test_random_factors_are_drawn_from_gluons_ranges():
    ones = np.ones((2, 2, 3), np.float32)
    seen = np.array([T.RandomBrightness(0.5)(ones)[0, 0, 0] for _ in range(400)])
    assert 0.5 <= seen.min() < 0.55 and 1.45 < seen.max() <= 1.5
    seen = np.array([T.RandomBrightness(3.0)(ones)[0, 0, 0] for _ in range(400)])
    assert seen.min() >= 0 and seen.max() > 3.5  # lower end is max(0, 1 - 3) = 0
    # contrast factor c maps a pixel p to c * p + (1 - c) * mean grey
    img = np.array([[[0, 0, 0], [100, 100, 100]]], np.float32)
    factors = np.array([T.RandomContrast(0.2)(img)[0, 1, 0] for _ in range(400)]) - 50
    factors /= 50
    assert 0.8 <= factors.min() < 0.83 and 1.17 < factors.max() <= 1.2
    # hue factor h rotates by h - 1 turns: pure red stays on the colour circle with lightness 0.5
    red = np.array([[[255, 0, 0]]], np.float32)
    for _ in range(20):
        out = T.RandomHue(0.5)(red)[0, 0] / 255
        assert_close(out.max() + out.min(), 1.0, atol=1e-5)


def test_color_jitter_keeps_what_each_part_keeps(rng):
    img = (rng.random((4, 4, 3)) * 200 + 20).astype(np.float32)
    bright = T.RandomColorJitter(brightness=0.4)
    ratios = [bright(img) / img for _ in range(50)]
    assert all(np.allclose(r, r.flat[0]) and 0.6 <= r.flat[0] <= 1.4 for r in ratios)
    assert np.ptp([r.flat[0] for r in ratios]) > 0.3
    hue = T.RandomColorJitter(hue=0.2)
    lightness = img.max(axis=2) + img.min(axis=2)
    for _ in range(10):
        out = hue(img)
        assert_close(out.max(axis=2) + out.min(axis=2), lightness, atol=1e-2)
    np.testing.assert_array_equal(T.RandomColorJitter()(IMAGES["u8"]), IMAGES["u8"])
    out = T.RandomColorJitter(0.3, 0.3, 0.3, 0.1)(IMAGES["u8"])
    assert out.dtype == np.uint8 and out.shape == IMAGES["u8"].shape


def test_rotation_by_quarter_turns_and_pillow(rng):
    img = rng.random((2, 7, 7)).astype(np.float32)
    assert_close(_rotation.rotate(img, 90.0), np.rot90(img, k=1, axes=(1, 2)), atol=1e-5)
    assert_close(_rotation.rotate(img, -180.0), img[:, ::-1, ::-1], atol=1e-5)
    from PIL import Image
    wide = rng.random((1, 9, 12)).astype(np.float32)
    ours = _rotation.rotate(wide, 25.0)[0]
    theirs = np.asarray(Image.fromarray(wide[0], "F").rotate(25.0, resample=Image.BILINEAR))
    # away from the border (where MXNet mixes in zeros), both are the same bilinear sample
    rows, cols = np.mgrid[0:9, 0:12]
    cy, cx, t = 4.0, 5.5, np.radians(25.0)
    sx = (cols - cx) * np.cos(t) - (rows - cy) * np.sin(t) + cx
    sy = (cols - cx) * np.sin(t) + (rows - cy) * np.cos(t) + cy
    inside = (sx >= 0) & (sx <= 11) & (sy >= 0) & (sy <= 8)
    assert inside.sum() > 50
    assert_close(ours[inside], theirs[inside], atol=1e-4)


def test_random_rotation_batches_probability_and_dtype(rng):
    batch = rng.random((3, 2, 6, 6)).astype(np.float32)
    out = T.RandomRotation((-40, 40))(batch)
    assert out.shape == batch.shape and out.dtype == np.float32
    assert not np.allclose(out[0], out[1])  # each image its own angle ...
    np.testing.assert_array_equal(T.RandomRotation((-40, 40), rotate_with_proba=0.0)(batch), batch)
    quarter = T.RandomRotation((89.999999, 90.0))(batch[0])
    assert_close(quarter, np.rot90(batch[0], k=1, axes=(1, 2)), atol=1e-4)
    with pytest.raises(TypeError, match="RandomRotation: expected a float32 image .*uint8"):
        T.RandomRotation((0, 10))(IMAGES["u8"])


# ---------------------------------------------------------------------------------------------
# Flips, crops, composition

def test_flips_crop_resize_and_batches(rng):
    img = rng.integers(0, 256, (5, 6, 3), dtype=np.uint8)
    np.testing.assert_array_equal(T.RandomFlipTopBottom(p=0)(img), img)
    np.testing.assert_array_equal(T.RandomFlipTopBottom(p=1)(img[None]), img[None, ::-1])
    flips = [np.array_equal(T.RandomFlipTopBottom()(img), img[::-1]) for _ in range(200)]
    assert 60 < sum(flips) < 140
    batch = rng.integers(0, 256, (2, 8, 8, 3), dtype=np.uint8)
    np.testing.assert_array_equal(T.CropResize(1, 2, 4, 3)(batch), batch[:, 2:5, 1:5])
    out = T.CropResize(0, 0, 4, 4, size=2)(batch.astype(np.float32))
    assert_close(out, batch[:, :4, :4].astype(np.float32).reshape(2, 2, 2, 2, 2, 3).mean(axis=(2, 4)))


def test_pillow_resizing_stays_within_one_of_exact_bilinear(rng):
    assert _fast_resize._Image is not None, "Pillow (in the test extra) is needed for the path under test"
    for h, w, out_w, out_h in ((40, 30, 64, 50), (64, 60, 40, 45), (30, 40, 50, 20), (17, 9, 3, 30)):
        img = rng.integers(0, 256, (h, w, 3), dtype=np.uint8)
        exact = T.Resize((out_w, out_h))(img.astype(np.float32))
        fast = _fast_resize.crop_resize(img, 0, 0, w, h, (out_w, out_h))
        assert fast.dtype == np.uint8 and fast.shape == exact.shape
        assert np.abs(fast - exact).max() <= 1.001  # float32 rounding of the exact value
    # four channels are not colour plus alpha: no premultiplying (Pillow's RGBA resampling would give 204 here)
    rgba = np.zeros((4, 4, 4), np.uint8)
    rgba[..., 0], rgba[..., 3] = 200, 10
    np.testing.assert_array_equal(T.Resize(8)(rgba)[..., 0], 200)
    # RandomResizedCrop picks the same window for uint8 and float input under the same seed
    img = rng.integers(0, 256, (64, 48, 3), dtype=np.uint8)
    crop = T.RandomResizedCrop((40, 30))
    hybrid.random.seed(5)
    fast = [crop(img) for _ in range(10)]
    hybrid.random.seed(5)
    exact = [crop(img.astype(np.float32)) for _ in range(10)]
    assert max(np.abs(a - b).max() for a, b in zip(fast, exact)) <= 1.001


def test_random_apply_and_hybrid_compose(rng):
    img = rng.random((4, 4, 3)).astype(np.float32)
    double = T.RandomBrightness(0)  # factor exactly 1: applied or not, the same values
    assert T.RandomApply(double, p=1.0)(img) is not img
    assert T.RandomApply([double], p=0.0)(img) is img
    applied = [T.RandomApply(T.RandomFlipLeftRight(p=1), p=0.3)(img) is not img for _ in range(400)]
    assert 80 < sum(applied) < 160
    chain = T.HybridCompose([T.CropResize(0, 0, 2, 2), T.ToTensor()])
    np.testing.assert_array_equal(chain(img), np.transpose(img[:2, :2], (2, 0, 1)) / np.float32(255))
    assert len(chain) == 2 and isinstance(chain[1], T.ToTensor)


def test_bad_arguments_name_the_transform():
    cases = [
        (lambda: T.RandomBrightness(-0.1), ValueError, "RandomBrightness: brightness must be a non-negative"),
        (lambda: T.RandomContrast("x"), ValueError, "RandomContrast: contrast must be a non-negative"),
        (lambda: T.RandomSaturation(None), ValueError, "RandomSaturation: saturation"),
        (lambda: T.RandomHue(-1), ValueError, "RandomHue: hue"),
        (lambda: T.RandomColorJitter(hue=-0.5), ValueError, "RandomColorJitter: hue must be a non-negative"),
        (lambda: T.RandomLighting(-1), ValueError, "RandomLighting: alpha must be a non-negative"),
        (lambda: T.RandomRotation((10, -10)), ValueError, "RandomRotation: angle_limits must satisfy lower < upper"),
        (lambda: T.RandomRotation(5), ValueError, r"RandomRotation: angle_limits must be a pair"),
        (lambda: T.RandomRotation((0, 1), zoom_in=True, zoom_out=True), ValueError, "cannot both be True"),
        (lambda: T.RandomRotation((0, 1), rotate_with_proba=2), ValueError, "rotate_with_proba must be in"),
        (lambda: T.RandomFlipTopBottom(p=1.5), ValueError, r"RandomFlipTopBottom: p must be a probability"),
        (lambda: T.CropResize(-1, 0, 2, 2), ValueError, "CropResize: x must be an int >= 0"),
        (lambda: T.CropResize(0, 0, 0, 2), ValueError, "CropResize: width must be an int >= 1"),
        (lambda: T.CropResize(0, 0, 2, 2, size=(3, 0)), ValueError, "CropResize: size must be"),
        (lambda: T.CropResize(0, 0, 2, 2, interpolation=7), ValueError, "CropResize: interpolation"),
        (lambda: T.CropResize(4, 0, 3, 2)(np.zeros((5, 6, 3))), ValueError,
         r"CropResize: the window x=4, y=0, width=3, height=2 does not fit in an image of width 6"),
        (lambda: T.RandomApply([T.ToTensor(), 3]), TypeError, r"RandomApply: transform 1 \(3\) is not callable"),
        (lambda: T.RandomApply(T.ToTensor(), p=-1), ValueError, "RandomApply: p must be a probability"),
        (lambda: T.HybridCompose([T.ToTensor(), "x"]), TypeError, "HybridCompose: transform 1 .* is not callable"),
        (lambda: T.Compose(T.ToTensor()), TypeError, "Compose: transforms must be a list"),
        (lambda: T.RandomContrast(0.5)(np.zeros((4, 4, 2))), ValueError,
         r"RandomContrast: expected an \(H, W, 3\) or \(H, W, 1\) image"),
        (lambda: T.RandomSaturation(0.5)(np.zeros((4, 4))), ValueError, "RandomSaturation: expected"),
        (lambda: T.RandomRotation((0, 1))(np.zeros((4, 4), np.float32)), ValueError, "RandomRotation: expected a"),
    ]
    for make, error, message in cases:
        with pytest.raises(error, match=message):
            make()


# ---------------------------------------------------------------------------------------------
# Reproducibility and pickling

def _augment():
    return T.Compose([
        T.RandomResizedCrop(12), T.RandomFlipLeftRight(), T.RandomFlipTopBottom(),
        T.RandomApply(T.RandomColorJitter(0.4, 0.4, 0.4, 0.1), p=0.7), T.RandomLighting(0.1),
        T.RandomBrightness(0.2), T.RandomContrast(0.2), T.RandomSaturation(0.2), T.RandomHue(0.05),
        T.ToTensor(), T.RandomRotation((-30, 30), rotate_with_proba=0.5),
    ])


def _epoch(dataset, **kwargs):
    loader = data.DataLoader(dataset, batch_size=3, **kwargs)
    try:
        return np.concatenate([np.asarray(jax.tree_util.tree_map(np.asarray, batch)[0]) for batch in loader])
    finally:
        loader.close()


def test_epochs_are_reproducible_and_independent_of_workers():
    images = np.random.default_rng(3).integers(0, 256, (9, 16, 20, 3), dtype=np.uint8)
    dataset = data.ArrayDataset(images, np.arange(9)).transform_first(_augment())
    hybrid.random.seed(21)
    main = _epoch(dataset)
    hybrid.random.seed(21)
    np.testing.assert_array_equal(_epoch(dataset, num_workers=2), main)
    hybrid.random.seed(21)
    np.testing.assert_array_equal(_epoch(dataset, num_workers=2, thread_pool=True), main)
    hybrid.random.seed(22)
    assert not np.array_equal(_epoch(dataset), main)


def test_transforms_pickle():
    img = IMAGES["u8"]
    for transform in (_augment(), T.HybridCompose([T.CropResize(1, 1, 4, 4, size=6), T.Cast()])):
        copy = pickle.loads(pickle.dumps(transform))
        hybrid.random.seed(4)
        expected = transform(img)
        hybrid.random.seed(4)
        np.testing.assert_array_equal(copy(img), expected)
