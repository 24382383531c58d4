"""Image resizing and cropping in NumPy, for images laid out HW, HWC or NHWC."""
from __future__ import annotations

from typing import Any

import numpy as np

# Gluon/OpenCV interpolation codes we implement.
_INTERPOLATIONS = {0: "nearest", 1: "bilinear", "nearest": "nearest", "bilinear": "bilinear"}


def interpolation_name(code: Any, who: str) -> str:
    """``'nearest'`` or ``'bilinear'`` for a Gluon code (0, 1) or name; ValueError otherwise."""
    try:
        return _INTERPOLATIONS[code]
    except (KeyError, TypeError):
        raise ValueError(f"{who}: interpolation must be 0 / 'nearest' or 1 / 'bilinear', got {code!r}") from None


def size_wh(size: Any, who: str) -> tuple[int, int]:
    """``(width, height)`` from an int (square) or a pair ``(w, h)``; ValueError otherwise."""
    pair = (size, size) if isinstance(size, (int, np.integer)) else tuple(size) if isinstance(size, (tuple, list)) \
        else None
    if pair is None or len(pair) != 2 or not all(isinstance(v, (int, np.integer)) and v > 0 for v in pair):
        raise ValueError(f"{who}: size must be a positive int or a pair (width, height), got {size!r}")
    return int(pair[0]), int(pair[1])


def hw_axes(img: np.ndarray, who: str) -> tuple[int, int]:
    """The height and width axes of an HW, HWC or NHWC image."""
    if img.ndim in (2, 3):
        return 0, 1
    if img.ndim == 4:
        return 1, 2
    raise ValueError(f"{who}: expected an image of shape (H, W), (H, W, C) or (N, H, W, C), got {img.shape}")


def _resize_axis(x: np.ndarray, axis: int, out_len: int, method: str) -> np.ndarray:
    in_len = x.shape[axis]
    scale = in_len / out_len
    if method == "nearest":  # OpenCV's rule: source index floor(i * scale)
        return np.take(x, np.minimum((np.arange(out_len) * scale).astype(np.intp), in_len - 1), axis)
    # Bilinear with pixel centres aligned: source coordinate (i + 0.5) * scale - 0.5, clamped to the image.
    src = np.clip((np.arange(out_len) + 0.5) * scale - 0.5, 0, in_len - 1)
    low = np.floor(src).astype(np.intp)
    high = np.minimum(low + 1, in_len - 1)
    shape = [1] * x.ndim
    shape[axis] = out_len
    frac = (src - low).astype(x.dtype).reshape(shape)
    return np.take(x, low, axis) * (1 - frac) + np.take(x, high, axis) * frac


def resize(img: np.ndarray, width: int, height: int, method: str = "bilinear") -> np.ndarray:
    """``img`` resized to ``height`` x ``width``; same layout and dtype (integers are rounded and clipped)."""
    ax_h, ax_w = hw_axes(img, "resize")
    if img.shape[ax_h] == height and img.shape[ax_w] == width:
        return img
    work = img if method == "nearest" or img.dtype.kind == "f" else img.astype(np.float32)
    out = _resize_axis(_resize_axis(work, ax_h, height, method), ax_w, width, method)
    if out.dtype != img.dtype:
        if img.dtype.kind in "iu":
            info = np.iinfo(img.dtype)
            out = np.clip(np.rint(out), info.min, info.max)
        out = out.astype(img.dtype)
    return out


def crop(img: np.ndarray, x0: int, y0: int, width: int, height: int, size: tuple[int, int] | None = None,
         method: str = "bilinear") -> np.ndarray:
    """The ``width`` x ``height`` window at column ``x0``, row ``y0``, resized to ``size=(w, h)`` if given."""
    ax_h, ax_w = hw_axes(img, "crop")
    index = [slice(None)] * img.ndim
    index[ax_h], index[ax_w] = slice(y0, y0 + height), slice(x0, x0 + width)
    out = img[tuple(index)]
    return resize(out, size[0], size[1], method) if size is not None else out


def fit_inside(src_w: int, src_h: int, want_w: int, want_h: int) -> tuple[int, int]:
    """The largest ``(w, h)`` with the aspect ratio of ``want`` that fits in the source
    (``want`` itself when it fits)."""
    w, h = float(want_w), float(want_h)
    if h > src_h:
        w, h = w * src_h / h, float(src_h)
    if w > src_w:
        w, h = float(src_w), h * src_w / w
    return max(int(w), 1), max(int(h), 1)
