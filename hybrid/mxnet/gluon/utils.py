"""``mxnet.gluon.utils``: hybrid's ``split_data``, ``clip_global_norm`` and a ``split_and_load`` that also
takes MXNet contexts (``[mx.cpu()]``, ``[mx.gpu(0), mx.gpu(1)]``)."""
from __future__ import annotations

from typing import Any

from ... import utils as _utils
from ...utils import clip_global_norm, split_data
from ..context import to_device

__all__ = ["split_data", "split_and_load", "clip_global_norm"]


def split_and_load(data: Any, ctx_list: Any = None, batch_axis: int = 0, even_split: bool = True,
                   devices: Any = None) -> list:
    """``hybrid.utils.split_and_load`` with ``mx.Context``s turned into their JAX devices."""
    return _utils.split_and_load(data, to_device(ctx_list) if ctx_list is not None else None, batch_axis,
                                 even_split, devices=to_device(devices) if devices is not None else None)
