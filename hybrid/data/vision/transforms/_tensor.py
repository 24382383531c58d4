"""Conversions to network input: Cast, ToTensor, Normalize."""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np


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
        out = np.transpose(x, (2, 0, 1) if x.ndim == 3 else (0, 3, 1, 2)).astype(np.float32)
        out /= np.float32(255)
        return out


class Normalize:
    """``(x[c] - mean[c]) / std[c]`` on CHW images (or NCHW batches); returns float32.

    ``mean`` and ``std`` are numbers or one value per channel. Raises ValueError when
    their length matches neither 1 nor the number of channels.
    """

    def __init__(self, mean: float | Sequence[float] = 0.0, std: float | Sequence[float] = 1.0):
        self._mean = np.asarray(mean, np.float32).reshape(-1)
        self._std = np.asarray(std, np.float32).reshape(-1)

    def __call__(self, x: Any) -> np.ndarray:
        x = np.asarray(x)
        if x.ndim not in (3, 4):
            raise ValueError(f"Normalize: expected a (C, H, W) image or an (N, C, H, W) batch, got shape {x.shape}")
        channels = x.shape[-3]
        stats = []
        for name, value in (("mean", self._mean), ("std", self._std)):
            if value.size not in (1, channels):
                raise ValueError(f"Normalize: {name} has {value.size} values but the input has {channels} "
                                 f"channels (shape {x.shape})")
            stats.append(value.reshape(-1, 1, 1))
        out = np.empty(x.shape, np.float32)
        np.subtract(x, stats[0], out=out, casting="unsafe")
        np.divide(out, stats[1], out=out)
        return out
