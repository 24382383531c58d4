"""What ``Estimator.fit`` and ``evaluate`` do with one batch (override to customise)."""
from __future__ import annotations

from typing import Any

from .. import amp, autograd

__all__ = ["BatchProcessor"]


class BatchProcessor:
    """``fit_batch`` records forward and loss and runs ``backward`` (of the losses scaled by
    ``hybrid.amp.scale_loss`` when the trainer has a loss scaler); ``evaluate_batch`` runs forward
    and loss. Both return ``(data, label, pred, loss)``, each a list with one entry per device
    (one here), as Gluon's. The update itself is :class:`GradientUpdateHandler`'s, at batch end, so
    that forward, backward and update run as one program."""

    def _data_and_label(self, batch: Any, batch_axis: int = 0) -> tuple[list, list]:
        if not isinstance(batch, (tuple, list)) or len(batch) < 2:
            raise ValueError(f"Estimator: a batch must be (data, label), got {type(batch).__name__}"
                             + (f" of length {len(batch)}" if isinstance(batch, (tuple, list)) else ""))
        return [batch[0]], [batch[1]]

    def fit_batch(self, estimator: Any, train_batch: Any, batch_axis: int = 0) -> tuple[list, list, list, list]:
        """Forward, loss and backward of one training batch."""
        data, label = self._data_and_label(train_batch, batch_axis)
        with autograd.record():
            pred = [estimator.net(x) for x in data]
            loss = [estimator.loss(y_hat, y) for y_hat, y in zip(pred, label)]
        if estimator.trainer.loss_scaler is not None:
            with amp.scale_loss(loss, estimator.trainer) as scaled:
                autograd.backward(scaled)
        else:
            autograd.backward(loss)
        return data, label, pred, loss

    def evaluate_batch(self, estimator: Any, val_batch: Any, batch_axis: int = 0) -> tuple[list, list, list, list]:
        """Forward and loss of one validation batch (predict mode)."""
        data, label = self._data_and_label(val_batch, batch_axis)
        pred = [estimator.val_net(x) for x in data]
        loss = [estimator.val_loss(y_hat, y) for y_hat, y in zip(pred, label)]
        return data, label, pred, loss
