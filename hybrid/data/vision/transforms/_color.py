"""Colour transforms of HWC images: brightness, contrast, saturation, hue, PCA lighting noise.

Each ``adjust_*`` function takes an ``(H, W, C)`` image (uint8 or float, values on
the 0-255 scale) and returns the same dtype. They compute in float32; uint8
results are clipped to [0, 255] and truncated, as MXNet's image operators do;
float results are not clipped.
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

from ..._rng import transform_rng

_LUMA = np.array([0.299, 0.587, 0.114], np.float32)

# AlexNet's PCA of ImageNet's RGB pixels (values on the 0-255 scale): eigenvalues and eigenvectors (columns).
IMAGENET_EIGVAL = np.array([55.46, 4.794, 1.148], np.float32)
IMAGENET_EIGVEC = np.array([[-0.5675, 0.7192, 0.4009],
                            [-0.5808, -0.0045, -0.8140],
                            [-0.5836, -0.6948, 0.4203]], np.float32)


def _image(x: Any, who: str, rgb: bool) -> np.ndarray:
    x = np.asarray(x)
    if x.ndim != 3 or (rgb and x.shape[2] not in (1, 3)):
        want = "(H, W, 3) or (H, W, 1)" if rgb else "(H, W, C)"
        raise ValueError(f"{who}: expected an {want} image (before ToTensor), got shape {x.shape}")
    if x.dtype.kind not in "uif":
        raise TypeError(f"{who}: expected a numeric image, got dtype {x.dtype}")
    return x


def _back(values: np.ndarray, like: np.ndarray) -> np.ndarray:
    if like.dtype.kind == "f":
        return values.astype(like.dtype, copy=False)
    info = np.iinfo(like.dtype)
    return np.clip(values, info.min, info.max).astype(like.dtype)  # float -> int truncates


def adjust_brightness(x: np.ndarray, factor: float, who: str = "adjust_brightness") -> np.ndarray:
    """``x * factor``."""
    x = _image(x, who, rgb=False)
    return _back(x.astype(np.float32) * np.float32(factor), x)


def adjust_contrast(x: np.ndarray, factor: float, who: str = "adjust_contrast") -> np.ndarray:
    """``x * factor + (1 - factor) * mean grey level`` (grey = 0.299 R + 0.587 G + 0.114 B)."""
    x = _image(x, who, rgb=True)
    values = x.astype(np.float32)
    grey = values.mean() if x.shape[2] == 1 else float((values @ _LUMA).mean())
    return _back(values * np.float32(factor) + np.float32((1 - factor) * grey), x)


def adjust_saturation(x: np.ndarray, factor: float, who: str = "adjust_saturation") -> np.ndarray:
    """Each pixel ``p * factor + (1 - factor) * grey(p)``; one-channel images are returned as they are."""
    x = _image(x, who, rgb=True)
    if x.shape[2] == 1:
        return x.copy()
    values = x.astype(np.float32)
    grey = (values @ _LUMA)[..., None] * np.float32(1 - factor)
    return _back(values * np.float32(factor) + grey, x)


def _rgb_to_hls(rgb: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    r, g, b = (rgb[..., i] for i in range(3))
    vmax, vmin = rgb.max(axis=-1), rgb.min(axis=-1)
    diff = vmax - vmin
    light = (vmax + vmin) * 0.5
    chromatic = diff > np.finfo(np.float32).eps
    safe = np.where(chromatic, diff, 1)
    sat = np.where(light < 0.5, diff / np.where(chromatic, vmax + vmin, 1),
                   diff / np.where(chromatic, 2 - vmax - vmin, 1))
    hue = np.where(vmax == r, (g - b) / safe * 60,
                   np.where(vmax == g, (b - r) / safe * 60 + 120, (r - g) / safe * 60 + 240))
    hue = np.where(hue < 0, hue + 360, hue)
    return np.where(chromatic, hue, 0), light, np.where(chromatic, sat, 0)


def _hls_to_rgb(hue: np.ndarray, light: np.ndarray, sat: np.ndarray) -> np.ndarray:
    high = np.where(light <= 0.5, light * (1 + sat), light + sat - light * sat)
    low = 2 * light - high
    sector_pos = np.mod(hue / 60, 6)
    channels = []
    for offset in (120, 0, -120):  # R, G, B: the same ramp, shifted by a third of the circle
        h = np.mod(sector_pos + offset / 60, 6)
        ramp = np.select([h < 1, h < 3, h < 4], [low + (high - low) * h, high, low + (high - low) * (4 - h)], low)
        channels.append(np.where(sat != 0, ramp, light))
    return np.stack(channels, axis=-1)


def adjust_hue(x: np.ndarray, shift: float, who: str = "adjust_hue") -> np.ndarray:
    """Rotates every pixel's hue (in HLS) by ``shift`` turns (1.0 = 360 degrees); one-channel
    images are returned as they are."""
    x = _image(x, who, rgb=True)
    if x.shape[2] == 1:
        return x.copy()
    hue, light, sat = _rgb_to_hls(x.astype(np.float32) / np.float32(255))
    return _back(_hls_to_rgb(hue + np.float32(shift * 360), light, sat) * np.float32(255), x)


def adjust_lighting(x: np.ndarray, alpha: Any, who: str = "adjust_lighting") -> np.ndarray:
    """Adds ``IMAGENET_EIGVEC @ (alpha * IMAGENET_EIGVAL)`` to every RGB pixel (AlexNet's PCA noise);
    one-channel images are returned as they are."""
    x = _image(x, who, rgb=True)
    if x.shape[2] == 1:
        return x.copy()
    offset = IMAGENET_EIGVEC @ (np.asarray(alpha, np.float32).reshape(3) * IMAGENET_EIGVAL)
    return _back(x.astype(np.float32) + offset.astype(np.float32), x)


def _amount(value: Any, name: str, who: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)) or not value >= 0:
        raise ValueError(f"{who}: {name} must be a non-negative number, got {value!r}")
    return float(value)


class _RandomFactor:
    """Draws a factor uniformly from ``[max(0, 1 - amount), 1 + amount]`` and applies ``_adjust``."""
    _name = ""
    _adjust: Callable[..., np.ndarray]

    def __init__(self, amount: float):
        amount = _amount(amount, self._name, type(self).__name__)
        self._range = (max(0.0, 1 - amount), 1 + amount)

    def __call__(self, x: Any) -> np.ndarray:
        factor = transform_rng().uniform(*self._range)
        return type(self)._adjust(x, factor, type(self).__name__)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._range[1] - 1:g})"


class RandomBrightness(_RandomFactor):
    """Multiplies the image by a factor drawn from ``[max(0, 1 - brightness), 1 + brightness]``."""
    _name, _adjust = "brightness", staticmethod(adjust_brightness)


class RandomContrast(_RandomFactor):
    """Moves pixels toward (factor < 1) or away from the mean grey level; factor drawn from
    ``[max(0, 1 - contrast), 1 + contrast]``."""
    _name, _adjust = "contrast", staticmethod(adjust_contrast)


class RandomSaturation(_RandomFactor):
    """Moves pixels toward (factor < 1) or away from their grey level; factor drawn from
    ``[max(0, 1 - saturation), 1 + saturation]``."""
    _name, _adjust = "saturation", staticmethod(adjust_saturation)


class RandomHue(_RandomFactor):
    """Rotates the hue by ``factor - 1`` turns, factor drawn from ``[max(0, 1 - hue), 1 + hue]``."""
    _name = "hue"

    @staticmethod
    def _adjust(x: Any, factor: float, who: str) -> np.ndarray:
        return adjust_hue(x, factor - 1, who)


class RandomColorJitter:
    """Brightness, contrast, saturation and hue jitter, in a random order.

    Each non-zero amount ``a`` draws its factor from ``1 + U(-a, a)`` (hue: a shift of
    ``U(-hue, hue)`` turns). Raises ValueError for negative amounts.
    """

    def __init__(self, brightness: float = 0, contrast: float = 0, saturation: float = 0, hue: float = 0):
        self._amounts = tuple(_amount(v, name, "RandomColorJitter") for v, name in (
            (brightness, "brightness"), (contrast, "contrast"), (saturation, "saturation"), (hue, "hue")))

    def __call__(self, x: Any) -> np.ndarray:
        x = _image(x, "RandomColorJitter", rgb=True)
        rng = transform_rng()
        for step in rng.permutation(4):
            amount = self._amounts[step]
            if amount > 0:
                draw = rng.uniform(-amount, amount)
                if step == 3:
                    x = adjust_hue(x, draw, "RandomColorJitter")
                else:
                    adjust = (adjust_brightness, adjust_contrast, adjust_saturation)[step]
                    x = adjust(x, 1 + draw, "RandomColorJitter")
        return x

    def __repr__(self) -> str:
        b, c, s, h = self._amounts
        return f"RandomColorJitter(brightness={b}, contrast={c}, saturation={s}, hue={h})"


class RandomLighting:
    """AlexNet-style PCA lighting noise: ``alpha * N(0, 1)`` per ImageNet principal component.

    ``alpha`` is the noise's standard deviation (0 leaves the image as it is). Raises
    ValueError for a negative ``alpha``.
    """

    def __init__(self, alpha: float):
        self._alpha = _amount(alpha, "alpha", "RandomLighting")

    def __call__(self, x: Any) -> np.ndarray:
        draws = transform_rng().normal(0, self._alpha, 3) if self._alpha > 0 else np.zeros(3)
        return adjust_lighting(x, draws, "RandomLighting")

    def __repr__(self) -> str:
        return f"RandomLighting({self._alpha})"
