"""MXNet's RecordIO files (``.rec``, with a ``.idx`` index for random access), read and written byte for byte
as MXNet 1.x does (mirrors ``mxnet.recordio``).

    from hybrid import recordio
    with recordio.MXIndexedRecordIO("data.idx", "data.rec", "w") as rec:
        rec.write_idx(0, recordio.pack(recordio.IRHeader(0, 3.0, 0, 0), b"payload"))
    with recordio.MXIndexedRecordIO("data.idx", "data.rec", "r") as rec:
        header, payload = recordio.unpack(rec.read_idx(0))

The format is dmlc-core's. A record is one or more chunks; a chunk is the magic word ``0xced7230a``, a
length word ``cflag << 29 | length`` and ``length`` bytes of data, zero-padded to a multiple of 4 bytes
(all words little-endian). Where a record's data holds the magic word at an offset that is a multiple of 4,
the writer cuts the record there and drops that word (readers put it back): cflag 1 opens such a record,
2 continues it, 3 closes it; cflag 0 is a record in one chunk. An index line is ``key<TAB>byte offset``.

Readers check every length against the file before reading: a damaged file raises :class:`RecordIOError`
(a ValueError) naming the file, the record and the byte offset, and never allocates more than the file holds.
"""
from __future__ import annotations

import io
import numbers
import os
import struct
import threading
from collections import namedtuple
from typing import Any, Callable

import numpy as np

from .errors import RecordIOError

__all__ = ["MXRecordIO", "MXIndexedRecordIO", "IRHeader", "pack", "unpack", "pack_img", "unpack_img",
           "RecordIOError"]

MAGIC = 0xCED7230A
_MAGIC_BYTES = struct.pack("<I", MAGIC)
_CHUNK_HEAD = struct.Struct("<II")
_LENGTH_MASK = (1 << 29) - 1
MAX_RECORD_BYTES = (1 << 29) - 1  # dmlc-core refuses records of 2**29 bytes or more

IRHeader = namedtuple("HEADER", ["flag", "label", "id", "id2"])
IRHeader.__doc__ = """The header MXNet's image records start with (24 bytes, ``struct`` format ``<IfQQ``).

``flag``: 0 for a single float label, else the number of float32 labels stored after the header;
``label``: a float, or (multi-label records) a float32 array; ``id``, ``id2``: unsigned 64-bit ids.
"""
_IR_FORMAT = struct.Struct("<IfQQ")


def _encode_record(data: bytes) -> bytes:
    """One record as the chunks dmlc-core's writer emits for it (padding included)."""
    cuts = []
    at = data.find(_MAGIC_BYTES)
    while at != -1:
        if at % 4 == 0:
            cuts.append(at)
            at = data.find(_MAGIC_BYTES, at + 4)
        else:
            at = data.find(_MAGIC_BYTES, at + 1)
    parts = []
    start = 0
    for i, cut in enumerate(cuts):
        parts += [_CHUNK_HEAD.pack(MAGIC, (1 if i == 0 else 2) << 29 | (cut - start)), data[start:cut]]
        start = cut + 4
    parts += [_CHUNK_HEAD.pack(MAGIC, (3 if cuts else 0) << 29 | (len(data) - start)), data[start:],
              bytes(-len(data) % 4)]
    return b"".join(parts)


class _PositionalReader:
    """Reads ``n`` bytes at an offset without moving a shared file position (safe after ``fork``)."""

    def __init__(self, fd: int):
        self.fd = fd
        self._lock = None if hasattr(os, "pread") else threading.Lock()

    def read(self, n: int, offset: int) -> bytes:
        if self._lock is None:
            return os.pread(self.fd, n, offset)
        with self._lock:
            os.lseek(self.fd, offset, os.SEEK_SET)
            return os.read(self.fd, n)


class MXRecordIO:
    """A RecordIO file read or written in sequence (``mx.recordio.MXRecordIO``).

    Args:
        uri: path of the ``.rec`` file.
        flag: ``'r'`` to read, ``'w'`` to write (the file is created or truncated).

    ``read()`` returns the next record as bytes, or None at the end of the file; ``write(buf)`` appends one.
    Usable as a context manager. A reader pickles as its path: the copy reopens the file at its first record
    (as in MXNet), which is how DataLoader workers get their own. An open writer refuses to be pickled (its
    copy would truncate the file). Readers use positional reads, so a forked process may keep using one.

    Raises:
        ValueError: ``flag`` is not ``'r'`` or ``'w'``.
        OSError: the file cannot be opened (FileNotFoundError names it).
        RecordIOError: (``read``) the file is damaged at the next record.
    """

    def __init__(self, uri: str | os.PathLike, flag: str):
        self.uri = os.fspath(uri)
        self.flag = flag
        self.is_open = False
        self.writable = flag == "w"
        self._fd = -1
        self._reader: _PositionalReader | None = None
        self._pos = 0
        self._records: int | None = 0  # records read from the start (None after a seek): names them in errors
        self._size = 0
        self.open()

    def open(self) -> None:
        """Opens the file: a reader at its first record, a writer on an empty file."""
        if self.flag not in ("r", "w"):
            raise ValueError(f"{type(self).__name__}({self.uri!r}): flag must be 'r' (read) or 'w' (write), "
                             f"got {self.flag!r}")
        self.writable = self.flag == "w"
        binary = getattr(os, "O_BINARY", 0)
        if self.writable:
            self._fd = os.open(self.uri, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | binary, 0o666)
        else:
            self._fd = os.open(self.uri, os.O_RDONLY | binary)
            self._reader = _PositionalReader(self._fd)
            self._size = os.fstat(self._fd).st_size
        self._pos = 0
        self._records = 0
        self.is_open = True

    def close(self) -> None:
        """Closes the file (a no-op when it is closed)."""
        if not self.is_open:
            return
        self.is_open = False
        self._reader = None
        os.close(self._fd)
        self._fd = -1

    def reset(self) -> None:
        """Reopens the file: a reader starts again at its first record; a writer starts an empty file."""
        self.close()
        self.open()

    def __enter__(self) -> "MXRecordIO":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # noqa: BLE001 - interpreter shutdown may have removed os
            pass

    def __repr__(self) -> str:
        state = "open" if self.is_open else "closed"
        return f"<{type(self).__name__} {self.uri!r} flag={self.flag!r} {state}>"

    def __getstate__(self) -> dict:
        if self.writable and self.is_open:
            raise TypeError(f"{type(self).__name__}({self.uri!r}, 'w'): an open RecordIO writer cannot be pickled "
                            "(its copy would reopen the file for writing and truncate it); close it first, or "
                            "pass the path and open the writer where it is used")
        return {"uri": self.uri, "flag": self.flag, "is_open": self.is_open}

    def __setstate__(self, state: dict) -> None:
        self._restore(state)
        if state["is_open"]:
            self.open()

    def _restore(self, state: dict) -> None:
        for name, value in state.items():
            if name != "is_open":
                setattr(self, name, value)
        self.is_open = False
        self.writable = self.flag == "w"
        self._fd, self._reader, self._pos, self._records, self._size = -1, None, 0, 0, 0

    def tell(self) -> int:
        """The byte offset of the next record (written or read)."""
        self._check_open("tell")
        return self._pos

    def write(self, buf: bytes) -> None:
        """Appends ``buf`` as one record.

        Raises:
            TypeError: ``buf`` is not bytes-like (encode text first).
            ValueError: ``buf`` holds ``2**29`` bytes or more (RecordIO's limit).
            OSError: the write failed; the file is cut back to its previous end, so no part of the record stays.
        """
        self._check_open("write")
        if not self.writable:
            raise io.UnsupportedOperation(f"{self.uri}: write() needs a RecordIO file opened with flag 'w', "
                                          f"this one is opened with {self.flag!r}")
        if not isinstance(buf, (bytes, bytearray, memoryview)):
            raise TypeError(f"{self.uri}: a record must be bytes (or bytearray/memoryview), got "
                            f"{type(buf).__name__}" + ("; encode text first, e.g. buf.encode()"
                                                       if isinstance(buf, str) else ""))
        data = bytes(buf)
        if len(data) > MAX_RECORD_BYTES:
            raise ValueError(f"{self.uri}: a RecordIO record holds at most 2**29 - 1 bytes, got {len(data)}")
        encoded = _encode_record(data)
        start = self._pos
        try:
            view = memoryview(encoded)
            while view:
                view = view[os.write(self._fd, view):]
        except BaseException:
            try:
                os.ftruncate(self._fd, start)
                os.lseek(self._fd, start, os.SEEK_SET)
            except OSError:
                pass
            raise
        self._pos = start + len(encoded)

    def read(self) -> bytes | None:
        """The next record, or None at the end of the file.

        Raises:
            RecordIOError: the record is damaged or truncated (names the file, the record and the offset).
        """
        self._check_readable("read")
        count = self._records
        record, end = self._read_at(self._pos, "record" if count is None else f"record {count}")
        if record is not None:
            self._pos = end
            self._records = None if count is None else count + 1
        return record

    def _check_open(self, what: str) -> None:
        if not self.is_open:
            raise ValueError(f"{self.uri}: {what}() on a closed RecordIO file")

    def _check_readable(self, what: str) -> None:
        self._check_open(what)
        if self.writable:
            raise io.UnsupportedOperation(f"{self.uri}: {what}() needs a RecordIO file opened with flag 'r', "
                                          "this one is opened with 'w'")

    def _file_size(self, needed: int) -> int:
        """The file's size, looked up again when ``needed`` bytes lie beyond the size last seen."""
        if needed > self._size:
            self._size = os.fstat(self._fd).st_size
        return self._size

    def _read_at(self, offset: int, which: str) -> tuple[bytes | None, int]:
        """The record starting at byte ``offset`` and the offset after it; (None, offset) at the end."""
        if offset >= self._file_size(offset + 1):
            return None, offset
        joined = bytearray()  # the record so far, when it spans several chunks
        first = True
        pos = offset

        def corrupt(problem: str) -> RecordIOError:
            where = f"byte offset {offset}" + (f" (its chunk at byte {pos})" if pos != offset else "")
            return RecordIOError(f"{self.uri}: corrupt RecordIO {which} at {where}: {problem}")

        while True:
            size = self._file_size(pos + 8)
            head = self._reader.read(8, pos) if pos + 8 <= size else b""
            if len(head) != 8:
                raise corrupt(f"the file ends {max(size - pos, 0)} bytes into the chunk's 8-byte header "
                              "(truncated file)")
            magic, word = _CHUNK_HEAD.unpack(head)
            if magic != MAGIC:
                raise corrupt(f"expected the magic word 0xced7230a, found {magic:#010x}")
            cflag, length = word >> 29, word & _LENGTH_MASK
            allowed = (0, 1) if first else (2, 3)
            if cflag not in allowed:
                raise corrupt(f"chunk flag {cflag} where a {'first' if first else 'continuation'} chunk "
                              f"(flag {' or '.join(map(str, allowed))}) was expected")
            end = pos + 8 + length + (-length % 4)
            if end > self._file_size(end):
                raise corrupt(f"the chunk announces {length} bytes but the file holds {max(self._size - pos - 8, 0)} "
                              "after its header (truncated file or damaged length)")
            data = self._reader.read(length, pos + 8)
            if len(data) != length:
                raise corrupt(f"read {len(data)} of the chunk's {length} bytes (the file shrank while read)")
            pos = end
            if cflag == 0:
                return data, pos
            joined += data
            if cflag == 3:
                return bytes(joined), pos
            joined += _MAGIC_BYTES
            first = False


class MXIndexedRecordIO(MXRecordIO):
    """A RecordIO file with its index, for reading records by key (``mx.recordio.MXIndexedRecordIO``).

    Args:
        idx_path: the index file, one ``key<TAB>offset`` line per record (written by ``write_idx``, im2rec).
        uri: the ``.rec`` file.
        flag: ``'r'`` or ``'w'`` (both files are created or truncated).
        key_type: converts keys read from the index (and keys given to ``write_idx``); ``int`` by default.

    ``keys`` lists the keys in index order and ``idx`` maps each to its byte offset. ``read_idx(key)`` reads
    one record; ``write_idx(key, buf)`` appends a record, then its index line (so an index never names a
    record that was not written in full).

    Raises:
        RecordIOError: a line of the index is not ``key<TAB>offset`` (names the index file and the line).
    """

    def __init__(self, idx_path: str | os.PathLike, uri: str | os.PathLike, flag: str,
                 key_type: Callable[[Any], Any] = int):
        self.idx_path = os.fspath(idx_path)
        self.key_type = key_type
        self.idx: dict = {}
        self.keys: list = []
        self.fidx = None
        super().__init__(uri, flag)

    def open(self) -> None:
        super().open()
        try:
            self.idx, self.keys = {}, []
            if self.writable:
                self.fidx = open(self.idx_path, "w")
            else:
                self.fidx = None
                self._read_index()
        except BaseException:
            super().close()
            raise

    def close(self) -> None:
        if not self.is_open:
            return
        super().close()
        if self.fidx is not None:
            self.fidx.close()
            self.fidx = None

    def __getstate__(self) -> dict:
        state = super().__getstate__()
        state.update(idx_path=self.idx_path, key_type=self.key_type)
        return state

    def __setstate__(self, state: dict) -> None:
        self.idx, self.keys, self.fidx = {}, [], None
        super().__setstate__(state)

    def _read_index(self) -> None:
        with open(self.idx_path, "rb") as f:
            lines = f.read().splitlines()
        for number, raw in enumerate(lines, 1):
            line = raw.strip()
            if not line:
                continue
            try:
                fields = line.decode("utf-8").split("\t")
                key, offset = self.key_type(fields[0]), int(fields[1])
                if offset < 0:
                    raise ValueError("negative offset")
            except (UnicodeDecodeError, IndexError, ValueError, TypeError) as exc:
                raise RecordIOError(f"{self.idx_path}, line {number}: expected '<key>\\t<byte offset>' with a "
                                    f"{getattr(self.key_type, '__name__', 'key')} key and an offset >= 0, got "
                                    f"{raw[:80]!r} ({exc})") from None
            self.idx[key] = offset
            self.keys.append(key)

    def seek(self, idx: Any) -> None:
        """Moves the reader to the record of key ``idx`` (KeyError when the index has no such key)."""
        self._check_readable("seek")
        self._pos = self._offset(idx)
        self._records = None

    def _offset(self, key: Any) -> int:
        try:
            return self.idx[key]
        except (KeyError, TypeError):
            raise KeyError(f"{self.idx_path}: no record with key {key!r} (the index holds {len(self.keys)} keys"
                           + (f", e.g. {self.keys[0]!r}" if self.keys else "") + ")") from None

    def read_idx(self, idx: Any) -> bytes:
        """The record of key ``idx``.

        Raises:
            KeyError: the index has no such key.
            RecordIOError: the record is damaged, or the index points past the end of the file.
        """
        self._check_readable("read_idx")
        offset = self._offset(idx)
        record, end = self._read_at(offset, f"record of key {idx!r}")
        if record is None:
            raise RecordIOError(f"{self.idx_path}: key {idx!r} points at byte offset {offset}, at or past the "
                                f"end of {self.uri} ({self._size} bytes): the index does not match the file")
        self._pos, self._records = end, None
        return record

    def write_idx(self, idx: Any, buf: bytes) -> None:
        """Appends ``buf`` as a record, then the index line ``key<TAB>offset`` (``key = key_type(idx)``)."""
        key = self.key_type(idx)
        pos = self.tell()
        self.write(buf)
        self.fidx.write(f"{key}\t{pos}\n")
        self.idx[key] = pos
        self.keys.append(key)


def pack(header: IRHeader | tuple, s: bytes) -> bytes:
    """``s`` with MXNet's 24-byte image-record header in front (``mx.recordio.pack``).

    A number as ``header.label`` is stored in the header with ``flag = 0``; an array of labels is stored as
    float32 values between the header and ``s``, with ``flag`` = their count and ``label = 0``.

    Raises:
        ValueError: a field does not fit (flag uint32, label float32, id/id2 uint64) or the labels are not numbers.
        TypeError: ``s`` is not bytes.
    """
    header = IRHeader(*header)
    if not isinstance(s, (bytes, bytearray, memoryview)):
        raise TypeError(f"pack: the payload must be bytes, got {type(s).__name__}")
    s = bytes(s)
    if isinstance(header.label, numbers.Number):
        header = header._replace(flag=0)
    else:
        try:
            label = np.asarray(header.label, dtype=np.float32)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"pack: header.label must be a number or an array of numbers, got "
                             f"{header.label!r} ({exc})") from None
        header = header._replace(flag=label.size, label=0)
        s = label.tobytes() + s
    try:
        return _IR_FORMAT.pack(*header) + s
    except struct.error as exc:
        raise ValueError(f"pack: {header} does not fit MXNet's record header (flag: uint32, label: float32, "
                         f"id and id2: uint64): {exc}") from None


def unpack(s: bytes) -> tuple[IRHeader, bytes]:
    """The header and the payload of a packed record (``mx.recordio.unpack``).

    ``header.label`` is a float, or for ``flag > 0`` a float32 array of ``flag`` labels.

    Raises:
        RecordIOError: ``s`` is shorter than its header and labels.
    """
    s = bytes(s)
    if len(s) < _IR_FORMAT.size:
        raise RecordIOError(f"unpack: a record of {len(s)} bytes is shorter than the {_IR_FORMAT.size}-byte "
                            "IRHeader (is this a packed record?)")
    header = IRHeader(*_IR_FORMAT.unpack_from(s))
    s = s[_IR_FORMAT.size:]
    if header.flag > 0:
        need = 4 * header.flag
        if len(s) < need:
            raise RecordIOError(f"unpack: the header announces {header.flag} float32 labels ({need} bytes) but "
                                f"only {len(s)} bytes follow it")
        header = header._replace(label=np.frombuffer(s, np.float32, header.flag).copy())
        s = s[need:]
    return header, s


def _pillow(who: str) -> Any:
    try:
        from PIL import Image
    except ImportError:
        raise ImportError(f"{who} encodes and decodes images with Pillow, which is not installed: "
                          "pip install hybrid[vision] (or pip install pillow)") from None
    return Image


_JPEG = (".JPG", ".JPEG")
_PNG = (".PNG",)


def pack_img(header: IRHeader | tuple, img: np.ndarray, quality: int = 95, img_fmt: str = ".jpg") -> bytes:
    """``img`` encoded as JPEG or PNG (with Pillow), packed with ``header`` (``mx.recordio.pack_img``).

    Args:
        img: uint8 array in OpenCV's channel order, as MXNet takes it: ``(H, W)`` or ``(H, W, 1)`` grey,
            ``(H, W, 3)`` BGR, ``(H, W, 4)`` BGRA (JPEG drops the alpha channel). Reverse an RGB image's
            last axis first (``rgb[..., ::-1]``).
        quality: JPEG quality 0-100, or PNG compression level (clipped to 0-9).
        img_fmt: ``'.jpg'``/``'.jpeg'`` or ``'.png'``.

    Raises:
        ValueError: another format, quality or image layout.
        ImportError: Pillow is not installed.
    """
    fmt = str(img_fmt).upper()
    if fmt not in _JPEG + _PNG:
        raise ValueError(f"pack_img: img_fmt must be '.jpg', '.jpeg' or '.png', got {img_fmt!r}")
    if isinstance(quality, bool) or not isinstance(quality, (int, np.integer)) or \
            (fmt in _JPEG and not 0 <= quality <= 100):
        raise ValueError(f"pack_img: quality must be an int (0-100 for JPEG, 0-9 for PNG), got {quality!r}")
    arr = np.asarray(img)
    if arr.dtype != np.uint8:
        raise ValueError(f"pack_img: img must be a uint8 array, got dtype {arr.dtype}")
    if arr.ndim == 3 and arr.shape[2] == 1:
        arr = arr[..., 0]
    if arr.ndim == 3 and arr.shape[2] in (3, 4):
        arr = arr[..., [2, 1, 0, 3][:arr.shape[2]]]  # BGR(A) -> RGB(A)
    elif arr.ndim != 2:
        raise ValueError(f"pack_img: img must be (H, W), (H, W, 1), (H, W, 3) BGR or (H, W, 4) BGRA, "
                         f"got shape {arr.shape}")
    if arr.shape[0] == 0 or arr.shape[1] == 0:
        raise ValueError(f"pack_img: img is empty (shape {arr.shape})")
    image = _pillow("pack_img").fromarray(np.ascontiguousarray(arr))
    out = io.BytesIO()
    if fmt in _JPEG:
        if image.mode == "RGBA":
            image = image.convert("RGB")
        image.save(out, "JPEG", quality=int(quality))
    else:
        image.save(out, "PNG", compress_level=min(max(int(quality), 0), 9))
    return pack(header, out.getvalue())


def unpack_img(s: bytes, iscolor: int = -1) -> tuple[IRHeader, np.ndarray]:
    """The header and the decoded image of a record made by ``pack_img`` (``mx.recordio.unpack_img``).

    The image comes in OpenCV's conventions, as MXNet's (``cv2.imdecode``) does: ``iscolor=1`` gives
    ``(H, W, 3)`` BGR uint8, ``0`` gives ``(H, W)`` grey, ``-1`` keeps the file's channels (grey ``(H, W)``,
    BGR, or BGRA when it has transparency; 16-bit grey PNGs stay uint16).
    For RGB images use ``hybrid.data.vision.ImageRecordDataset`` or reverse the last axis.

    Raises:
        ValueError: ``iscolor`` is not -1, 0 or 1.
        RecordIOError: the payload is not a readable image.
        ImportError: Pillow is not installed.
    """
    if iscolor not in (-1, 0, 1):
        raise ValueError(f"unpack_img: iscolor must be -1 (unchanged), 0 (grey) or 1 (colour), got {iscolor!r}")
    header, data = unpack(s)
    Image = _pillow("unpack_img")
    try:
        with Image.open(io.BytesIO(data)) as image:
            if iscolor == 0 and image.format == "JPEG":
                image.draft("L", image.size)  # libjpeg's own grey output, as OpenCV decodes it
            mode = image.mode
            if iscolor == 0:
                return header, np.asarray(image.convert("L"))
            if iscolor == -1 and mode in ("L", "1"):
                return header, np.asarray(image.convert("L"))
            if iscolor == -1 and mode.startswith("I;16"):
                return header, np.asarray(image).astype(np.uint16)
            alpha = iscolor == -1 and (mode in ("RGBA", "LA", "PA") or "transparency" in image.info)
            rgb = np.asarray(image.convert("RGBA" if alpha else "RGB"))
    except (OSError, SyntaxError, ValueError, Image.DecompressionBombError) as exc:
        raise RecordIOError(f"unpack_img: the record's payload ({len(data)} bytes) is not a readable image: "
                            f"{exc}") from None
    return header, np.ascontiguousarray(rgb[..., [2, 1, 0, 3][:rgb.shape[2]]])
