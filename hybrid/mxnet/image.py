"""``mxnet.image`` (``mx.image``): decoding, resizing, cropping and augmenting HWC images, as MXNet does.

Images are :class:`~hybrid.mxnet.nd.NDArray` handles of shape (H, W, C), uint8 from the decoders. MXNet
decodes and resizes with OpenCV; so does this module when ``cv2`` is installed (``pip install
hybrid[image]``, which brings ``opencv-python-headless``), so the pixels are MXNet's. Without it, files decode
with Pillow and only interpolation 0 (nearest) and 1 (bilinear) resize; other codes raise ImportError naming
the extra. Random choices use Python's ``random`` module, as MXNet's do.
"""
from __future__ import annotations

import random
from typing import Any, Sequence

import jax.numpy as jnp
import numpy as np

from ..data.vision import _decode, _image
from .handle import NDArray, value_of

__all__ = ["imread", "imdecode", "imresize", "resize_short", "scale_down", "copyMakeBorder", "fixed_crop",
           "random_crop", "center_crop", "color_normalize", "random_size_crop", "Augmenter", "SequentialAug",
           "RandomOrderAug", "ResizeAug", "ForceResizeAug", "RandomCropAug", "RandomSizedCropAug", "CenterCropAug",
           "BrightnessJitterAug", "ContrastJitterAug", "SaturationJitterAug", "HueJitterAug", "ColorJitterAug",
           "LightingAug", "ColorNormalizeAug", "RandomGrayAug", "HorizontalFlipAug", "CastAug", "CreateAugmenter"]


def _cv2() -> Any:
    try:
        import cv2
    except ImportError:
        return None
    return cv2


def _pixels(src: Any) -> np.ndarray:
    return np.asarray(value_of(src))


def _image_out(pixels: np.ndarray, out: Any = None) -> NDArray:
    result = jnp.asarray(pixels)
    if out is not None:
        out._assign(result)
        return out
    return NDArray(result)


def imdecode(buf: Any, flag: int = 1, to_rgb: bool = True, out: Any = None) -> NDArray:
    """The image encoded in ``buf`` (bytes, or a uint8 array of them): (H, W, 3) for ``flag=1`` (RGB unless
    ``to_rgb=False``), (H, W, 1) grey for ``flag=0``. Raises ValueError for bytes that are no image."""
    data = bytes(_pixels(buf).astype(np.uint8).tobytes()) if not isinstance(buf, (bytes, bytearray, memoryview)) \
        else bytes(buf)
    cv2 = _cv2()
    if cv2 is None:
        pixels = np.array(_decode.decode_image(data, flag))
        if flag and not to_rgb:
            pixels = pixels[..., ::-1]
        return _image_out(np.ascontiguousarray(pixels), out)
    pixels = cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_COLOR if flag else cv2.IMREAD_GRAYSCALE)
    if pixels is None:
        raise ValueError(f"mx.image.imdecode: the {len(data)} bytes are not an image OpenCV can decode")
    if pixels.ndim == 2:
        pixels = pixels[:, :, None]
    elif to_rgb:
        pixels = cv2.cvtColor(pixels, cv2.COLOR_BGR2RGB)
    return _image_out(pixels, out)


def imread(filename: str, flag: int = 1, to_rgb: bool = True, out: Any = None) -> NDArray:
    """The image in the file ``filename``, decoded as :func:`imdecode` does. Raises FileNotFoundError."""
    with open(filename, "rb") as f:
        data = f.read()
    try:
        return imdecode(data, flag, to_rgb, out)
    except ValueError as exc:
        raise ValueError(f"mx.image.imread({filename!r}): {exc}") from None


def _interp(interp: int, sizes: tuple = ()) -> int:
    """MXNet's interpolation code: 9 picks by the resize direction, 10 picks at random."""
    if interp == 9:
        if sizes:
            oh, ow, nh, nw = sizes
            if nh > oh and nw > ow:
                return 2
            if nh < oh and nw < ow:
                return 3
            return 1
        return 2
    if interp == 10:
        return random.randint(0, 4)
    if interp not in (0, 1, 2, 3, 4):
        raise ValueError(f"mx.image: unknown interpolation code {interp} (0-4, 9 or 10)")
    return interp


_get_interp_method = _interp  # the name of mxnet.image.image's helper, which library code imports


def imresize(src: Any, w: int, h: int, interp: int = 1, out: Any = None) -> NDArray:
    """``src`` (H, W, C) resized to ``h`` x ``w`` with OpenCV's interpolation ``interp``."""
    pixels = _pixels(src)
    interp = _interp(interp, (pixels.shape[0], pixels.shape[1], h, w))
    cv2 = _cv2()
    if cv2 is not None:
        resized = cv2.resize(pixels, (int(w), int(h)), interpolation=interp)
        if resized.ndim == 2:
            resized = resized[:, :, None]
        return _image_out(resized, out)
    if interp not in (0, 1):
        raise ImportError(f"mx.image.imresize: interpolation {interp} needs OpenCV (pip install hybrid[image])")
    return _image_out(_image.resize(pixels, int(w), int(h), "nearest" if interp == 0 else "bilinear"), out)


def resize_short(src: Any, size: int, interp: int = 2) -> NDArray:
    """``src`` resized so that its shorter side is ``size``, keeping the aspect ratio."""
    h, w = _pixels(src).shape[:2]
    new_h, new_w = (size, size * w // h) if h < w else (size * h // w, size)
    return imresize(src, new_w, new_h, interp=_interp(interp, (h, w, new_h, new_w)))


def scale_down(src_size: Sequence[int], size: Sequence[int]) -> tuple[int, int]:
    """``size`` (w, h) scaled down to fit inside ``src_size`` (w, h), keeping its aspect ratio."""
    w, h = size
    sw, sh = src_size
    if sh < h:
        w, h = float(w * sh) / h, sh
    if sw < w:
        w, h = sw, float(h * sw) / w
    return int(w), int(h)


def copyMakeBorder(src: Any, top: int, bot: int, left: int, right: int, type: int = 0, value: Any = 0,
                   values: Any = None) -> NDArray:
    """``src`` padded by the given borders (OpenCV's border ``type``: 0 constant ``value``)."""
    cv2 = _cv2()
    pixels = _pixels(src)
    if cv2 is not None:
        fill = values if values is not None else value
        padded = cv2.copyMakeBorder(pixels, top, bot, left, right, type, value=fill)
        return NDArray(jnp.asarray(padded if padded.ndim == pixels.ndim else padded[:, :, None]))
    if type != 0:
        raise ImportError("mx.image.copyMakeBorder: border types other than 0 need OpenCV (pip install hybrid[image])")
    pad = [(top, bot), (left, right)] + [(0, 0)] * (pixels.ndim - 2)
    return NDArray(jnp.asarray(np.pad(pixels, pad, constant_values=value)))


def fixed_crop(src: Any, x0: int, y0: int, w: int, h: int, size: Any = None, interp: int = 2) -> NDArray:
    """The ``w`` x ``h`` window at (``x0``, ``y0``), resized to ``size`` (w, h) when given."""
    out = NDArray(value_of(src)[y0:y0 + h, x0:x0 + w])
    if size is not None and (w, h) != tuple(size):
        out = imresize(out, size[0], size[1], interp=_interp(interp, (h, w, size[1], size[0])))
    return out


def random_crop(src: Any, size: Sequence[int], interp: int = 2) -> tuple[NDArray, tuple]:
    """A random window of ``size`` (w, h) (scaled down to fit), and its (x0, y0, w, h)."""
    h, w = _pixels(src).shape[:2]
    new_w, new_h = scale_down((w, h), size)
    x0 = random.randint(0, w - new_w)
    y0 = random.randint(0, h - new_h)
    return fixed_crop(src, x0, y0, new_w, new_h, size, interp), (x0, y0, new_w, new_h)


def center_crop(src: Any, size: Sequence[int], interp: int = 2) -> tuple[NDArray, tuple]:
    """The central window of ``size`` (w, h) (scaled down to fit), and its (x0, y0, w, h)."""
    h, w = _pixels(src).shape[:2]
    new_w, new_h = scale_down((w, h), size)
    x0 = int((w - new_w) / 2)
    y0 = int((h - new_h) / 2)
    return fixed_crop(src, x0, y0, new_w, new_h, size, interp), (x0, y0, new_w, new_h)


def color_normalize(src: Any, mean: Any, std: Any = None) -> NDArray:
    """``(src - mean) / std``."""
    value = value_of(src) - value_of(mean)
    if std is not None:
        value = value / value_of(std)
    return NDArray(value)


def random_size_crop(src: Any, size: Sequence[int], area: Any, ratio: Sequence[float], interp: int = 2,
                     **kwargs: Any) -> tuple[NDArray, tuple]:
    """A random window covering a fraction ``area`` (a range or its lower end) of the image with aspect ratio
    in ``ratio``, resized to ``size``; falls back to :func:`center_crop` after 10 tries."""
    import math
    h, w = _pixels(src).shape[:2]
    src_area = h * w
    if "min_area" in kwargs:
        area = kwargs.pop("min_area")
    if isinstance(area, (int, float)):
        area = (area, 1.0)
    for _ in range(10):
        target_area = random.uniform(area[0], area[1]) * src_area
        log_ratio = (math.log(ratio[0]), math.log(ratio[1]))
        new_ratio = math.exp(random.uniform(*log_ratio))
        new_w = int(round(math.sqrt(target_area * new_ratio)))
        new_h = int(round(math.sqrt(target_area / new_ratio)))
        if new_w <= w and new_h <= h:
            x0 = random.randint(0, w - new_w)
            y0 = random.randint(0, h - new_h)
            return fixed_crop(src, x0, y0, new_w, new_h, size, interp), (x0, y0, new_w, new_h)
    return center_crop(src, size, interp)


# -- augmenters ---------------------------------------------------------------------------------------------
class Augmenter:
    """An image augmenter: ``aug(src) -> src``; ``dumps()`` gives its name and arguments as JSON."""

    def __init__(self, **kwargs: Any):
        self._kwargs = {k: (v.asnumpy().tolist() if isinstance(v, NDArray) else v) for k, v in kwargs.items()}

    def dumps(self) -> str:
        import json
        return json.dumps([type(self).__name__.lower(), self._kwargs])

    def __call__(self, src: Any) -> Any:
        raise NotImplementedError(f"{type(self).__name__} must define __call__")


class SequentialAug(Augmenter):
    """The augmenters ``ts`` applied in order."""

    def __init__(self, ts: Sequence[Augmenter]):
        super().__init__()
        self.ts = list(ts)

    def __call__(self, src: Any) -> Any:
        for aug in self.ts:
            src = aug(src)
        return src


class RandomOrderAug(SequentialAug):
    """The augmenters ``ts`` applied in a random order."""

    def __call__(self, src: Any) -> Any:
        order = list(self.ts)
        random.shuffle(order)
        for aug in order:
            src = aug(src)
        return src


class ResizeAug(Augmenter):
    """:func:`resize_short` to ``size``."""

    def __init__(self, size: int, interp: int = 2):
        super().__init__(size=size, interp=interp)
        self.size, self.interp = size, interp

    def __call__(self, src: Any) -> NDArray:
        return resize_short(src, self.size, self.interp)


class ForceResizeAug(Augmenter):
    """:func:`imresize` to ``size`` (w, h), ignoring the aspect ratio."""

    def __init__(self, size: Sequence[int], interp: int = 2):
        super().__init__(size=size, interp=interp)
        self.size, self.interp = size, interp

    def __call__(self, src: Any) -> NDArray:
        h, w = _pixels(src).shape[:2]
        interp = _interp(self.interp, (h, w, self.size[1], self.size[0]))
        return imresize(src, self.size[0], self.size[1], interp)


class RandomCropAug(Augmenter):
    """:func:`random_crop` to ``size`` (w, h)."""

    def __init__(self, size: Sequence[int], interp: int = 2):
        super().__init__(size=size, interp=interp)
        self.size, self.interp = size, interp

    def __call__(self, src: Any) -> NDArray:
        return random_crop(src, self.size, self.interp)[0]


class RandomSizedCropAug(Augmenter):
    """:func:`random_size_crop` to ``size`` (w, h)."""

    def __init__(self, size: Sequence[int], area: Any, ratio: Sequence[float], interp: int = 2, **kwargs: Any):
        super().__init__(size=size, area=area, ratio=ratio, interp=interp)
        self.size, self.area, self.ratio, self.interp, self.kwargs = size, area, ratio, interp, kwargs

    def __call__(self, src: Any) -> NDArray:
        return random_size_crop(src, self.size, self.area, self.ratio, self.interp, **self.kwargs)[0]


class CenterCropAug(Augmenter):
    """:func:`center_crop` to ``size`` (w, h)."""

    def __init__(self, size: Sequence[int], interp: int = 2):
        super().__init__(size=size, interp=interp)
        self.size, self.interp = size, interp

    def __call__(self, src: Any) -> NDArray:
        return center_crop(src, self.size, self.interp)[0]


class BrightnessJitterAug(Augmenter):
    """Brightness scaled by ``1 + U(-brightness, brightness)``."""

    def __init__(self, brightness: float):
        super().__init__(brightness=brightness)
        self.brightness = brightness

    def __call__(self, src: Any) -> NDArray:
        alpha = 1.0 + random.uniform(-self.brightness, self.brightness)
        return NDArray(value_of(src) * alpha)


_GREY = np.array([[[0.299, 0.587, 0.114]]], dtype=np.float32)


class ContrastJitterAug(Augmenter):
    """Contrast blended towards the mean grey by ``1 + U(-contrast, contrast)``."""

    def __init__(self, contrast: float):
        super().__init__(contrast=contrast)
        self.contrast = contrast

    def __call__(self, src: Any) -> NDArray:
        alpha = 1.0 + random.uniform(-self.contrast, self.contrast)
        value = value_of(src)
        gray = (value * _GREY).sum()
        gray = (3.0 * (1.0 - alpha) / value.size) * gray
        return NDArray(value * alpha + gray)


class SaturationJitterAug(Augmenter):
    """Saturation blended towards each pixel's grey by ``1 + U(-saturation, saturation)``."""

    def __init__(self, saturation: float):
        super().__init__(saturation=saturation)
        self.saturation = saturation

    def __call__(self, src: Any) -> NDArray:
        alpha = 1.0 + random.uniform(-self.saturation, self.saturation)
        value = value_of(src)
        gray = (value * _GREY).sum(axis=2, keepdims=True) * (1.0 - alpha)
        return NDArray(value * alpha + gray)


class HueJitterAug(Augmenter):
    """Hue rotated by ``U(-hue, hue)`` of a turn in YIQ space."""

    def __init__(self, hue: float):
        super().__init__(hue=hue)
        self.hue = hue
        self.tyiq = np.array([[0.299, 0.587, 0.114], [0.596, -0.274, -0.321], [0.211, -0.523, 0.311]])
        self.ityiq = np.array([[1.0, 0.956, 0.621], [1.0, -0.272, -0.647], [1.0, -1.107, 1.705]])

    def __call__(self, src: Any) -> NDArray:
        alpha = random.uniform(-self.hue, self.hue)
        u, w = np.cos(alpha * np.pi), np.sin(alpha * np.pi)
        bt = np.array([[1.0, 0.0, 0.0], [0.0, u, -w], [0.0, w, u]])
        t = np.dot(np.dot(self.ityiq, bt), self.tyiq).T
        return NDArray(jnp.dot(value_of(src), jnp.asarray(t, dtype=jnp.float32)))


class ColorJitterAug(RandomOrderAug):
    """Brightness, contrast and saturation jitter in a random order (those given as nonzero)."""

    def __init__(self, brightness: float, contrast: float, saturation: float):
        ts: list[Augmenter] = []
        if brightness > 0:
            ts.append(BrightnessJitterAug(brightness))
        if contrast > 0:
            ts.append(ContrastJitterAug(contrast))
        if saturation > 0:
            ts.append(SaturationJitterAug(saturation))
        super().__init__(ts)


class LightingAug(Augmenter):
    """AlexNet's PCA lighting noise: ``alphastd`` scales normal draws over the eigen pairs."""

    def __init__(self, alphastd: float, eigval: Any, eigvec: Any):
        super().__init__(alphastd=alphastd, eigval=eigval, eigvec=eigvec)
        self.alphastd, self.eigval, self.eigvec = alphastd, np.asarray(eigval), np.asarray(eigvec)

    def __call__(self, src: Any) -> NDArray:
        alpha = np.random.normal(0, self.alphastd, size=(3,))
        rgb = np.dot(self.eigvec * alpha, self.eigval)
        return NDArray(value_of(src) + jnp.asarray(rgb, dtype=jnp.float32))


class ColorNormalizeAug(Augmenter):
    """:func:`color_normalize` by ``mean`` and ``std``."""

    def __init__(self, mean: Any, std: Any):
        super().__init__(mean=mean, std=std)
        self.mean = None if mean is None else jnp.asarray(value_of(mean))
        self.std = None if std is None else jnp.asarray(value_of(std))

    def __call__(self, src: Any) -> NDArray:
        return color_normalize(src, self.mean, self.std)


class RandomGrayAug(Augmenter):
    """Grey (repeated over the channels) with probability ``p``."""

    def __init__(self, p: float):
        super().__init__(p=p)
        self.p = p
        self.mat = np.array([[0.21, 0.21, 0.21], [0.72, 0.72, 0.72], [0.07, 0.07, 0.07]], dtype=np.float32)

    def __call__(self, src: Any) -> Any:
        if random.random() < self.p:
            return NDArray(jnp.dot(value_of(src), jnp.asarray(self.mat)))
        return src


class HorizontalFlipAug(Augmenter):
    """Left-right flip with probability ``p``."""

    def __init__(self, p: float):
        super().__init__(p=p)
        self.p = p

    def __call__(self, src: Any) -> Any:
        if random.random() < self.p:
            return NDArray(jnp.flip(value_of(src), axis=1))
        return src


class CastAug(Augmenter):
    """The image as ``typ`` (float32 by default)."""

    def __init__(self, typ: str = "float32"):
        super().__init__(type=typ)
        self.typ = typ

    def __call__(self, src: Any) -> NDArray:
        return NDArray(value_of(src).astype(self.typ))


def CreateAugmenter(data_shape: Sequence[int], resize: int = 0, rand_crop: bool = False, rand_resize: bool = False,
                    rand_mirror: bool = False, mean: Any = None, std: Any = None, brightness: float = 0,
                    contrast: float = 0, saturation: float = 0, hue: float = 0, pca_noise: float = 0,
                    rand_gray: float = 0, inter_method: int = 2) -> list[Augmenter]:
    """MXNet's standard augmenter list for images of ``data_shape`` (C, H, W)."""
    auglist: list[Augmenter] = []
    if resize > 0:
        auglist.append(ResizeAug(resize, inter_method))
    crop_size = (data_shape[2], data_shape[1])
    if rand_resize:
        assert rand_crop
        auglist.append(RandomSizedCropAug(crop_size, 0.08, (3.0 / 4.0, 4.0 / 3.0), inter_method))
    elif rand_crop:
        auglist.append(RandomCropAug(crop_size, inter_method))
    else:
        auglist.append(CenterCropAug(crop_size, inter_method))
    if rand_mirror:
        auglist.append(HorizontalFlipAug(0.5))
    auglist.append(CastAug())
    if brightness or contrast or saturation:
        auglist.append(ColorJitterAug(brightness, contrast, saturation))
    if hue:
        auglist.append(HueJitterAug(hue))
    if pca_noise > 0:
        eigval = np.array([55.46, 4.794, 1.148])
        eigvec = np.array([[-0.5675, 0.7192, 0.4009], [-0.5808, -0.0045, -0.8140], [-0.5836, -0.6948, 0.4203]])
        auglist.append(LightingAug(pca_noise, eigval, eigvec))
    if rand_gray > 0:
        auglist.append(RandomGrayAug(rand_gray))
    if mean is True:
        mean = np.array([123.68, 116.28, 103.53])
    elif mean is not None:
        assert isinstance(mean, (np.ndarray, NDArray)) and mean.shape[0] in [1, 3]
    if std is True:
        std = np.array([58.395, 57.12, 57.375])
    elif std is not None:
        assert isinstance(std, (np.ndarray, NDArray)) and std.shape[0] in [1, 3]
    if mean is not None or std is not None:
        auglist.append(ColorNormalizeAug(mean, std))
    return auglist
