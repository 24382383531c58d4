"""The batches of ``mx.io.ImageRecordIter``: decoded and augmented images read from an MXNet image RecordIO
file.

The records are those ``im2rec.py`` and ``mx.recordio.pack_img`` write: MXNet's 24-byte header (its label,
or ``flag`` float32 labels after it) and an encoded image. As MXNet 1.9.1's iterator does, each record is
decoded with OpenCV (BGR), augmented by MXNet's default augmenter (resize the shorter side, affine
transform, pad, crop), then turned into a (C, H, W) array in RGB order: ``(pixel - mean) * scale / std``
as float32, or the pixels as uint8, or ``pixel - round(mean)`` saturated to int8. Decoding runs on a thread
pool (OpenCV releases the GIL) and batches are decoded ahead of use.

Batches follow MXNet's order and pads: records in file order (or MXNet's shuffle for its ``seed``), the last
batch of an epoch filled from the start with ``round_batch`` (``pad`` counts those rows) and the next epoch
going on from there.
"""
from __future__ import annotations

import collections
import concurrent.futures
import logging
import math
import os
import weakref
from typing import Any

import numpy as np

from ..recordio import MXRecordIO, RecordIOError, unpack

__all__ = ["RecordBatches"]

_LOG = logging.getLogger(__name__)
_RAND_MAGIC = 111   # MXNet seeds its shuffles with 111 + seed

# MXNet's arguments and their defaults (ImageRecParserParam, ImageRecordParam, BatchParam, PrefetcherParam,
# DefaultImageAugmentParam, ImageNormalizeParam); data_shape and batch_size have none
_DEFAULTS: dict[str, Any] = {
    "path_imglist": "", "path_imgrec": "", "path_imgidx": "", "aug_seq": "aug_default", "label_width": 1,
    "data_shape": None, "preprocess_threads": 4, "verbose": True, "num_parts": 1, "part_index": 0,
    "device_id": 0, "shuffle_chunk_size": 0, "shuffle_chunk_seed": 0, "seed_aug": None,
    "shuffle": False, "seed": 0, "batch_size": None, "round_batch": True,
    "prefetch_buffer": 4, "ctx": "gpu", "dtype": None,
    "resize": -1, "rand_crop": False, "random_resized_crop": False, "max_rotate_angle": 0,
    "max_aspect_ratio": 0.0, "min_aspect_ratio": None, "max_shear_ratio": 0.0, "max_crop_size": -1,
    "min_crop_size": -1, "max_random_scale": 1.0, "min_random_scale": 1.0, "max_random_area": 1.0,
    "min_random_area": 1.0, "max_img_size": 1e10, "min_img_size": 0.0, "brightness": 0.0, "contrast": 0.0,
    "saturation": 0.0, "pca_noise": 0.0, "random_h": 0, "random_s": 0, "random_l": 0, "rotate": -1,
    "rotate_list": "", "fill_value": 255, "inter_method": 1, "pad": 0,
    "mirror": False, "rand_mirror": False, "mean_img": "", "mean_r": 0.0, "mean_g": 0.0, "mean_b": 0.0,
    "mean_a": 0.0, "std_r": 1.0, "std_g": 1.0, "std_b": 1.0, "std_a": 1.0, "scale": 1.0,
    "max_random_contrast": 0.0, "max_random_illumination": 0.0,
    "data_name": "data", "label_name": "softmax_label",
}
_DTYPES = {None: np.float32, "float32": np.float32, "uint8": np.uint8, "int8": np.int8}
_INTER_METHODS = (0, 1, 2, 3, 4, 9, 10)
# AlexNet's PCA lighting: eigenvalue times eigenvector, rows for R, G, B
_EIGVEC = np.array([[55.46 * -0.5675, 4.794 * 0.7192, 1.148 * 0.4009],
                    [55.46 * -0.5808, 4.794 * -0.0045, 1.148 * -0.8140],
                    [55.46 * -0.5836, 4.794 * -0.6948, 1.148 * 0.4203]], np.float32)


def _cv2() -> Any:
    try:
        import cv2
    except ImportError:
        raise ImportError("ImageRecordIter decodes and resizes images with OpenCV, which is not installed: "
                          "pip install hybrid[image] (or pip install opencv-python-headless)") from None
    return cv2


def _bool(value: Any) -> bool:
    if isinstance(value, str):
        if value.lower() in ("true", "1"):
            return True
        if value.lower() in ("false", "0"):
            return False
        raise ValueError(f"not a boolean: {value!r}")
    return bool(value)


class _Params:
    """The iterator's arguments, MXNet's defaults filled in, checked and converted.

    Raises TypeError for an unknown or missing argument, ValueError for a bad value (each names it).
    """

    # the arguments, as MXNet names them
    label_width: int
    preprocess_threads: int
    num_parts: int
    part_index: int
    device_id: int
    shuffle_chunk_size: int
    shuffle_chunk_seed: int
    seed: int
    batch_size: int
    prefetch_buffer: int
    resize: int
    max_rotate_angle: int
    max_crop_size: int
    min_crop_size: int
    random_h: int
    random_s: int
    random_l: int
    rotate: int
    fill_value: int
    inter_method: int
    pad: int
    verbose: bool
    shuffle: bool
    round_batch: bool
    rand_crop: bool
    random_resized_crop: bool
    mirror: bool
    rand_mirror: bool
    max_aspect_ratio: float
    max_shear_ratio: float
    max_random_scale: float
    min_random_scale: float
    max_random_area: float
    min_random_area: float
    max_img_size: float
    min_img_size: float
    brightness: float
    contrast: float
    saturation: float
    pca_noise: float
    mean_r: float
    mean_g: float
    mean_b: float
    mean_a: float
    std_r: float
    std_g: float
    std_b: float
    std_a: float
    scale: float
    max_random_contrast: float
    max_random_illumination: float
    path_imglist: str
    path_imgrec: str
    path_imgidx: str
    aug_seq: str
    ctx: str
    rotate_list: str
    mean_img: str
    data_name: str
    label_name: str
    dtype: str | None
    min_aspect_ratio: float | None
    seed_aug: int | None
    data_shape: tuple[int, int, int]
    np_dtype: np.dtype
    rotations: list[int]
    aspect: tuple[float, float]

    def __init__(self, who: str, kwargs: dict[str, Any], defaults: dict[str, Any]):
        unknown = sorted(set(kwargs) - set(_DEFAULTS))
        if unknown:
            raise TypeError(f"{who}: unknown argument(s) {unknown}; MXNet 1.9.1's ImageRecordIter has no such "
                            f"argument (check the spelling)")
        values = {**_DEFAULTS, **kwargs, **defaults}
        for name in ("data_shape", "batch_size"):
            if values[name] is None:
                raise TypeError(f"{who}: missing required argument {name!r}")
        self.who = who
        try:
            self._convert(values)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"{who}: {exc}") from None

    def _convert(self, v: dict[str, Any]) -> None:
        ints = ("label_width", "preprocess_threads", "num_parts", "part_index", "device_id", "shuffle_chunk_size",
                "shuffle_chunk_seed", "seed", "batch_size", "prefetch_buffer", "resize", "max_rotate_angle",
                "max_crop_size", "min_crop_size", "random_h", "random_s", "random_l", "rotate", "fill_value",
                "inter_method", "pad")
        bools = ("verbose", "shuffle", "round_batch", "rand_crop", "random_resized_crop", "mirror", "rand_mirror")
        for name, value in v.items():
            if name in ints:
                if isinstance(value, float) and not value.is_integer():
                    raise ValueError(f"{name} must be an int, got {value!r}")
                value = int(value)
            elif name in bools:
                value = _bool(value)
            elif isinstance(_DEFAULTS[name], float) or name == "min_aspect_ratio":
                value = None if value is None else float(value)
            setattr(self, name, value)
        shape = v["data_shape"]
        shape = tuple(int(d) for d in (shape if not isinstance(shape, str) else shape.strip("()[] ").split(",")))
        if len(shape) != 3 or min(shape) <= 0:
            raise ValueError(f"data_shape must be (channels, height, width) of positive ints, got {v['data_shape']!r}")
        if shape[0] not in (1, 3, 4):
            raise ValueError(f"data_shape[0] (channels) must be 1, 3 or 4, got {shape[0]}")
        self.data_shape = shape
        self.seed_aug = None if v["seed_aug"] in (None, "None") else int(v["seed_aug"])
        if self.batch_size <= 0:
            raise ValueError(f"batch_size must be a positive int, got {v['batch_size']!r}")
        if self.label_width < 1:
            raise ValueError(f"label_width must be at least 1, got {self.label_width}")
        if self.preprocess_threads < 1:
            raise ValueError(f"preprocess_threads must be at least 1, got {self.preprocess_threads}")
        if not 0 <= self.part_index < self.num_parts:
            raise ValueError(f"part_index must be in [0, num_parts), got part_index={self.part_index}, "
                             f"num_parts={self.num_parts}")
        if self.dtype not in _DTYPES:
            raise ValueError(f"dtype must be one of 'float32', 'uint8', 'int8' (or None), got {self.dtype!r}")
        self.np_dtype = np.dtype(_DTYPES[self.dtype])
        if self.inter_method not in _INTER_METHODS:
            raise ValueError(f"inter_method must be one of {_INTER_METHODS} (0 nearest, 1 bilinear, 2 cubic, "
                             f"3 area, 4 lanczos4, 9 auto, 10 random), got {self.inter_method}")
        if self.aug_seq != "aug_default":
            raise ValueError(f"aug_seq must be 'aug_default' (MXNet's only image augmenter), got {self.aug_seq!r}")
        if self.ctx not in ("cpu", "gpu"):
            raise ValueError(f"ctx must be 'cpu' or 'gpu', got {self.ctx!r}")
        if not self.path_imgrec:
            raise ValueError("path_imgrec is required: the image RecordIO (.rec) file to read")
        if self.random_resized_crop and (self.rand_crop or self.min_crop_size != -1 or self.max_crop_size != -1
                                         or self.min_random_scale != 1.0 or self.max_random_scale != 1.0):
            raise ValueError("random_resized_crop=True conflicts with rand_crop, min_crop_size, max_crop_size, "
                             "min_random_scale and max_random_scale")
        if (self.min_crop_size != -1 or self.max_crop_size != -1) and self.min_crop_size > self.max_crop_size:
            raise ValueError(f"min_crop_size ({self.min_crop_size}) is larger than max_crop_size "
                             f"({self.max_crop_size})")
        self.rotations = [int(a) for a in str(self.rotate_list).split(",") if a.strip()]
        if self.min_aspect_ratio is not None:
            self.aspect = (self.min_aspect_ratio, self.max_aspect_ratio)
        else:
            self.aspect = (1.0 - self.max_aspect_ratio, 1.0 + self.max_aspect_ratio)

    @property
    def affine(self) -> bool:
        """Whether MXNet's affine step (rotate, shear, scale, aspect, image size limits) runs."""
        return (self.max_rotate_angle > 0 or self.max_shear_ratio > 0 or self.rotate > 0 or bool(self.rotations)
                or self.max_random_scale != 1.0 or self.min_random_scale != 1.0
                or (not self.random_resized_crop and self.aspect != (1.0, 1.0))
                or self.max_img_size != 1e10 or self.min_img_size != 0.0)


# -- where the records are --------------------------------------------------------------------------------------
def _check_file(path: str, argument: str, who: str) -> None:
    if os.path.isdir(path):
        raise ValueError(f"{who}: {argument} {path!r} is a folder; give the file itself (reading a folder of "
                         f".rec files is not supported)")
    if not os.path.isfile(path):
        raise FileNotFoundError(f"{who}: {argument} {path!r}: no such file")


def _index_offsets(params: _Params, size: int) -> list[int]:
    """The record offsets of this part from the .idx file: sorted, split into equal runs of records."""
    offsets = []
    with open(params.path_imgidx, "rb") as f:
        for number, line in enumerate(f.read().splitlines(), 1):
            fields = line.split()
            if not fields:
                continue
            try:
                offset = int(fields[1])
            except (IndexError, ValueError):
                raise RecordIOError(f"{params.who}: path_imgidx {params.path_imgidx!r}, line {number}: expected "
                                    f"'<key>\\t<byte offset>', got {line[:80]!r}") from None
            if not 0 <= offset < size:
                raise RecordIOError(f"{params.who}: path_imgidx {params.path_imgidx!r}, line {number}: offset "
                                    f"{offset} is outside {params.path_imgrec!r} ({size} bytes): the index does "
                                    f"not match the file")
            offsets.append(offset)
    if not offsets:
        raise RecordIOError(f"{params.who}: path_imgidx {params.path_imgidx!r} holds no records")
    offsets.sort()
    step = -(-len(offsets) // params.num_parts)
    return offsets[params.part_index * step:(params.part_index + 1) * step]


def _scanned_offsets(params: _Params, size: int) -> list[int]:
    """The record offsets of this part, scanning the .rec file: the records that start in the part's byte
    range (the file cut into ``num_parts`` ranges of equal, 4-byte aligned length)."""
    step = -(-size // params.num_parts)
    step = -(-step // 4) * 4
    begin, end = step * params.part_index, step * (params.part_index + 1)
    offsets = []
    reader = MXRecordIO(params.path_imgrec, "r")
    try:
        while True:
            offset = reader.tell()
            if offset >= end or reader.read() is None:
                break
            if offset >= begin:
                offsets.append(offset)
    finally:
        reader.close()
    return offsets


def _label_list(params: _Params) -> dict[int, np.ndarray]:
    """The labels of ``path_imglist`` (im2rec's .lst: index, ``label_width`` labels, path) by image index."""
    _check_file(params.path_imglist, "path_imglist", params.who)
    labels = {}
    with open(params.path_imglist) as f:
        for number, line in enumerate(f, 1):
            fields = line.split()
            if not fields:
                continue
            try:
                labels[int(fields[0])] = np.array([float(x) for x in fields[1:1 + params.label_width]], np.float32)
            except ValueError:
                raise ValueError(f"{params.who}: path_imglist {params.path_imglist!r}, line {number}: expected "
                                 f"'<index>\\t<{params.label_width} label(s)>\\t<path>', got {line[:80]!r}") from None
            if labels[int(fields[0])].size != params.label_width:
                raise ValueError(f"{params.who}: path_imglist {params.path_imglist!r}, line {number} has fewer than "
                                 f"label_width={params.label_width} labels")
    return labels


class _Shuffler:
    """``std::shuffle`` over ``std::mt19937(111 + seed)``, the generator kept from one shuffle to the next (as
    MXNet's record readers keep theirs): Fisher-Yates from the front, each draw by rejection."""

    def __init__(self, seed: int):
        self._generator = np.random.RandomState((_RAND_MAGIC + seed) % 2 ** 32)._bit_generator

    def permutation(self, n: int) -> list[int]:
        order = list(range(n))
        for i in range(1, n):
            scaling = 0xFFFFFFFF // (i + 1)
            limit = (i + 1) * scaling
            while True:
                word = int(self._generator.random_raw())
                if word < limit:
                    break
            j = word // scaling
            order[i], order[j] = order[j], order[i]
        return order

    def state(self) -> Any:
        return self._generator.state

    def restore(self, state: Any) -> None:
        self._generator.state = state


# -- one image ----------------------------------------------------------------------------------------------------
def _round_half_away(x: Any) -> Any:
    """``std::round``: halves away from zero."""
    return np.sign(x) * np.floor(np.abs(x) + 0.5)


def _inter(params: _Params, old: tuple[int, int], new: tuple[float, float], rng: np.random.Generator) -> int:
    """MXNet's interpolation for a resize from ``old`` to ``new`` (width, height): 9 picks by direction, 10 at
    random."""
    if params.inter_method == 9:
        if new[0] > old[0] and new[1] > old[1]:
            return 2
        if new[0] < old[0] and new[1] < old[1]:
            return 3
        return 1
    if params.inter_method == 10:
        return int(rng.integers(0, 5))
    return params.inter_method


def _affine(cv2: Any, img: np.ndarray, p: _Params, rng: np.random.Generator) -> np.ndarray:
    """MXNet's random rotation, shear, scale and aspect change in one ``warpAffine``."""
    shear = rng.uniform() * p.max_shear_ratio * 2 - p.max_shear_ratio
    angle = int(rng.integers(-p.max_rotate_angle, p.max_rotate_angle + 1))
    if p.rotate > 0:
        angle = p.rotate
    if p.rotations:
        angle = p.rotations[int(rng.integers(0, len(p.rotations)))]
    a, b = math.cos(angle / 180.0 * math.pi), math.sin(angle / 180.0 * math.pi)
    scale = ratio = 1.0
    if not p.random_resized_crop:
        scale = rng.uniform() * (p.max_random_scale - p.min_random_scale) + p.min_random_scale
        ratio = rng.uniform() * (p.aspect[1] - p.aspect[0]) + p.aspect[0]
    hs = 2 * scale / (1 + ratio)
    ws = ratio * hs
    rows, cols = img.shape[:2]
    new_w = max(p.min_img_size, min(p.max_img_size, scale * cols))
    new_h = max(p.min_img_size, min(p.max_img_size, scale * rows))
    m = np.array([[hs * a - shear * b * ws, hs * b + shear * a * ws, 0], [-b * ws, a * ws, 0]], np.float32)
    m[0, 2] = (new_w - (m[0, 0] * cols + m[0, 1] * rows)) / 2
    m[1, 2] = (new_h - (m[1, 0] * cols + m[1, 1] * rows)) / 2
    inter = _inter(p, (cols, rows), (new_w, new_h), rng)
    fill = (p.fill_value,) * 4
    out = cv2.warpAffine(img, m, (int(new_w), int(new_h)), flags=inter, borderMode=cv2.BORDER_CONSTANT,
                         borderValue=fill)
    return out.reshape(out.shape[:2] + img.shape[2:])


def _resize(cv2: Any, img: np.ndarray, size: tuple[int, int], inter: int) -> np.ndarray:
    out = cv2.resize(img, size, interpolation=inter)
    return out.reshape(out.shape[:2] + img.shape[2:])


def _crop(cv2: Any, img: np.ndarray, p: _Params, rng: np.random.Generator) -> np.ndarray:
    """MXNet's crops to data_shape: random resized, random (or centred) of a crop size, or centred."""
    _, height, width = p.data_shape
    rows, cols = img.shape[:2]
    if p.random_resized_crop:
        if (p.max_random_area, p.min_random_area) != (1.0, 1.0) or p.aspect != (1.0, 1.0):
            if not 0 < p.aspect[0] <= p.aspect[1] or p.min_random_area > p.max_random_area:
                raise ValueError(f"{p.who}: random_resized_crop needs 0 < min aspect ratio <= max aspect ratio and "
                                 f"min_random_area <= max_random_area")
            area = rows * cols
            for _ in range(10):
                target = area * rng.uniform(p.min_random_area, p.max_random_area)
                ratio = rng.uniform(*p.aspect)
                y_area = int(_round_half_away(math.sqrt(target / ratio)))
                x_area = int(_round_half_away(math.sqrt(target * ratio)))
                if rng.uniform() > 0.5:
                    y_area, x_area = x_area, y_area
                if y_area <= rows and x_area <= cols:
                    y = int(rng.integers(0, rows - y_area + 1))
                    x = int(rng.integers(0, cols - x_area + 1))
                    inter = _inter(p, (x_area, y_area), (width, height), rng)
                    return _resize(cv2, img[y:y + y_area, x:x + x_area], (width, height), inter)
    elif p.max_crop_size != -1 or p.min_crop_size != -1:
        if cols < p.max_crop_size or rows < p.max_crop_size:
            raise ValueError(f"{p.who}: an image of {cols}x{rows} is smaller than max_crop_size={p.max_crop_size}")
        size = int(rng.integers(p.min_crop_size, p.max_crop_size + 1))
        y, x = rows - size, cols - size
        if p.rand_crop:
            y, x = int(rng.integers(0, y + 1)), int(rng.integers(0, x + 1))
        else:
            y, x = y // 2, x // 2
        inter = _inter(p, (size, size), (width, height), rng)
        return _resize(cv2, img[y:y + size, x:x + size], (width, height), inter)
    inter = _inter(p, (cols, rows), (width, height), rng)
    if rows < height:
        img = _resize(cv2, img, (int(np.float32(height) / np.float32(rows) * np.float32(cols)), height), inter)
        rows, cols = img.shape[:2]
    if cols < width:
        img = _resize(cv2, img, (width, int(np.float32(width) / np.float32(cols) * np.float32(rows))), inter)
        rows, cols = img.shape[:2]
    if rows < height or cols < width:
        raise ValueError(f"{p.who}: an image of {cols}x{rows} is smaller than data_shape {p.data_shape}")
    y, x = rows - height, cols - width
    if p.rand_crop:
        y, x = int(rng.integers(0, y + 1)), int(rng.integers(0, x + 1))
    else:
        y, x = y // 2, x // 2
    return img[y:y + height, x:x + width]


def _colour(cv2: Any, img: np.ndarray, p: _Params, rng: np.random.Generator) -> np.ndarray:
    """MXNet's brightness, contrast and saturation jitter (in a random order), HLS shifts and PCA noise."""
    if img.ndim != 3 or img.shape[2] != 3:
        return img
    if p.brightness > 0 or p.contrast > 0 or p.saturation > 0:
        alphas = [1.0 + rng.uniform(-x, x) for x in (p.brightness, p.contrast, p.saturation)]
        for i in rng.permutation(3):
            alpha = alphas[i]
            if i == 0:
                img = cv2.addWeighted(img, alpha, img, 0, 0.0)
            elif i == 1:
                grey = cv2.cvtColor(img, cv2.COLOR_RGB2GRAY)   # MXNet's choice of channel weights on BGR data
                img = cv2.addWeighted(img, alpha, img, 0, (1 - alpha) * float(grey.mean()))
            else:
                grey = cv2.cvtColor(cv2.cvtColor(img, cv2.COLOR_RGB2GRAY), cv2.COLOR_GRAY2BGR)
                img = cv2.addWeighted(img, alpha, grey, 1 - alpha, 0.0)
    if p.random_h or p.random_s or p.random_l:
        hls = cv2.cvtColor(img, cv2.COLOR_BGR2HLS).astype(np.int32)
        draws = [(rng.uniform() + 4 * rng.uniform()) / 5 for _ in range(3)]
        shift = [int(draws[0] * p.random_h * 2 - p.random_h), int(draws[2] * p.random_l * 2 - p.random_l),
                 int(draws[1] * p.random_s * 2 - p.random_s)]
        hls = np.clip(hls + np.array(shift), 0, np.array([180, 255, 255])).astype(np.uint8)
        img = cv2.cvtColor(hls, cv2.COLOR_HLS2BGR)
    if p.pca_noise > 0:
        alpha = rng.normal(0, p.pca_noise, 3).astype(np.float32)
        rgb = _EIGVEC @ alpha
        noisy = (img.astype(np.int32) + rgb[::-1]).astype(np.int32)   # truncated towards zero, as MXNet's
        img = np.clip(noisy, 0, 255).astype(np.uint8)
    return img


def _augment(cv2: Any, img: np.ndarray, p: _Params, rng: np.random.Generator) -> np.ndarray:
    """MXNet's default augmenter on one decoded (H, W, C) image; the result is (data height, width, C)."""
    if p.resize != -1:
        rows, cols = img.shape[:2]
        new = (p.resize, p.resize * rows // cols) if rows > cols else (p.resize * cols // rows, p.resize)
        img = _resize(cv2, img, new, _inter(p, (cols, rows), new, rng))
    if p.affine:
        img = _affine(cv2, img, p, rng)
    if p.pad > 0:
        out = cv2.copyMakeBorder(img, p.pad, p.pad, p.pad, p.pad, cv2.BORDER_CONSTANT, value=(p.fill_value,) * 4)
        img = out.reshape(out.shape[:2] + img.shape[2:])
    img = _crop(cv2, img, p, rng)
    return _colour(cv2, img, p, rng)


class _Decoder:
    """Turns one record into its (C, H, W) array and its labels, as MXNet's parser does."""

    def __init__(self, params: _Params, labels: dict[int, np.ndarray] | None, mean: np.ndarray | None):
        self.p = params
        self.labels = labels
        self.mean = mean
        self.cv2 = _cv2()
        self.reader = MXRecordIO(params.path_imgrec, "r")
        p = params
        channels = p.data_shape[0]
        self.swap = [0] if channels == 1 else [2, 1, 0] if channels == 3 else [2, 1, 0, 3]
        means = np.array([p.mean_r, p.mean_g, p.mean_b, p.mean_a], np.float32)
        stds = np.array([p.std_r, p.std_g, p.std_b, p.std_a], np.float32)
        if channels == 1:
            means, stds = means[:1], stds[:1]
        self.means, self.stds = means[:channels], stds[:channels]

    def image(self, payload: bytes, offset: int) -> np.ndarray:
        """The record's image decoded to BGR (or grey), (H, W, C) uint8."""
        cv2, channels = self.cv2, self.p.data_shape[0]
        buf = np.frombuffer(payload, np.uint8)
        jpeg = payload[:2] == b"\xff\xd8"
        flag = {1: cv2.IMREAD_GRAYSCALE, 3: cv2.IMREAD_COLOR, 4: cv2.IMREAD_UNCHANGED}[channels]
        if jpeg and channels != 4:  # MXNet decodes JPEGs with libjpeg-turbo, which ignores EXIF orientation
            flag |= cv2.IMREAD_IGNORE_ORIENTATION
        img = cv2.imdecode(buf, flag) if buf.size else None
        if img is None:
            raise RecordIOError(f"{self.p.who}: the image of the record at byte {offset} of "
                                f"{self.p.path_imgrec!r} does not decode ({len(payload)} bytes)")
        if img.ndim == 2:
            img = img[:, :, None]
        if img.shape[2] != channels:
            raise ValueError(f"{self.p.who}: the image of the record at byte {offset} of {self.p.path_imgrec!r} "
                             f"has {img.shape[2]} channels; data_shape asks for {channels}")
        return img

    def label(self, header: Any, offset: int) -> np.ndarray:
        p = self.p
        if self.labels is not None:
            try:
                return self.labels[int(header.id)]
            except KeyError:
                raise KeyError(f"{p.who}: path_imglist {p.path_imglist!r} has no label for image index "
                               f"{int(header.id)} (the record at byte {offset})") from None
        if header.flag > 0:
            if header.flag != p.label_width:
                raise ValueError(f"{p.who}: the record at byte {offset} of {p.path_imgrec!r} holds {header.flag} "
                                 f"labels but label_width is {p.label_width}")
            return np.asarray(header.label, np.float32)
        if p.label_width != 1:
            raise ValueError(f"{p.who}: the record at byte {offset} of {p.path_imgrec!r} holds one label; "
                             f"label_width={p.label_width} needs records packed with that many labels or a "
                             f"path_imglist")
        return np.array([header.label], np.float32)

    def __call__(self, offset: int, seed: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray, int]:
        """The record at ``offset`` as ((C, H, W) data, (label_width,) float32 labels, image id)."""
        p = self.p
        record, _ = self.reader._read_at(offset, f"record at byte {offset}")
        if record is None:
            raise RecordIOError(f"{p.who}: {p.path_imgrec!r} ends before byte {offset}, where the index puts a "
                                f"record")
        header, payload = unpack(record)
        label = self.label(header, offset)
        rng = np.random.default_rng(seed)
        img = _augment(self.cv2, self.image(payload, offset), p, rng)
        if img.shape[:2] != p.data_shape[1:]:
            raise ValueError(f"{p.who}: the record at byte {offset} augments to {img.shape[1]}x{img.shape[0]}, not "
                             f"data_shape {p.data_shape}")
        if (p.rand_mirror and rng.uniform() < 0.5) or p.mirror:
            img = img[:, ::-1]      # a permutation of the pixels: the same before normalising as after
        return self.normalize(img, rng), label, int(header.id)

    def normalize(self, img: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """(H, W, C) BGR uint8 to (C, H, W) RGB in the output dtype (a new array)."""
        p = self.p
        chw = img.transpose(2, 0, 1)[self.swap]
        if p.np_dtype == np.uint8:
            return chw
        if p.np_dtype == np.int8:
            mean = _round_half_away(self.mean if self.mean is not None else self.means[:, None, None])
            return np.clip(chw.astype(np.int16) - mean.astype(np.int16), -128, 127).astype(np.int8)
        contrast, illumination = np.float32(p.max_random_contrast), np.float32(p.max_random_illumination)
        scale = np.float32(p.scale)
        contrast = (np.float32(rng.uniform()) * contrast * 2 - contrast + 1) * scale
        illumination = (np.float32(rng.uniform()) * illumination * 2 - illumination) * scale
        mult = (contrast / self.stds)[:, None, None]
        bias = (illumination / self.stds)[:, None, None]
        mean = self.mean if self.mean is not None else self.means[:, None, None]
        out = chw.astype(np.float32)
        out -= mean
        out *= mult
        if np.any(bias != 0) or np.any(mult < 0):   # adding +0 changes nothing but -0 (from a negative mult)
            out += bias
        return out


# -- the iterator ---------------------------------------------------------------------------------------------
_Plan = collections.namedtuple("_Plan", ["positions", "pad", "seeds"])


class RecordBatches:
    """The batches of an image record file as MXNet's ``ImageRecordIter`` makes them (the order, the pads, the
    decoded images), for :class:`hybrid.mxnet.io.ImageRecordIter`.

    ``who`` names the iterator in errors; ``kwargs`` are its arguments, over ``defaults`` (the dtype of
    MXNet's uint8 and int8 iterators). ``read()`` gives the next batch as (data, label, pad, index) or None at
    the end of the epoch; ``rewind()`` starts the next epoch. Raises as ``ImageRecordIter`` documents.
    """

    def __init__(self, who: str, kwargs: dict[str, Any], defaults: dict[str, Any]):
        p = self.params = _Params(who, kwargs, defaults)
        _check_file(p.path_imgrec, "path_imgrec", p.who)
        size = os.path.getsize(p.path_imgrec)
        if p.path_imgidx:
            _check_file(p.path_imgidx, "path_imgidx", p.who)
            self._offsets = _index_offsets(p, size)
        else:
            self._offsets = _scanned_offsets(p, size)
        if not self._offsets:
            raise ValueError(f"{p.who}: part {p.part_index} of {p.num_parts} of {p.path_imgrec!r} holds no record")
        labels = _label_list(p) if p.path_imglist else None
        self._pool = concurrent.futures.ThreadPoolExecutor(max_workers=p.preprocess_threads,
                                                           thread_name_prefix=p.who)
        weakref.finalize(self, self._pool.shutdown, wait=False, cancel_futures=True)
        self._decoder = _Decoder(p, labels, None)
        self._aug_seed = (p.seed if p.seed_aug is None else p.seed_aug) % 2 ** 32
        self._drawn = 0          # images decoded so far: each gets its own random stream
        self._shuffler = _Shuffler(p.seed) if p.shuffle else None
        self._order: list[int] = []
        self._cursor = 0
        self._overflow = False
        self._pending: collections.deque = collections.deque()
        self._previous: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None
        if p.verbose:
            _LOG.info("%s: %s, %d records in part %d of %d, %d threads for decoding", p.who, p.path_imgrec,
                      len(self._offsets), p.part_index, p.num_parts, p.preprocess_threads)
        if p.np_dtype != np.uint8 and p.mean_img:
            self._decoder.mean = self._mean_image()
        self._new_pass()

    # -- order of the records ----------------------------------------------------------------------------
    def _new_pass(self) -> None:
        """Go back to the first record of the part (a new permutation when shuffling)."""
        n = len(self._offsets)
        self._order = self._shuffler.permutation(n) if self._shuffler is not None else list(range(n))
        self._cursor = 0

    def _state(self) -> tuple:
        return (self._order, self._cursor, self._overflow, self._drawn,
                None if self._shuffler is None else self._shuffler.state())

    def _restore(self, state: tuple) -> None:
        self._order, self._cursor, self._overflow, self._drawn, shuffler = state
        if self._shuffler is not None:
            self._shuffler.restore(shuffler)

    def _plan(self) -> _Plan | None:
        """The records of the next batch and its pad, as MXNet's parser takes them; None at the epoch's end."""
        if self._overflow:
            return None
        size, pad, wrapped = self.params.batch_size, 0, False
        rows: list[int] = []
        while len(rows) < size:
            if self._cursor < len(self._order):
                take = self._order[self._cursor:self._cursor + size - len(rows)]
                rows += take
                self._cursor += len(take)
                continue
            if not rows:
                return None
            if not self.params.round_batch:
                break
            if wrapped:
                raise ValueError(f"{self.params.who}: batch_size={size} needs more images than the "
                                 f"{len(self._order)} of part {self.params.part_index} of "
                                 f"{self.params.path_imgrec!r} to fill its last batch; use a smaller batch_size or "
                                 f"round_batch=False")
            wrapped, self._overflow = True, True
            pad = size - len(rows)
            self._new_pass()
        seeds = [(self._aug_seed, 0, self._drawn + i) for i in range(len(rows))]
        self._drawn += len(rows)
        return _Plan([self._offsets[i] for i in rows], pad, seeds)

    def _submit(self) -> None:
        """Plan batches and start decoding them, up to ``prefetch_buffer`` ahead."""
        while len(self._pending) < max(1, self.params.prefetch_buffer):
            state = self._state()
            plan = self._plan()
            if plan is None:
                self._restore(state)   # the end of the epoch is found again when it is reached
                return
            futures = [self._pool.submit(self._decoder, offset, seed) for offset, seed in zip(plan.positions,
                                                                                              plan.seeds)]
            self._pending.append((state, plan, futures))

    # -- batches ---------------------------------------------------------------------------------------------
    def read(self) -> tuple[np.ndarray, np.ndarray, int, np.ndarray] | None:
        """The next batch: (batch_size,) + data_shape data, float32 labels, its pad and the image ids (uint64);
        None at the end of the epoch."""
        self._submit()
        if not self._pending:
            return None
        _, plan, futures = self._pending.popleft()
        items = [future.result() for future in futures]
        self._submit()
        p = self.params
        data = np.empty((p.batch_size,) + p.data_shape, p.np_dtype)
        label = np.empty((p.batch_size, p.label_width), np.float32)
        index = np.zeros(p.batch_size, np.uint64)
        n = len(items)
        for row, (image, labels, image_id) in enumerate(items):
            data[row], label[row], index[row] = image, labels, image_id
        if n < p.batch_size:   # round_batch=False: the rows past the data keep the previous batch's values
            if self._previous is None:
                data[n:], label[n:] = 0, 0
            else:
                data[n:], label[n:], index[n:] = (x[n:] for x in self._previous)
        self._previous = (data, label, index)     # read only from here on: the batch's arrays are not reused
        return data, label.reshape(-1) if p.label_width == 1 else label, plan.pad, index

    def rewind(self) -> None:
        """Start the next epoch: after a padded last batch, go on from the images that filled it."""
        if self._pending:   # batches decoded ahead are dropped: the order goes back to after the last one read
            state = self._pending[0][0]
            for _, _, futures in self._pending:
                for future in futures:
                    future.cancel()
            self._pending.clear()
            self._restore(state)
        if self.params.round_batch and self._overflow:
            self._overflow = False     # go on after the images that filled the last batch
        else:
            self._new_pass()

    # -- mean image ------------------------------------------------------------------------------------------
    def _mean_image(self) -> np.ndarray:
        """The (C, H, W) mean image of ``mean_img``: loaded, or computed over this part and saved there."""
        from .ndarray import NDArray, load, save
        p = self.params
        if os.path.isfile(p.mean_img):
            loaded = load(p.mean_img)
            arrays = list(loaded.values()) if isinstance(loaded, dict) else list(loaded)
            if len(arrays) != 1:
                raise ValueError(f"{p.who}: mean_img {p.mean_img!r} holds {len(arrays)} arrays; it must hold one "
                                 f"(C, H, W) mean image")
            mean = np.asarray(arrays[0].asnumpy(), np.float32)
            if mean.shape != p.data_shape:
                raise ValueError(f"{p.who}: mean_img {p.mean_img!r} has shape {mean.shape}, data_shape is "
                                 f"{p.data_shape}")
            return mean
        if p.verbose:
            _LOG.info("%s: cannot find %s: computing the mean image", p.who, p.mean_img)
        total = np.zeros(p.data_shape, np.float32)
        seeds = [(self._aug_seed, 1, i) for i in range(len(self._offsets))]
        for data, _, _ in self._pool.map(self._decoder, self._offsets, seeds):
            total += data
        mean = total * np.float32(1.0 / len(self._offsets))
        save(p.mean_img, {"mean_img": NDArray(mean)})
        if self._shuffler is not None and p.path_imgidx:   # MXNet's reader went once over the data: reshuffled
            self._shuffler.permutation(len(self._offsets))
        return mean
