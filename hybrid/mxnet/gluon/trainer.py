"""``mxnet.gluon.Trainer``: hybrid's Trainer, taking an optimizer name as ``mx.optimizer.create`` does."""
from __future__ import annotations

from typing import Any

from ... import trainer as _trainer
from .. import optimizer as _optimizer

__all__ = ["Trainer"]


class Trainer(_trainer.Trainer):
    """``Trainer(params, optimizer, optimizer_params=None, ...)`` as :class:`hybrid.Trainer`, except that an
    optimizer given by name is made by ``mx.optimizer.create``, so ``'adagrad'`` and ``'adadelta'`` are
    MXNet 1.x's (``mx.optimizer.AdaGrad``, ``AdaDelta``)."""

    def __init__(self, params: Any, optimizer: Any, optimizer_params: dict | None = None, *args: Any, **kwargs: Any):
        if isinstance(optimizer, str):
            optimizer = _optimizer.create(optimizer, **(optimizer_params or {}))
            optimizer_params = None
        super().__init__(params, optimizer, optimizer_params, *args, **kwargs)
