"""Crop-and-resize of uint8 images through Pillow, when Pillow is installed.

Pillow's affine bilinear sampling maps output pixel centres to the source as
``(i + 0.5) * in / out - 0.5`` (no antialiasing), the same rule as the NumPy
``resize``; its 8-bit arithmetic gives results within 1 of the exact value, as
OpenCV's fixed-point ``INTER_LINEAR`` does. When every axis grows, the cheaper
``Image.resize`` computes the same sampling.
"""
from __future__ import annotations

import numpy as np

from .._image import crop

try:
    from PIL import Image as _Image
except ImportError:  # Pillow is optional: the NumPy path is used
    _Image = None

_MODES = {1: "L", 3: "RGB"}  # not RGBA: Pillow premultiplies alpha when it resamples


def _pillow_eligible(img: np.ndarray, method: str) -> bool:
    return (_Image is not None and method == "bilinear" and img.dtype == np.uint8
            and (img.ndim == 2 or (img.ndim == 3 and img.shape[2] in _MODES)))


def crop_resize(img: np.ndarray, x0: int, y0: int, width: int, height: int, size: tuple[int, int],
                method: str = "bilinear") -> np.ndarray:
    """The ``width`` x ``height`` window at ``(x0, y0)`` resized to ``size = (w, h)``; HW, HWC or NHWC."""
    out_w, out_h = size
    if (out_w, out_h) == (width, height) or not _pillow_eligible(img, method):
        return crop(img, x0, y0, width, height, size, method)
    window = np.ascontiguousarray(img[y0:y0 + height, x0:x0 + width])
    channels = 1 if window.ndim == 2 else window.shape[2]
    pil = _Image.fromarray(window.reshape(height, width) if channels == 1 else window, _MODES[channels])
    if out_w >= width and out_h >= height:
        result = pil.resize((out_w, out_h), _Image.BILINEAR)
    else:
        result = pil.transform((out_w, out_h), _Image.AFFINE, (width / out_w, 0, 0, 0, height / out_h, 0),
                               resample=_Image.BILINEAR)
    return np.asarray(result).reshape((out_h, out_w) + img.shape[2:])
