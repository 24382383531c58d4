"""``Estimator``: Gluon's ``fit``/``evaluate`` loop driven by event handlers."""
from __future__ import annotations

import copy
import logging
import sys
import warnings
from typing import Any

from .. import init as _init
from .. import loss as _loss
from .. import metric as _metric
from ..trainer import Trainer
from .batch_processor import BatchProcessor
from .event_handler import (BatchBegin, BatchEnd, EpochBegin, EpochEnd, EventHandler, GradientUpdateHandler,
                            LoggingHandler, MetricHandler, StoppingHandler, TrainBegin, TrainEnd, ValidationHandler)
from .history import History
from .progress import ProgressBar

__all__ = ["Estimator"]


def _logger() -> logging.Logger:
    logger = logging.getLogger("hybrid.estimator")
    if not logger.handlers:  # Gluon's estimator prints its log lines; so does this one, to stdout
        handler = logging.StreamHandler(sys.stdout)
        handler.setFormatter(logging.Formatter("%(message)s"))
        logger.addHandler(handler)
        logger.setLevel(logging.INFO)
        logger.propagate = False
    return logger


def _instances(value: Any, kind: type, name: str) -> list:
    """``value`` (None, one object or a list/tuple of them) as a list of ``kind`` instances; ValueError
    naming the argument ``name`` otherwise."""
    items = [] if value is None else list(value) if isinstance(value, (list, tuple)) else [value]
    for item in items:
        if not isinstance(item, kind):
            raise ValueError(f"Estimator: {name} must be {kind.__module__}.{kind.__name__} instances, got "
                             f"{type(item).__name__}")
    return items


class Estimator:
    """Trains ``net`` with ``loss`` by ``fit`` and measures it by ``evaluate``, as Gluon's
    ``gluon.contrib.estimator.Estimator``.

    Args:
        net: the Block to train; initialised with ``initializer`` (default Uniform) if it is not.
        loss: a ``hybrid.loss.Loss``.
        train_metrics / val_metrics: metrics (default: accuracy for softmax cross-entropy, and the
            loss); named with a ``'training '`` / ``'validation '`` prefix.
        trainer: a ``Trainer`` (default: SGD with learning rate 0.001, with a warning).
        val_net / val_loss: used by ``evaluate`` instead of ``net`` / ``loss``.
        batch_processor: a ``BatchProcessor`` whose ``fit_batch``/``evaluate_batch`` handle a batch.
        device / context: one device or None (several devices: use ``Trainer(devices=...)``).
    Raises ValueError for arguments of the wrong kind.
    """

    def __init__(self, net: Any, loss: _loss.Loss, train_metrics: Any = None, val_metrics: Any = None,
                 initializer: Any = None, trainer: Trainer | None = None, context: Any = None,
                 val_net: Any = None, val_loss: _loss.Loss | None = None,
                 batch_processor: BatchProcessor | None = None, device: Any = None):
        for name, value in (("loss", loss), ("val_loss", val_loss)):
            if value is not None and not isinstance(value, _loss.Loss):
                raise ValueError(f"Estimator: {name} must be a hybrid.loss.Loss, got {type(value).__name__}")
        devices = device if device is not None else context
        if isinstance(devices, (list, tuple)) and len(devices) > 1:
            raise ValueError("Estimator: trains on one device; for several, give the Trainer devices= (or a mesh) "
                             "and split batches with hybrid.distributed.shard_batch")
        if batch_processor is not None and not isinstance(batch_processor, BatchProcessor):
            raise ValueError("Estimator: batch_processor must be a BatchProcessor, got "
                             f"{type(batch_processor).__name__}")
        self.net, self.loss = net, loss
        self.val_net = val_net if val_net is not None else net
        self.val_loss = val_loss if val_loss is not None else loss
        self.batch_processor = batch_processor or BatchProcessor()
        self.logger = _logger()
        self._train_metrics = _instances(train_metrics, _metric.EvalMetric, "train_metrics")
        self._val_metrics = _instances(val_metrics, _metric.EvalMetric, "val_metrics")
        self._default_metrics()
        self._initialize(initializer)
        if trainer is None:
            warnings.warn("Estimator: no trainer given; using SGD with learning rate 0.001", stacklevel=2)
            trainer = Trainer(net.collect_params(), "sgd", {"learning_rate": 0.001})
        elif not isinstance(trainer, Trainer):
            raise ValueError(f"Estimator: trainer must be a hybrid.Trainer, got {type(trainer).__name__}")
        self.trainer = trainer
        self.max_epoch: int | None = None
        self.max_batch: int | None = None
        self.batch_axis = 0
        self.batches_per_epoch: int | None = None  # when the training data has a length
        self.start_epoch = self.start_batch = 0
        self.stop_training = False
        self.history = History()
        self._active: list[EventHandler] = []

    @property
    def train_metrics(self) -> list[_metric.EvalMetric]:
        return self._train_metrics

    @property
    def val_metrics(self) -> list[_metric.EvalMetric]:
        return self._val_metrics

    def _default_metrics(self) -> None:
        if not self._train_metrics:
            if isinstance(self.loss, _loss.SoftmaxCrossEntropyLoss):
                self._train_metrics.append(_metric.Accuracy())
            self._train_metrics.append(_metric.Loss(type(self.loss).__name__))
        for m in self._train_metrics:
            m.name = m.name if m.name.startswith("training ") else "training " + m.name
        if not self._val_metrics:
            self._val_metrics = [copy.deepcopy(m) for m in self._train_metrics]
        for m in self._val_metrics:
            m.name = m.name.replace("training ", "validation ", 1) if m.name.startswith("training ") \
                else m.name if m.name.startswith("validation ") else "validation " + m.name

    def _initialize(self, initializer: Any) -> None:
        params = self.net.collect_params().values()
        if all(p.is_initialized or p.is_deferred for p in params):
            if initializer is not None:
                warnings.warn("Estimator: the net is already initialised; initializer ignored", stacklevel=3)
            return
        self.net.initialize(init=initializer if initializer is not None else _init.Uniform())

    def resume(self, epoch: int, batch: int) -> None:
        """Continue counting from ``epoch`` and ``batch`` (a handler restored a checkpoint): ``fit``
        then trains only what remains of ``epochs`` or ``batches``."""
        self.start_epoch, self.start_batch = epoch, batch
        for handler in self._active:
            if isinstance(handler, StoppingHandler):
                handler.current_epoch, handler.current_batch = epoch, batch

    # -- the loops ---------------------------------------------------------------------------
    def evaluate(self, val_data: Any, batch_axis: int = 0, event_handlers: Any = None) -> None:
        """Run ``val_net`` and ``val_loss`` over ``val_data`` (an iterable of ``(data, label)``
        batches, such as a DataLoader), updating ``val_metrics``."""
        for m in self.val_metrics:
            m.reset()
        handlers = _instances(event_handlers, EventHandler, "event_handlers")
        if not any(isinstance(h, MetricHandler) for h in handlers):
            handlers.append(MetricHandler(self.val_metrics))
        handlers.sort(key=lambda h: getattr(h, "priority", 0))
        epoch_begin, batch_begin, batch_end, epoch_end = (
            [h for h in handlers if isinstance(h, kind)] for kind in (EpochBegin, BatchBegin, BatchEnd, EpochEnd))
        for h in epoch_begin:
            h.epoch_begin(self)
        for batch in val_data:
            for h in batch_begin:
                h.batch_begin(self, batch=batch)
            _, label, pred, loss = self.batch_processor.evaluate_batch(self, batch, batch_axis)
            for h in batch_end:
                h.batch_end(self, batch=batch, pred=pred, label=label, loss=loss)
        for h in epoch_end:
            h.epoch_end(self)

    def fit(self, train_data: Any, val_data: Any = None, epochs: int | None = None, event_handlers: Any = None,
            batches: int | None = None, batch_axis: int = 0) -> History:
        """Train for ``epochs`` passes over ``train_data`` or for ``batches`` batches (exactly one of
        them), running ``event_handlers`` plus defaults (a StoppingHandler, GradientUpdateHandler,
        MetricHandler, LoggingHandler, ProgressBar, and a ValidationHandler when ``val_data`` is
        given) that are not already among them. Each batch's forward, backward and update run as one compiled
        program. Returns the :class:`History` of the metrics (also ``self.history``)."""
        if (not epochs) == (not batches):
            raise ValueError("Estimator.fit: give exactly one of epochs or batches (a positive integer)")
        self.max_epoch, self.max_batch, self.batch_axis = epochs, batches, batch_axis
        self.batches_per_epoch = len(train_data) if hasattr(train_data, "__len__") else None
        self.start_epoch = self.start_batch = 0
        self.stop_training = False
        self.history = History()
        handlers = _instances(event_handlers, EventHandler, "event_handlers")
        handlers = self._active = self._with_defaults(handlers, val_data)
        train_begin, epoch_begin, batch_begin, batch_end, epoch_end, train_end = (
            [h for h in handlers if isinstance(h, kind)]
            for kind in (TrainBegin, EpochBegin, BatchBegin, BatchEnd, EpochEnd, TrainEnd))
        for m in self.train_metrics:  # running values per batch, recorded as the metrics read them
            m.batch_values = self.history.batch.setdefault(m.name, [])
        try:
            for h in train_begin:
                h.train_begin(self)
            self._train(train_data, val_data, epoch_begin, batch_begin, batch_end, epoch_end)
        finally:
            for m in self.train_metrics:
                m.get()  # reads what the metrics still hold
                m.batch_values = None
            failed = sys.exc_info()[0] is not None
            for h in handlers if failed else ():
                release = getattr(h, "release", None)  # handlers holding a file, a bar, a log handler
                if release is not None:
                    release()
        for h in train_end:
            h.train_end(self)
        return self.history

    def _train(self, train_data: Any, val_data: Any, epoch_begin: list, batch_begin: list, batch_end: list,
               epoch_end: list) -> None:
        batch_axis = self.batch_axis
        while not self._done():
            for h in epoch_begin:
                h.epoch_begin(self)
            for batch in train_data:
                for h in batch_begin:
                    h.batch_begin(self, batch=batch)
                _, label, pred, loss = self.batch_processor.fit_batch(self, batch, batch_axis)
                stop = [h.batch_end(self, batch=batch, pred=pred, label=label, loss=loss) for h in batch_end]
                if any(stop):
                    break
            stop = [h.epoch_end(self) for h in epoch_end]
            metrics = self.train_metrics + (self.val_metrics if val_data is not None else [])
            self.history._add(self.history.epoch, metrics)
            if any(stop):
                break

    def _done(self) -> bool:
        """Nothing left to train (a resumed fit may start at its end)."""
        return bool(self.max_epoch and self.start_epoch >= self.max_epoch
                    or self.max_batch and self.start_batch >= self.max_batch)

    def _with_defaults(self, handlers: list[EventHandler], val_data: Any) -> list[EventHandler]:
        added: list[EventHandler] = [StoppingHandler(self.max_epoch, self.max_batch)]
        if not any(isinstance(h, GradientUpdateHandler) for h in handlers):
            added.append(GradientUpdateHandler())
        if not any(isinstance(h, MetricHandler) for h in handlers):
            added.append(MetricHandler(self.train_metrics))
        if val_data is not None and not any(isinstance(h, ValidationHandler) for h in handlers):
            added.append(ValidationHandler(val_data, self.evaluate))
        if not any(isinstance(h, LoggingHandler) for h in handlers):
            metrics = self.train_metrics + (self.val_metrics if val_data is not None else [])
            added.append(LoggingHandler(metrics=metrics))
        if not any(isinstance(h, ProgressBar) for h in handlers):
            added.append(ProgressBar())
        handlers = handlers + added
        handlers.sort(key=lambda h: getattr(h, "priority", 0))
        return handlers

