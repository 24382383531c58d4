"""Rotation of CHW float32 images about their centre (Gluon's ``RandomRotation``)."""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..._rng import transform_rng


def _zoom(height: int, width: int, radians: float, zoom_in: bool, zoom_out: bool) -> float:
    """How much the sampling grid is scaled so the rotated image fills (zoom_in) or holds (zoom_out) the frame."""
    if not (zoom_in or zoom_out):
        return 1.0
    radius, corner = math.hypot(height, width), math.atan(height / width)
    turn = abs(radians)
    max_x = max(abs(radius * math.cos(corner + turn)), abs(radius * math.cos(corner - turn)))
    max_y = max(abs(radius * math.sin(corner + turn)), abs(radius * math.sin(corner - turn)))
    if zoom_out:
        return max(max_x / width, max_y / height)
    return min(width / max_x, height / max_y)


def rotate(img: np.ndarray, degrees: float, zoom_in: bool = False, zoom_out: bool = False) -> np.ndarray:
    """``img`` (C, H, W) rotated counter-clockwise by ``degrees`` about its centre, same shape.

    Output pixel ``(row, col)`` samples the source bilinearly at the point rotated from it
    (pixel indices, centre ``((H - 1) / 2, (W - 1) / 2)``); source pixels outside the
    image count as 0. ``zoom_in`` scales so no such pixel shows, ``zoom_out`` so the
    whole source fits.
    """
    channels, height, width = img.shape
    radians = math.radians(degrees)
    scale = _zoom(height, width, radians, zoom_in, zoom_out)
    cy, cx = (height - 1) / 2, (width - 1) / 2
    rows = (np.arange(height, dtype=np.float64) - cy)[:, None]
    cols = (np.arange(width, dtype=np.float64) - cx)[None, :]
    cos, sin = math.cos(radians) * scale, math.sin(radians) * scale
    src_x = cols * cos - rows * sin + cx
    src_y = cols * sin + rows * cos + cy
    x0, y0 = np.floor(src_x).astype(np.intp), np.floor(src_y).astype(np.intp)
    fx, fy = (src_x - x0).astype(np.float32), (src_y - y0).astype(np.float32)
    out = np.zeros_like(img)
    for dy, dx, weight in ((0, 0, (1 - fy) * (1 - fx)), (0, 1, (1 - fy) * fx),
                           (1, 0, fy * (1 - fx)), (1, 1, fy * fx)):
        ys, xs = y0 + dy, x0 + dx
        inside = (ys >= 0) & (ys < height) & (xs >= 0) & (xs < width)
        values = img[:, np.clip(ys, 0, height - 1), np.clip(xs, 0, width - 1)]
        out += values * np.where(inside, weight, np.float32(0))
    return out


class RandomRotation:
    """Rotates by an angle (degrees) drawn uniformly from ``angle_limits = (lower, upper)``.

    As in Gluon it takes float32 CHW images or NCHW batches (use it after ``ToTensor``),
    rotating each image of a batch by its own angle, and rotates at all with probability
    ``rotate_with_proba``. See ``rotate`` for ``zoom_in`` and ``zoom_out``.

    Raises ValueError for unordered limits, both zooms, or a probability outside [0, 1];
    TypeError when called on a non-float32 image.
    """

    def __init__(self, angle_limits: tuple[float, float], zoom_in: bool = False, zoom_out: bool = False,
                 rotate_with_proba: float = 1.0):
        try:
            lower, upper = (float(v) for v in angle_limits)
        except (TypeError, ValueError):
            raise ValueError(f"RandomRotation: angle_limits must be a pair (lower, upper) of degrees, "
                             f"got {angle_limits!r}") from None
        if not lower < upper:
            raise ValueError(f"RandomRotation: angle_limits must satisfy lower < upper, got {angle_limits!r}")
        if zoom_in and zoom_out:
            raise ValueError("RandomRotation: zoom_in and zoom_out cannot both be True")
        if not 0 <= rotate_with_proba <= 1:
            raise ValueError(f"RandomRotation: rotate_with_proba must be in [0, 1], got {rotate_with_proba!r}")
        self._limits, self._zoom = (lower, upper), (bool(zoom_in), bool(zoom_out))
        self._proba = float(rotate_with_proba)

    def __call__(self, x: Any) -> np.ndarray:
        x = np.asarray(x)
        rng = transform_rng()
        if rng.random() > self._proba:
            return x
        if x.dtype != np.float32:
            raise TypeError(f"RandomRotation: expected a float32 image (use it after ToTensor), got dtype {x.dtype}")
        if x.ndim not in (3, 4):
            raise ValueError(f"RandomRotation: expected a (C, H, W) image or an (N, C, H, W) batch, "
                             f"got shape {x.shape}")
        if x.ndim == 3:
            return rotate(x, rng.uniform(*self._limits), *self._zoom)
        angles = rng.uniform(*self._limits, size=len(x))
        return np.stack([rotate(img, angle, *self._zoom) for img, angle in zip(x, angles)]) if len(x) else x

    def __repr__(self) -> str:
        return (f"RandomRotation({self._limits}, zoom_in={self._zoom[0]}, zoom_out={self._zoom[1]}, "
                f"rotate_with_proba={self._proba})")
