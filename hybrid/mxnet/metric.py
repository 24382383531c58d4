"""``mxnet.metric``: hybrid's evaluation metrics (``hybrid.metric``) and Gluon 1.x's ``check_label_shapes``."""
from typing import Any

from ..metric import *  # noqa: F401,F403
from ..metric import __all__ as _metrics

__all__ = list(_metrics) + ["check_label_shapes"]


def check_label_shapes(labels: Any, preds: Any, wrap: bool = False, shape: bool = False) -> tuple:
    """MXNet's check that ``labels`` and ``preds`` agree in length (``shape=True``: in shape); raises
    ValueError where they do not. ``wrap=True`` puts a single array in a list. Returns ``(labels, preds)``."""
    label_shape, pred_shape = (labels.shape, preds.shape) if shape else (len(labels), len(preds))
    if label_shape != pred_shape:
        raise ValueError(f"Shape of labels {label_shape} does not match shape of predictions {pred_shape}")
    if wrap:
        from .handle import NDArray
        labels = [labels] if isinstance(labels, NDArray) else labels
        preds = [preds] if isinstance(preds, NDArray) else preds
    return labels, preds
