"""JSON files that are safe to read and easy to diff.

Reading is bounded: the file size is limited, nesting deeper than
``MAX_DEPTH`` is refused before parsing, ``NaN``/``Infinity`` literals and
duplicate keys are rejected.  *Sealed* documents carry
``"checksum": "sha256:<hex>"`` over their canonical form (sorted keys, no
whitespace), so any change to their content is detected while re-indenting is not.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
from typing import Any

from .serialization import FormatError, MAX_FILE_BYTES, atomic_write, read_limited

__all__ = ["MAX_DEPTH", "dumps", "encode", "loads", "seal", "verify_seal", "write_json", "read_json", "sha256_hex"]

MAX_DEPTH = 64
_SPECIAL = re.compile(r'[\[\]{}"\\]')


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _canonical(doc: dict) -> bytes:
    body = {k: v for k, v in doc.items() if k != "checksum"}
    return json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=False).encode()


def seal(doc: dict) -> dict:
    """A copy of ``doc`` with its ``checksum`` field set (placed after ``format``/``version``)."""
    digest = "sha256:" + sha256_hex(_canonical(doc))
    head = {k: doc[k] for k in ("format", "version") if k in doc}
    return {**head, "checksum": digest, **{k: v for k, v in doc.items() if k not in head and k != "checksum"}}


def verify_seal(doc: dict, where: str) -> None:
    """Raise FormatError unless ``doc['checksum']`` matches its content."""
    stored = doc.get("checksum")
    if not isinstance(stored, str) or not stored.startswith("sha256:"):
        raise FormatError(f"{where}: no 'checksum' field (expected 'sha256:<hex>')")
    if stored != "sha256:" + sha256_hex(_canonical(doc)):
        raise FormatError(f"{where}: checksum mismatch; the file was corrupted or edited")


def _compact(value: Any) -> str:
    return json.dumps(value, separators=(", ", ": "), allow_nan=False)


def dumps(value: Any, indent: int = 0) -> str:
    """JSON text for reading and diffing: records (dicts with a ``name``, ``op`` or ``param`` key, such
    as graph nodes) and dicts without nested containers take one line; other dicts are indented and
    lists of dicts put one item per line."""
    pad = " " * indent
    is_record = isinstance(value, dict) and ({"name", "op", "param"} & set(value))
    if isinstance(value, dict) and not is_record and any(isinstance(v, (dict, list)) and v for v in value.values()):
        items = [f"{pad}  {json.dumps(k)}: {dumps(v, indent + 2)}" for k, v in value.items()]
        return "{\n" + ",\n".join(items) + "\n" + pad + "}"
    if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
        return "[\n" + ",\n".join(pad + "  " + dumps(v, indent + 2) for v in value) + "\n" + pad + "]"
    return _compact(value)


def check_depth(text: str, where: str, limit: int = MAX_DEPTH) -> None:
    """Raise FormatError if brackets nest deeper than ``limit`` (strings are skipped)."""
    depth, in_string, skip = 0, False, -1
    for match in _SPECIAL.finditer(text):
        pos, char = match.start(), match.group()
        if pos == skip:
            continue
        if in_string:
            if char == "\\":
                skip = pos + 1
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "[{":
            depth += 1
            if depth > limit:
                raise FormatError(f"{where}: JSON nested deeper than {limit} levels")
        elif char in "]}":
            depth -= 1


def _reject_constant(name: str) -> Any:
    raise FormatError(f"non-finite number literal {name!r} is not valid JSON")


def _no_duplicates(pairs: list) -> dict:
    result = {}
    for key, value in pairs:
        if key in result:
            raise FormatError(f"duplicate key {key!r}")
        result[key] = value
    return result


def loads(data: bytes, where: str) -> Any:
    """Parse JSON bytes with the limits described in the module docstring."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise FormatError(f"{where}: not UTF-8 text ({exc})") from None
    check_depth(text, where)
    try:
        return json.loads(text, parse_constant=_reject_constant, object_pairs_hook=_no_duplicates)
    except FormatError as exc:
        raise FormatError(f"{where}: {exc}") from None
    except (ValueError, RecursionError) as exc:
        raise FormatError(f"{where}: not valid JSON ({exc})") from None


def encode(doc: dict, sealed: bool = True) -> bytes:
    """The file content for ``doc``: :func:`dumps` text, with a checksum when ``sealed``."""
    return (dumps(seal(doc) if sealed else doc) + "\n").encode()


def write_json(path: str | os.PathLike, doc: dict, sealed: bool = True) -> None:
    """Write ``doc`` atomically, with a checksum when ``sealed``."""
    data = encode(doc, sealed)
    atomic_write(path, lambda handle: handle.write(data))


def read_json(path: str | os.PathLike, what: str, sealed: bool = True, max_bytes: int = MAX_FILE_BYTES) -> Any:
    """Read a JSON file, verifying its checksum when ``sealed``; FormatError on any problem."""
    where = f"{what} {os.fspath(path)!r}"
    doc = loads(read_limited(path, what, max_bytes), where)
    if sealed:
        if not isinstance(doc, dict):
            raise FormatError(f"{where}: expected a JSON object at the top level")
        verify_seal(doc, where)
    return doc
