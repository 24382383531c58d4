"""Image transforms on NumPy arrays (mirrors ``gluon.data.vision.transforms``).

Images are HWC arrays (``(H, W)`` and batches ``(N, H, W, C)`` work where it
makes sense) until ``ToTensor`` turns them into CHW float32. Every transform is
a plain picklable callable that uses NumPy only, so it can run in DataLoader
worker processes. Random transforms draw from ``hybrid.data.transform_rng()``.
"""
from __future__ import annotations

import math
from typing import Any, Callable, Sequence

import numpy as np

from .._rng import transform_rng
from ._image import crop, fit_inside, hw_axes, interpolation_name, resize, size_wh

__all__ = ["Compose", "Cast", "ToTensor", "Normalize", "Resize", "CenterCrop", "RandomResizedCrop",
           "RandomFlipLeftRight", "RandomCrop"]


class Compose:
    """Applies ``transforms`` in order: ``Compose([Resize(32), ToTensor()])``."""

    def __init__(self, transforms: Sequence[Callable]):
        self._transforms = list(transforms)

    def __call__(self, x: Any) -> Any:
        for transform in self._transforms:
            x = transform(x)
        return x

    def __repr__(self) -> str:
        return f"Compose({self._transforms!r})"


class Cast:
    """Converts to ``dtype`` (default float32)."""

    def __init__(self, dtype: Any = "float32"):
        self._dtype = np.dtype(dtype)

    def __call__(self, x: Any) -> np.ndarray:
        return np.asarray(x).astype(self._dtype, copy=False)


class ToTensor:
    """HWC image with values in [0, 255] -> CHW float32 in [0, 1] (NHWC -> NCHW for a batch).

    Raises ValueError for inputs that are not 3-D or 4-D.
    """

    def __call__(self, x: Any) -> np.ndarray:
        x = np.asarray(x)
        if x.ndim not in (3, 4):
            raise ValueError(f"ToTensor: expected an (H, W, C) image or an (N, H, W, C) batch, got shape {x.shape}")
        axes = (2, 0, 1) if x.ndim == 3 else (0, 3, 1, 2)
        return np.transpose(x, axes).astype(np.float32) / np.float32(255)


class Normalize:
    """``(x[c] - mean[c]) / std[c]`` on CHW images (or NCHW batches); returns float32.

    ``mean`` and ``std`` are numbers or one value per channel. Raises ValueError when
    their length matches neither 1 nor the number of channels.
    """

    def __init__(self, mean: float | Sequence[float] = 0.0, std: float | Sequence[float] = 1.0):
        self._mean = np.asarray(mean, np.float32).reshape(-1)
        self._std = np.asarray(std, np.float32).reshape(-1)

    def __call__(self, x: Any) -> np.ndarray:
        x = np.asarray(x, np.float32)
        if x.ndim not in (3, 4):
            raise ValueError(f"Normalize: expected a (C, H, W) image or an (N, C, H, W) batch, got shape {x.shape}")
        channels = x.shape[-3]
        stats = []
        for name, value in (("mean", self._mean), ("std", self._std)):
            if value.size not in (1, channels):
                raise ValueError(f"Normalize: {name} has {value.size} values but the input has {channels} "
                                 f"channels (shape {x.shape})")
            stats.append(value.reshape(-1, 1, 1))
        return (x - stats[0]) / stats[1]


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
        return resize(x, width, height, self._method)


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
        return crop(x, (w - cw) // 2, (h - ch) // 2, cw, ch, self._size, self._method)


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
                return crop(x, x0, y0, cw, ch, self._size, self._method)
        return self._fallback(x)


class RandomFlipLeftRight:
    """Mirrors the image horizontally with probability ``p`` (0.5)."""

    def __init__(self, p: float = 0.5):
        self._p = p

    def __call__(self, x: Any) -> np.ndarray:
        x = np.asarray(x)
        return np.flip(x, hw_axes(x, "RandomFlipLeftRight")[1]) if transform_rng().random() < self._p else x


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
        return crop(x, x0, y0, cw, ch, self._size, self._method)
