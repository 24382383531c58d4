"""Image decoding with Pillow into NumPy arrays laid out ``(H, W, C)``, as Gluon's ``image.imdecode`` gives them."""
from __future__ import annotations

import io
import os
from typing import Any

import numpy as np

__all__ = ["decode_image", "decode_file"]


def _pillow() -> Any:
    try:
        from PIL import Image
    except ImportError:
        raise ImportError("hybrid.data.vision decodes images with Pillow, which is not installed: "
                          "pip install hybrid[vision] (or pip install pillow)") from None
    return Image


def _check_flag(flag: Any, source: str) -> None:
    if isinstance(flag, bool) or flag not in (0, 1):
        where = f" ({source})" if source else ""
        raise ValueError(f"decode_image{where}: flag must be 1 (RGB) or 0 (grey), got {flag!r}")


def _to_array(image: Any, flag: int, Image: Any) -> np.ndarray:
    """The pixels of an opened (not yet loaded) Pillow image as uint8 ``(H, W, 3)`` or ``(H, W, 1)``."""
    if flag == 0 and image.format == "JPEG":
        image.draft("L", image.size)  # libjpeg decodes straight to grey (as OpenCV does); never rescales here
    mode = image.mode
    if mode.startswith("I;16"):  # 16-bit grey: keep the high byte, as OpenCV does when it reduces to 8 bits
        grey = (np.asarray(image).astype(np.uint16) >> 8).astype(np.uint8)
        image = Image.fromarray(grey)
        mode = "L"
    if flag == 1:
        return np.asarray(image if mode == "RGB" else image.convert("RGB"))
    if mode in ("L", "LA", "1") or image.format != "PNG":
        return np.asarray(image if mode == "L" else image.convert("L"))[:, :, None]
    return _libpng_grey(np.asarray(image.convert("RGB")))[:, :, None]


def _libpng_grey(rgb: np.ndarray) -> np.ndarray:
    """Grey as libpng makes it for OpenCV's IMREAD_GRAYSCALE: (9797 R + 19234 G + 3737 B) >> 15, truncated."""
    wide = rgb.astype(np.uint32)
    weighted = wide[..., 0] * 9797 + wide[..., 1] * 19234 + wide[..., 2] * 3737
    return (weighted >> 15).astype(np.uint8)


def _decode(opener: Any, flag: int, source: str, size: int | None) -> np.ndarray:
    Image = _pillow()
    try:
        with Image.open(opener) as image:
            return _to_array(image, flag, Image)
    except (OSError, SyntaxError, ValueError, EOFError, Image.DecompressionBombError) as exc:
        if isinstance(exc, (FileNotFoundError, IsADirectoryError, PermissionError)):
            raise
        where = source or "decode_image"
        what = f" ({size} bytes)" if size is not None else ""
        why = "Pillow knows no image format with this content" if isinstance(exc, Image.UnidentifiedImageError) \
            else str(exc)
        raise ValueError(f"{where}: not a readable image{what}: {why}") from None


def decode_image(buf: bytes | bytearray | memoryview, flag: int = 1, source: str = "") -> np.ndarray:
    """The image encoded in ``buf`` (JPEG, PNG, BMP, GIF's first frame, ... whatever Pillow reads).

    Args:
        buf: the encoded file's bytes.
        flag: 1 gives ``(H, W, 3)`` RGB uint8 (alpha dropped, grey repeated); 0 gives ``(H, W, 1)`` grey uint8,
            as MXNet (OpenCV) makes it: JPEGs decoded to grey by libjpeg, colour PNGs converted with libpng's
            weights; other formats with Pillow's ITU-R 601 weights.
        source: where ``buf`` came from, named in errors (a path, a record key).

    Pixels come as stored: the EXIF orientation is not applied (as in MXNet 1.9 and torchvision's loader);
    16-bit images keep their high byte. The array may be read-only (it holds the decoder's output without a copy):
    copy it before writing into it.

    Raises:
        ValueError: ``flag`` is not 0 or 1, or ``buf`` is not a readable image (names ``source``).
        TypeError: ``buf`` is not bytes-like.
        ImportError: Pillow is not installed (``pip install hybrid[vision]``).
    """
    _check_flag(flag, source)
    if not isinstance(buf, (bytes, bytearray, memoryview)):
        where = f" ({source})" if source else ""
        raise TypeError(f"decode_image{where}: expected the encoded bytes, got {type(buf).__name__}")
    return _decode(io.BytesIO(buf), flag, source, len(buf))


def decode_file(path: str | os.PathLike, flag: int = 1) -> np.ndarray:
    """The image in the file at ``path``, decoded as :func:`decode_image` does.

    Raises:
        FileNotFoundError: no such file.
        ValueError: not a readable image (names ``path``), or a bad ``flag``.
        ImportError: Pillow is not installed.
    """
    source = os.fspath(path)
    _check_flag(flag, source)
    return _decode(source, flag, source, None)
