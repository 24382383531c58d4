"""``mxnet.gluon.utils``: hybrid's ``split_data``, MXNet's in-place ``clip_global_norm`` and a
``split_and_load`` that also takes MXNet contexts (``[mx.cpu()]``, ``[mx.gpu(0), mx.gpu(1)]``)."""
from __future__ import annotations

import hashlib
import os
from typing import Any

from ... import utils as _utils
from ...parameter import Parameter
from ...utils import split_data
from ..array_methods import write_back
from ..context import to_device
from ..handle import NDArray

__all__ = ["split_data", "split_and_load", "clip_global_norm", "check_sha1", "download"]

_DEFAULT_REPO = "https://apache-mxnet.s3-accelerate.dualstack.amazonaws.com/"


def split_and_load(data: Any, ctx_list: Any = None, batch_axis: int = 0, even_split: bool = True,
                   devices: Any = None) -> list:
    """``hybrid.utils.split_and_load`` with ``mx.Context``s turned into their JAX devices."""
    return _utils.split_and_load(data, to_device(ctx_list) if ctx_list is not None else None, batch_axis,
                                 even_split, devices=to_device(devices) if devices is not None else None)


def clip_global_norm(arrays: Any, max_norm: float, check_isfinite: bool = True) -> Any:
    """MXNet's ``clip_global_norm``: scales ``arrays`` in place by ``min(1, max_norm / total_norm)`` and
    returns the total L2 norm (a float when ``check_isfinite``). The arrays are handles (``mx.nd``/``mx.np``),
    the arrays Parameters' ``grad()`` or ``data()`` returned (their Parameters are written), or Parameters
    (their gradients). Raises TypeError for any other array: a ``jax.Array`` cannot change in place (use
    ``hybrid.utils.clip_global_norm``, which returns the clipped arrays)."""
    items = list(arrays.values()) if isinstance(arrays, dict) else list(arrays)
    if items and all(isinstance(item, Parameter) for item in items):
        return _utils.clip_global_norm(items, max_norm, check_isfinite)
    values = [item.value if isinstance(item, NDArray) else item for item in items]
    clipped, norm = _utils.clip_global_norm(values, max_norm, check_isfinite)
    for i, (item, value) in enumerate(zip(items, clipped)):
        if isinstance(item, NDArray):
            item._assign(value)
        elif not write_back(item, value):
            raise TypeError(f"clip_global_norm: array {i} is a {type(item).__name__} that cannot change in place "
                            "(pass mx.nd/mx.np arrays, p.grad() of Parameters, or the Parameters; "
                            "hybrid.utils.clip_global_norm returns the clipped arrays)")
    return norm


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
    """The file MXNet would download ``url`` to (``path``: a file name, or a folder for the URL's last part;
    default the current folder) when it is there and, with ``sha1_hash``, has that SHA-1. hybrid makes no
    network call: FileNotFoundError naming the URL and the path otherwise (also for ``overwrite=True``, and
    for a file whose SHA-1 differs, which MXNet would download again)."""
    from ..test_utils import _missing
    if not isinstance(retries, int) or retries < 0:
        raise ValueError(f"download: retries must be a non-negative int, got {retries!r}")
    name = url.split("/")[-1]
    fname = name if path is None else (os.path.join(path, name) if os.path.isdir(path) else path)
    fname = os.path.expanduser(fname)
    what = f"gluon.utils.download({url!r})"
    if os.path.exists(fname) and not overwrite:
        if not sha1_hash or check_sha1(fname, sha1_hash):
            return fname
        what += f": the file there does not have the SHA-1 {sha1_hash}"
    elif overwrite:
        what += " with overwrite=True"
    raise _missing([(url, fname)], what)
