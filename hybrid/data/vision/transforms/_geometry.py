"""Geometric transforms of HWC images: resizing, cropping, flipping."""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..._rng import transform_rng
from .._image import fit_inside, hw_axes, interpolation_name, resize, size_wh
from ._fast_resize import crop_resize


class Resize:
    """Resizes HWC images to ``size``.

    Args:
        size: ``(width, height)``, or an int: a square, or with ``keep_ratio=True``
            the length of the shorter side (the other follows the aspect ratio).
        keep_ratio: see ``size``; ignored when ``size`` is a pair.
        interpolation: 0 / ``'nearest'`` or 1 / ``'bilinear'`` (default).
    """

    def __init__(self, size: int | tuple[int, int], keep_ratio: bool = False, interpolation: Any = 1):
        self._size = size_wh(size, "Resize")
        self._shorter_side = int(size) if keep_ratio and isinstance(size, (int, np.integer)) else None
        self._method = interpolation_name(interpolation, "Resize")

    def __call__(self, x: Any) -> np.ndarray:
        x = np.asarray(x)
        ax_h, ax_w = hw_axes(x, "Resize")
        width, height = self._size
        if self._shorter_side is not None:
            h, w, short = x.shape[ax_h], x.shape[ax_w], self._shorter_side
            width, height = (short, int(h * short / w)) if h > w else (int(w * short / h), short)
        if x.ndim == 4:
            return resize(x, width, height, self._method)
        return crop_resize(x, 0, 0, x.shape[ax_w], x.shape[ax_h], (width, height), self._method)


class CenterCrop:
    """Crops the centre ``size = (width, height)`` (or square int) window.

    An image smaller than ``size`` gives up its largest central window of the same
    aspect ratio, resized up to ``size`` with ``interpolation``.
    """

    def __init__(self, size: int | tuple[int, int], interpolation: Any = 1):
        self._size = size_wh(size, "CenterCrop")
        self._method = interpolation_name(interpolation, "CenterCrop")

    def __call__(self, x: Any) -> np.ndarray:
        x = np.asarray(x)
        ax_h, ax_w = hw_axes(x, "CenterCrop")
        h, w = x.shape[ax_h], x.shape[ax_w]
        cw, ch = fit_inside(w, h, *self._size)
        return crop_resize(x, (w - cw) // 2, (h - ch) // 2, cw, ch, self._size, self._method)


class RandomResizedCrop:
    """Crops a random window and resizes it to ``size``.

    The window covers a fraction of the image area drawn uniformly from ``scale``
    and has an aspect ratio (width / height) drawn log-uniformly from ``ratio``;
    after 10 draws that do not fit, it falls back to ``CenterCrop(size)``.
    """

    def __init__(self, size: int | tuple[int, int], scale: tuple[float, float] = (0.08, 1.0),
                 ratio: tuple[float, float] = (3.0 / 4.0, 4.0 / 3.0), interpolation: Any = 1):
        self._size = size_wh(size, "RandomResizedCrop")
        if not 0 < scale[0] <= scale[1] <= 1:
            raise ValueError(f"RandomResizedCrop: scale must satisfy 0 < low <= high <= 1, got {scale}")
        if not 0 < ratio[0] <= ratio[1]:
            raise ValueError(f"RandomResizedCrop: ratio must satisfy 0 < low <= high, got {ratio}")
        self._scale, self._log_ratio = scale, (math.log(ratio[0]), math.log(ratio[1]))
        self._method = interpolation_name(interpolation, "RandomResizedCrop")
        self._fallback = CenterCrop(size, interpolation)

    def __call__(self, x: Any) -> np.ndarray:
        x = np.asarray(x)
        ax_h, ax_w = hw_axes(x, "RandomResizedCrop")
        h, w = x.shape[ax_h], x.shape[ax_w]
        rng = transform_rng()
        for _ in range(10):
            area = h * w * rng.uniform(*self._scale)
            aspect = math.exp(rng.uniform(*self._log_ratio))
            cw, ch = round(math.sqrt(area * aspect)), round(math.sqrt(area / aspect))
            if 0 < cw <= w and 0 < ch <= h:
                x0, y0 = int(rng.integers(0, w - cw + 1)), int(rng.integers(0, h - ch + 1))
                return crop_resize(x, x0, y0, cw, ch, self._size, self._method)
        return self._fallback(x)


class _RandomFlip:
    _axis = 0

    def __init__(self, p: float = 0.5):
        if not 0 <= p <= 1:
            raise ValueError(f"{type(self).__name__}: p must be a probability in [0, 1], got {p!r}")
        self.p = float(p)

    def __call__(self, x: Any) -> np.ndarray:
        x = np.asarray(x)
        axis = hw_axes(x, type(self).__name__)[self._axis]
        return np.flip(x, axis) if transform_rng().random() < self.p else x

    def __repr__(self) -> str:
        return f"{type(self).__name__}(p={self.p})"


class RandomFlipLeftRight(_RandomFlip):
    """Mirrors the width axis with probability ``p`` (0.5). Raises ValueError for ``p`` outside [0, 1]."""
    _axis = 1


class RandomFlipTopBottom(_RandomFlip):
    """Mirrors the height axis with probability ``p`` (0.5). Raises ValueError for ``p`` outside [0, 1]."""
    _axis = 0


class RandomCrop:
    """Pads the image, then crops a random ``size = (width, height)`` window.

    Args:
        size: window size (int: square).
        pad: None, an int (rows above and below, columns left and right),
            ``(top, bottom, left, right)`` or ``((top, bottom), (left, right))``.
        pad_value: value of the padding.
        interpolation: used only when the (padded) image is smaller than ``size``:
            its largest window of that aspect ratio is resized up, as in CenterCrop.
    """

    def __init__(self, size: int | tuple[int, int], pad: Any = None, pad_value: float = 0, interpolation: Any = 1):
        self._size = size_wh(size, "RandomCrop")
        self._pad, self._pad_value = self._parse_pad(pad), pad_value
        self._method = interpolation_name(interpolation, "RandomCrop")

    @staticmethod
    def _parse_pad(pad: Any) -> tuple[tuple[int, int], tuple[int, int]]:
        if pad is None or isinstance(pad, (int, np.integer)):
            flat = [pad or 0] * 4
        else:
            flat = list(pad)
            if len(flat) == 2 and all(isinstance(side, (tuple, list)) for side in flat):
                flat = [v for side in flat for v in side]
        if len(flat) != 4 or not all(isinstance(v, (int, np.integer)) and v >= 0 for v in flat):
            raise ValueError(f"RandomCrop: pad must be a non-negative int, (top, bottom, left, right) or "
                             f"((top, bottom), (left, right)), got {pad!r}")
        return (int(flat[0]), int(flat[1])), (int(flat[2]), int(flat[3]))

    def __call__(self, x: Any) -> np.ndarray:
        x = np.asarray(x)
        ax_h, ax_w = hw_axes(x, "RandomCrop")
        if any(self._pad[0] + self._pad[1]):
            widths = [(0, 0)] * x.ndim
            widths[ax_h], widths[ax_w] = self._pad
            x = np.pad(x, widths, constant_values=self._pad_value)
        h, w = x.shape[ax_h], x.shape[ax_w]
        cw, ch = fit_inside(w, h, *self._size)
        rng = transform_rng()
        x0, y0 = int(rng.integers(0, w - cw + 1)), int(rng.integers(0, h - ch + 1))
        return crop_resize(x, x0, y0, cw, ch, self._size, self._method)


class CropResize:
    """Crops the ``width`` x ``height`` window whose top-left pixel is ``(x, y)``, then resizes it
    to ``size`` (an int: square, or ``(width, height)``) when ``size`` is given.

    Works on HWC/HW images and NHWC batches. ``interpolation`` is as in ``Resize``
    (None: bilinear). Raises ValueError for a negative corner, a non-positive window,
    or, when called, a window that leaves the image.
    """

    def __init__(self, x: int, y: int, width: int, height: int, size: int | tuple[int, int] | None = None,
                 interpolation: Any = None):
        for name, value, low in (("x", x, 0), ("y", y, 0), ("width", width, 1), ("height", height, 1)):
            if not isinstance(value, (int, np.integer)) or value < low:
                raise ValueError(f"CropResize: {name} must be an int >= {low}, got {value!r}")
        self._box = int(x), int(y), int(width), int(height)
        self._size = size_wh(size, "CropResize") if size is not None else None
        self._method = interpolation_name(1 if interpolation is None else interpolation, "CropResize")

    def __call__(self, img: Any) -> np.ndarray:
        img = np.asarray(img)
        ax_h, ax_w = hw_axes(img, "CropResize")
        x, y, width, height = self._box
        if x + width > img.shape[ax_w] or y + height > img.shape[ax_h]:
            raise ValueError(f"CropResize: the window x={x}, y={y}, width={width}, height={height} does not fit "
                             f"in an image of width {img.shape[ax_w]} and height {img.shape[ax_h]} (shape {img.shape})")
        if self._size is None:
            index = [slice(None)] * img.ndim
            index[ax_h], index[ax_w] = slice(y, y + height), slice(x, x + width)
            return img[tuple(index)]
        return crop_resize(img, x, y, width, height, self._size, self._method)
