"""Array files: atomic writes and verified, pickle-free loading.

Parameter files are NumPy ``.npz`` archives (a zip of ``.npy`` arrays) keyed by
structural parameter names.  Loading never unpickles and never trusts a size it
has not checked: every member's ``.npy`` header is parsed first, its dtype must
be numeric, the bytes its shape needs must equal the bytes the archive holds,
and the zip CRC-32 of every member is verified.  So a truncated, corrupted or
hand-crafted file raises :class:`FormatError` (a ``ValueError``) before anything
large is allocated.
"""
from __future__ import annotations

import contextlib
import functools
import io
import json
import math
import os
import stat
import struct
import tempfile
import zipfile
import zlib
from typing import Any, Callable, Iterator, Mapping, Sequence, cast

import jax.numpy as jnp
import numpy as np
from ..errors import FormatError  # noqa: F401 (defined with the other errors)

__all__ = ["FormatError", "atomic_write", "atomic_write_group", "fsync_directory", "save_arrays", "encode_arrays",
           "load_arrays", "parse_npz", "read_limited", "MAX_FILE_BYTES"]

#: Files larger than this are refused by the readers (override per call where offered).
MAX_FILE_BYTES = 1 << 40
#: Deflate cannot expand data by more than about 1032x; a member claiming more is forged.
_MAX_DEFLATE_RATIO = 1100
_NUMERIC_KINDS = "biufc"
_DTYPES_KEY = "__dtypes__"
_EXTENDED = {"bfloat16": np.uint16}  # dtype name -> the unsigned type of its bits

#: Exceptions that malformed bytes can raise inside zipfile and numpy's header parser.
_PARSE_ERRORS = (zipfile.BadZipFile, zlib.error, EOFError, struct.error, NotImplementedError, UnicodeDecodeError,
                 OverflowError, ValueError, KeyError, IndexError, TypeError, SyntaxError, RecursionError, OSError,
                 RuntimeError)


def fsync_directory(directory: str) -> None:
    """Make a rename inside ``directory`` durable (no-op where directories cannot be opened)."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def atomic_write(path: str | os.PathLike, write: Callable[[Any], None]) -> None:
    """Call ``write(fileobj)`` on a temporary file beside ``path``, then rename it into place.

    The data is flushed and fsynced before the rename, so a failure, a full disk
    or a crash at any point leaves the previous file at ``path`` untouched.
    """
    path = os.fspath(path)
    tmp = _temp_beside(path, write)
    try:
        os.replace(tmp, path)
    except BaseException as exc:
        _remove(tmp)
        if isinstance(exc, OSError) and exc.filename is None:
            raise _naming(exc, path) from exc
        raise
    fsync_directory(os.path.dirname(os.path.abspath(path)))


def _temp_beside(path: str, write: Callable[[Any], None]) -> str:
    """The name of a new temporary file beside ``path`` holding what ``write(fileobj)`` wrote, flushed and
    fsynced. On failure nothing is left behind, and an OSError names ``path``."""
    try:
        fd, tmp = tempfile.mkstemp(prefix=".tmp-" + os.path.basename(path) + "-",
                                   dir=os.path.dirname(os.path.abspath(path)))
    except OSError as exc:
        raise _naming(exc, path) from exc
    try:
        os.chmod(tmp, _new_file_mode(path))
        with os.fdopen(fd, "wb") as handle:
            write(handle)
            handle.flush()
            os.fsync(handle.fileno())
    except BaseException as exc:
        _remove(tmp)
        if isinstance(exc, OSError) and exc.filename is None:
            raise _naming(exc, path) from exc
        raise
    return tmp


def _write_bytes(data: bytes, handle: Any) -> None:
    handle.write(data)


def _remove(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


def _naming(exc: OSError, path: str) -> OSError:
    """``exc`` (e.g. a full disk, errno 28, or a file too large, errno 27) naming the file being written."""
    return type(exc)(exc.errno, f"{exc.strerror or exc} (while writing {path!r}; it was left unchanged)", path)


def _new_file_mode(path: str) -> int:
    """The mode a plainly created file would get (or the mode of the file being replaced)."""
    try:
        return os.stat(path).st_mode & 0o777
    except OSError:
        umask = os.umask(0)
        os.umask(umask)
        return 0o666 & ~umask


def read_limited(path: str | os.PathLike, what: str, max_bytes: int = MAX_FILE_BYTES) -> bytes:
    """The bytes of ``path``; FileNotFoundError if missing, FormatError if it is not a regular file
    (a device such as ``/dev/zero``, a FIFO, a directory) or holds more than ``max_bytes``.

    The file is opened without blocking and read up to the size it had when opened, so no file
    can make the reader hang or allocate without bound."""
    path = os.fspath(path)
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except FileNotFoundError:
        raise FileNotFoundError(f"{what} {path!r} does not exist") from None
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode) or info.st_size > max_bytes:
        os.close(fd)
        if stat.S_ISREG(info.st_mode):
            raise FormatError(f"{what} {path!r} has {info.st_size} bytes, more than the limit of {max_bytes}")
        raise FormatError(f"{what} {path!r} is not a regular file (a device, FIFO, socket or directory)")
    with os.fdopen(fd, "rb") as handle:
        data = handle.read(info.st_size)
        if handle.read(1):
            raise FormatError(f"{what} {path!r} grew while it was read; read it again once it is complete")
    return data


def save_arrays(path: str | os.PathLike, arrays: Mapping[str, Any]) -> None:
    """Write ``{name: array}`` as an ``.npz`` file, atomically. Raises TypeError for non-numeric arrays.

    ``bfloat16`` arrays (which ``.npy`` cannot name) are stored as ``uint16`` and listed in
    a member ``__dtypes__`` (a JSON object as bytes) that the loader applies and removes.
    """
    data = encode_arrays(arrays)
    atomic_write(path, lambda handle: handle.write(data))


def encode_arrays(arrays: Mapping[str, Any]) -> bytes:
    """The bytes of the ``.npz`` file that :func:`save_arrays` writes."""
    host: dict[str, np.ndarray] = {}
    extended: dict[str, str] = {}
    for name, value in arrays.items():
        if not isinstance(name, str) or not name or name == _DTYPES_KEY:
            raise TypeError(f"array names must be non-empty strings other than {_DTYPES_KEY!r}, got {name!r}")
        array = np.asarray(value)
        if array.dtype.name in _EXTENDED:
            extended[name] = array.dtype.name
            array = array.view(_EXTENDED[array.dtype.name])
        if array.dtype.kind not in _NUMERIC_KINDS:
            raise TypeError(f"array {name!r} has dtype {array.dtype}; only numeric arrays can be saved")
        host[name] = array
    if extended:
        host[_DTYPES_KEY] = np.frombuffer(json.dumps(extended).encode(), np.uint8)
    buffer = io.BytesIO()
    # np.savez's archive, written member by member: np.savez(buffer, **host) would read arrays named
    # "file" or "allow_pickle" as its own arguments
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_STORED, allowZip64=True) as archive:
        for name, array in host.items():
            with archive.open(name + ".npy", "w", force_zip64=True) as member:
                np.lib.format.write_array(member, array, allow_pickle=False)
    return buffer.getvalue()


def atomic_write_group(files: Sequence[tuple[str | os.PathLike, bytes]]) -> None:
    """Write files that belong together (``[(path, bytes), ...]``): each is written and fsynced to a
    temporary file first, so a failure there (a full disk) changes nothing; then they are renamed into
    place in order, and if a rename fails the files already replaced get their old contents back."""
    staged, backups, replaced = [], {}, []
    try:
        for path, data in files:
            path = os.fspath(path)
            staged.append((path, _temp_beside(path, functools.partial(_write_bytes, data))))
        for path, tmp in staged:
            if os.path.exists(path):
                backups[path] = tmp + ".previous"
                os.link(path, backups[path])
            os.replace(tmp, path)
            replaced.append(path)
        for directory in {os.path.dirname(os.path.abspath(p)) for p, _ in staged}:
            fsync_directory(directory)
    except BaseException:
        for path in reversed(replaced):  # put the previous files back
            if path in backups:
                os.replace(backups.pop(path), path)
            else:
                os.unlink(path)
        raise
    finally:
        for _, tmp in staged:
            _remove(tmp)
            _remove(tmp + ".previous")


def load_arrays(path: str | os.PathLike, max_bytes: int = MAX_FILE_BYTES) -> dict[str, np.ndarray]:
    """Read an ``.npz`` written by :func:`save_arrays` (no pickle; sizes and CRCs verified).

    Raises FileNotFoundError, or FormatError naming the file and what is wrong.
    """
    path = os.fspath(path)
    data = read_limited(path, "parameter file", max_bytes)
    if data[:4] != b"PK\x03\x04":
        raise FormatError(f"{path!r} is not a hybrid parameter file (expected an .npz archive)")
    return parse_npz(data, path)


def parse_npz(data: bytes, path: str = "<bytes>",
              check: Callable[[dict[str, tuple[tuple[int, ...], np.dtype]]], None] | None = None
              ) -> dict[str, np.ndarray]:
    """Parse the bytes of an ``.npz`` archive; see :func:`load_arrays`.

    Every member's header is read first. ``check({name: (shape, dtype)})`` may then refuse the
    file (by raising) before any array's data is decompressed or allocated."""
    with _parse_errors(path):
        archive = zipfile.ZipFile(io.BytesIO(data))
    with archive:
        with _parse_errors(path):
            infos = archive.infolist()
            _check_tiling(data, infos, archive.start_dir, path)
            headers: dict[str, tuple[zipfile.ZipInfo, tuple, bool, np.dtype, int]] = {}
            for info in infos:
                name = _member_name(info, path)
                if name in headers:
                    raise FormatError(f"parameter file {path!r} holds array {name!r} twice")
                headers[name] = (info,) + _read_header(archive, info, path)
            listing = headers.pop(_DTYPES_KEY, None)
            extended = {}
            if listing is not None:
                if math.prod(listing[1]) > 1 << 20:
                    raise FormatError(f"parameter file {path!r}: its {_DTYPES_KEY} member is too large")
                extended = _dtype_listing(_read_member(archive, *listing, path), headers, path)
        if check is not None:
            check({name: (h[1], extended.get(name, h[3])) for name, h in headers.items()})
        with _parse_errors(path):
            arrays = {}
            for name, header in headers.items():
                array = _read_member(archive, *header, path)
                arrays[name] = array.view(extended[name]) if name in extended else array
    return arrays


@contextlib.contextmanager
def _parse_errors(path: str) -> Iterator[None]:
    """Malformed bytes raise FormatError naming the file, whatever zipfile or numpy raised."""
    try:
        yield
    except FormatError:
        raise
    except _PARSE_ERRORS as exc:
        raise FormatError(f"parameter file {path!r} is corrupted or truncated: {type(exc).__name__}: {exc}") from exc


def _dtype_listing(listing: np.ndarray, headers: dict[str, tuple], path: str) -> dict[str, np.dtype]:
    """The ``__dtypes__`` member: ``{name: dtype}`` for arrays stored as the bits of another dtype."""
    dtypes = None
    if listing.dtype == np.uint8 and listing.ndim == 1:
        try:
            dtypes = json.loads(listing.tobytes().decode("utf-8"))
        except (UnicodeDecodeError, ValueError, RecursionError):
            pass
    if not isinstance(dtypes, dict):
        raise FormatError(f"parameter file {path!r}: invalid {_DTYPES_KEY} member")
    out = {}
    for name, dtype in dtypes.items():
        bits = _EXTENDED.get(dtype) if isinstance(dtype, str) else None
        if bits is None or name not in headers or headers[name][3] != bits:
            raise FormatError(f"parameter file {path!r}: {_DTYPES_KEY} lists {name!r} as {dtype!r:.40}, which "
                              "does not match the stored array")
        out[name] = jnp.dtype(dtype)
    return out


def _check_tiling(data: bytes, infos: list, central_directory: int, path: str) -> None:
    """The members' local records must cover the bytes before the central directory exactly, so no
    array can be dropped from (or hidden in) the archive by editing the directory."""
    position = 0
    for info in sorted(infos, key=lambda i: i.header_offset):
        header = data[position:position + 30]
        if info.header_offset != position or len(header) < 30 or header[:4] != b"PK\x03\x04":
            raise FormatError(f"parameter file {path!r} is corrupted: its directory does not account for the "
                              f"data at offset {position}")
        name_length, extra_length = struct.unpack_from("<HH", header, 26)
        position += 30 + name_length + extra_length + info.compress_size
        if info.flag_bits & 0x08:  # a data descriptor follows, with or without its signature
            position += 16 if data[position:position + 4] == b"PK\x07\x08" else 12
    if position != central_directory:
        raise FormatError(f"parameter file {path!r} is corrupted: {central_directory - position} bytes before "
                          "the directory belong to no array")


def _member_name(info: zipfile.ZipInfo, path: str) -> str:
    if not info.filename.endswith(".npy") or info.is_dir():
        raise FormatError(f"parameter file {path!r} has a member {info.filename!r} that is not an .npy array")
    if info.compress_type not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
        raise FormatError(f"parameter file {path!r}: member {info.filename!r} uses an unsupported compression")
    if info.flag_bits & 0x1:
        raise FormatError(f"parameter file {path!r}: member {info.filename!r} is marked encrypted")
    limit = info.compress_size if info.compress_type == zipfile.ZIP_STORED else \
        info.compress_size * _MAX_DEFLATE_RATIO + 1024
    if info.file_size > limit:
        raise FormatError(f"parameter file {path!r}: member {info.filename!r} declares {info.file_size} bytes, "
                          f"more than its {info.compress_size} stored bytes can hold")
    return info.filename[:-4]


def _read_header(archive: zipfile.ZipFile, info: zipfile.ZipInfo, path: str) -> tuple[tuple, bool, np.dtype, int]:
    """``(shape, fortran order, dtype, data offset)`` of a member, checked against its declared size;
    only the header's bytes are decompressed."""
    with archive.open(info) as member:
        version = np.lib.format.read_magic(member)
        if version == (1, 0):
            shape, fortran, dtype = np.lib.format.read_array_header_1_0(member)
        elif version in ((2, 0), (3, 0)):
            shape, fortran, dtype = np.lib.format.read_array_header_2_0(member)
        else:
            raise FormatError(f"parameter file {path!r}: array {info.filename!r} has .npy version {version}")
        offset = member.tell()
    if dtype.hasobject:
        raise FormatError(f"parameter file {path!r} contains pickled objects; they are never loaded")
    if dtype.kind not in _NUMERIC_KINDS:
        raise FormatError(f"parameter file {path!r}: array {info.filename!r} has non-numeric dtype {dtype}")
    if any(not isinstance(d, int) or d < 0 for d in shape):
        raise FormatError(f"parameter file {path!r}: array {info.filename!r} has invalid shape {shape}")
    nbytes = math.prod(shape) * dtype.itemsize
    if nbytes != info.file_size - offset:
        raise FormatError(f"parameter file {path!r} is corrupted or truncated: array {info.filename!r} of "
                          f"shape {shape} needs {nbytes} bytes, the archive holds {info.file_size - offset}")
    return shape, fortran, dtype, offset


def _read_member(archive: zipfile.ZipFile, info: zipfile.ZipInfo, shape: tuple, fortran: bool, dtype: np.dtype,
                 offset: int, path: str) -> np.ndarray:
    """A member's data (its header already checked by :func:`_read_header`); the CRC-32 is verified."""
    nbytes = math.prod(shape) * dtype.itemsize
    with cast(zipfile.ZipExtFile, archive.open(info)) as member:  # mode "r" opens a ZipExtFile
        if len(member.read(offset)) != offset:
            raise FormatError(f"parameter file {path!r} is corrupted or truncated: array {info.filename!r}")
        buffer = bytearray(nbytes)
        if member.readinto(buffer) != nbytes or member.read(1):  # reading to the end checks the CRC-32
            raise FormatError(f"parameter file {path!r} is corrupted or truncated: array {info.filename!r}")
    array = np.frombuffer(buffer, dtype=dtype)
    return array.reshape(shape, order="F" if fortran else "C")
