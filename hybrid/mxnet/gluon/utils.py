"""``mxnet.gluon.utils``: hybrid's ``split_data``, ``clip_global_norm`` and a ``split_and_load`` that also
takes MXNet contexts (``[mx.cpu()]``, ``[mx.gpu(0), mx.gpu(1)]``)."""
from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
import urllib.request
from typing import Any

from ... import utils as _utils
from ...utils import clip_global_norm, split_data
from ..context import to_device

__all__ = ["split_data", "split_and_load", "clip_global_norm", "check_sha1", "download"]

_DEFAULT_REPO = "https://apache-mxnet.s3-accelerate.dualstack.amazonaws.com/"


def split_and_load(data: Any, ctx_list: Any = None, batch_axis: int = 0, even_split: bool = True,
                   devices: Any = None) -> list:
    """``hybrid.utils.split_and_load`` with ``mx.Context``s turned into their JAX devices."""
    return _utils.split_and_load(data, to_device(ctx_list) if ctx_list is not None else None, batch_axis,
                                 even_split, devices=to_device(devices) if devices is not None else None)


def _get_repo_url() -> str:
    """The base URL of the Gluon model and dataset repository: ``$MXNET_GLUON_REPO`` or MXNet's default,
    ending in ``'/'``."""
    url = os.environ.get("MXNET_GLUON_REPO", _DEFAULT_REPO)
    return url if url.endswith("/") else url + "/"


def _get_repo_file_url(namespace: str, filename: str) -> str:
    """The URL of ``filename`` under ``namespace`` in the Gluon repository."""
    return f"{_get_repo_url()}{namespace}/{filename}"


def check_sha1(filename: str, sha1_hash: str) -> bool:
    """Whether the SHA-1 of the file's content is ``sha1_hash`` (hexadecimal digits)."""
    digest = hashlib.sha1()
    with open(filename, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest() == sha1_hash


def download(url: str, path: str | None = None, overwrite: bool = False, sha1_hash: str | None = None,
             retries: int = 5, verify_ssl: bool = True) -> str:
    """Downloads ``url`` to ``path`` (a file name, or a folder to put the URL's last part in; default the
    current folder) and returns the file name. An existing file is kept unless ``overwrite`` is set or its
    SHA-1 differs from ``sha1_hash``. The file appears whole or not at all (written beside it, then
    renamed). Tries ``retries`` times; raises the last error, or ValueError for a downloaded file whose
    SHA-1 is not ``sha1_hash``."""
    if not isinstance(retries, int) or retries < 0:
        raise ValueError(f"download: retries must be a non-negative int, got {retries!r}")
    name = url.split("/")[-1]
    fname = name if path is None else (os.path.join(path, name) if os.path.isdir(path) else path)
    fname = os.path.expanduser(fname)
    if not overwrite and os.path.exists(fname) and (not sha1_hash or check_sha1(fname, sha1_hash)):
        return fname
    folder = os.path.dirname(os.path.abspath(fname))
    os.makedirs(folder, exist_ok=True)
    context = None
    if not verify_ssl:
        import ssl
        context = ssl._create_unverified_context()
    for attempt in range(retries + 1):
        handle, partial = tempfile.mkstemp(dir=folder, prefix=os.path.basename(fname) + ".")
        try:
            with os.fdopen(handle, "wb") as out, urllib.request.urlopen(url, context=context) as response:
                shutil.copyfileobj(response, out)
            if sha1_hash and not check_sha1(partial, sha1_hash):
                raise ValueError(f"download: the file from {url} does not have the SHA-1 {sha1_hash}")
            os.replace(partial, fname)
            return fname
        except Exception:
            if os.path.exists(partial):
                os.remove(partial)
            if attempt == retries:
                raise
    return fname
