"""Event handlers of ``Estimator.fit``: mixins naming the events a handler takes, and the built-ins.

A handler subclasses the mixins of its events and implements their methods; ``batch_end`` and
``epoch_end`` returning True stop training. Handlers run in ascending ``priority`` (default 0).
"""
from __future__ import annotations

import csv
import math
import os
import time
from typing import Any, Callable, Sequence

from .. import metric as _metric

__all__ = ["EventHandler", "TrainBegin", "TrainEnd", "EpochBegin", "EpochEnd", "BatchBegin", "BatchEnd",
           "StoppingHandler", "MetricHandler", "ValidationHandler", "LoggingHandler", "CheckpointHandler",
           "EarlyStoppingHandler", "GradientUpdateHandler", "CSVLogger", "LRSchedulerHandler", "TensorBoardHandler"]


class EventHandler:
    """Base of all handlers."""


class TrainBegin(EventHandler):
    def train_begin(self, estimator: Any, *args: Any, **kwargs: Any) -> None:
        pass


class TrainEnd(EventHandler):
    def train_end(self, estimator: Any, *args: Any, **kwargs: Any) -> None:
        pass


class EpochBegin(EventHandler):
    def epoch_begin(self, estimator: Any, *args: Any, **kwargs: Any) -> None:
        pass


class EpochEnd(EventHandler):
    def epoch_end(self, estimator: Any, *args: Any, **kwargs: Any) -> bool | None:
        pass


class BatchBegin(EventHandler):
    def batch_begin(self, estimator: Any, *args: Any, **kwargs: Any) -> None:
        pass


class BatchEnd(EventHandler):
    def batch_end(self, estimator: Any, *args: Any, **kwargs: Any) -> bool | None:
        pass


def _period(name: str, value: Any, owner: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{owner}: {name} must be a positive integer or None, got {value!r}")
    return value


class StoppingHandler(TrainBegin, BatchEnd, EpochEnd):
    """Stops after ``max_epoch`` epochs or ``max_batch`` batches (``fit`` adds one)."""

    def __init__(self, max_epoch: int | None = None, max_batch: int | None = None):
        self.max_epoch = _period("max_epoch", max_epoch, "StoppingHandler")
        self.max_batch = _period("max_batch", max_batch, "StoppingHandler")
        self.current_epoch = self.current_batch = 0

    def train_begin(self, estimator: Any, *args: Any, **kwargs: Any) -> None:
        self.current_epoch, self.current_batch = estimator.start_epoch, estimator.start_batch

    def batch_end(self, estimator: Any, *args: Any, **kwargs: Any) -> bool:
        self.current_batch += 1
        estimator.stop_training = estimator.stop_training or self.current_batch == self.max_batch
        return estimator.stop_training

    def epoch_end(self, estimator: Any, *args: Any, **kwargs: Any) -> bool:
        self.current_epoch += 1
        estimator.stop_training = estimator.stop_training or self.current_epoch == self.max_epoch
        return estimator.stop_training


class MetricHandler(EpochBegin, BatchEnd):
    """Resets ``metrics`` at each epoch and updates them after each batch: a ``metric.Loss`` from the
    loss, the others from labels and predictions."""

    def __init__(self, metrics: Sequence[_metric.EvalMetric], priority: float = -1000):
        self.metrics = list(metrics)
        self.priority = priority

    def epoch_begin(self, estimator: Any, *args: Any, **kwargs: Any) -> None:
        for m in self.metrics:
            m.reset()

    def batch_end(self, estimator: Any, *args: Any, **kwargs: Any) -> None:
        pred, label, loss = kwargs["pred"], kwargs["label"], kwargs["loss"]
        for m in self.metrics:
            if isinstance(m, _metric.Loss):
                m.update(0, loss)
            else:
                m.update(label, pred)


class ValidationHandler(TrainBegin, BatchEnd, EpochEnd):
    """Runs ``eval_fn(val_data, batch_axis=..., event_handlers=...)`` every ``epoch_period`` epochs
    and/or every ``batch_period`` batches (``fit`` adds one when given ``val_data``)."""

    def __init__(self, val_data: Any, eval_fn: Callable, epoch_period: int | None = 1,
                 batch_period: int | None = None, priority: float = -1000, event_handlers: Any = None):
        self.val_data, self.eval_fn = val_data, eval_fn
        self.epoch_period = _period("epoch_period", epoch_period, "ValidationHandler")
        self.batch_period = _period("batch_period", batch_period, "ValidationHandler")
        self.priority = priority
        self.event_handlers = event_handlers
        self.current_epoch = self.current_batch = 0

    def _evaluate(self, estimator: Any) -> None:
        self.eval_fn(val_data=self.val_data, batch_axis=estimator.batch_axis, event_handlers=self.event_handlers)

    def train_begin(self, estimator: Any, *args: Any, **kwargs: Any) -> None:
        self.current_epoch = self.current_batch = 0

    def batch_end(self, estimator: Any, *args: Any, **kwargs: Any) -> None:
        self.current_batch += 1
        if self.batch_period and self.current_batch % self.batch_period == 0:
            self._evaluate(estimator)

    def epoch_end(self, estimator: Any, *args: Any, **kwargs: Any) -> None:
        self.current_epoch += 1
        if self.epoch_period and self.current_epoch % self.epoch_period == 0:
            self._evaluate(estimator)


class LoggingHandler(TrainBegin, TrainEnd, EpochBegin, EpochEnd, BatchBegin, BatchEnd):
    """Writes progress to ``estimator.logger``: the start and end of training, each epoch's metrics
    and time, and with an integer ``log_interval`` the running metrics every that many batches."""

    def __init__(self, log_interval: int | str = "epoch", metrics: Sequence[_metric.EvalMetric] | None = None,
                 priority: float = math.inf):
        if log_interval != "epoch":
            _period("log_interval", log_interval, "LoggingHandler")
        self.log_interval = log_interval
        self.metrics = list(metrics or [])
        self.priority = priority
        self.batch_index = 0
        self.current_epoch = 0
        self.processed_samples = 0
        self._train_start = self._epoch_start = 0.0

    def _values(self) -> str:
        return ", ".join(f"{name}: {value:.4f}" for m in self.metrics for name, value in m.get_name_value())

    def train_begin(self, estimator: Any, *args: Any, **kwargs: Any) -> None:
        self._train_start = time.perf_counter()
        self.current_epoch = 0
        trainer = estimator.trainer
        estimator.logger.info("Training begin: using optimizer %s with current learning rate %.4f",
                              type(trainer.optimizer).__name__, trainer.learning_rate)
        if estimator.max_epoch:
            estimator.logger.info("Train for %d epochs.", estimator.max_epoch)
        else:
            estimator.logger.info("Train for %d batches.", estimator.max_batch)

    def train_end(self, estimator: Any, *args: Any, **kwargs: Any) -> None:
        estimator.logger.info("Train finished using total %ds with %d epochs. %s",
                              time.perf_counter() - self._train_start, self.current_epoch, self._values())

    def epoch_begin(self, estimator: Any, *args: Any, **kwargs: Any) -> None:
        self._epoch_start = time.perf_counter()
        self.batch_index = 0
        self.processed_samples = 0
        if self.log_interval != "epoch" and estimator.max_epoch:
            estimator.logger.info("[Epoch %d] Begin, current learning rate: %.4f", self.current_epoch,
                                  estimator.trainer.learning_rate)

    def batch_end(self, estimator: Any, *args: Any, **kwargs: Any) -> None:
        self.batch_index += 1
        self.processed_samples += int(kwargs["batch"][0].shape[estimator.batch_axis])
        if self.log_interval != "epoch" and self.batch_index % self.log_interval == 0:
            estimator.logger.info("[Epoch %d][Batch %d][Samples %d] %s", self.current_epoch, self.batch_index,
                                  self.processed_samples, self._values())

    def epoch_end(self, estimator: Any, *args: Any, **kwargs: Any) -> None:
        seconds = time.perf_counter() - self._epoch_start
        estimator.logger.info("[Epoch %d] Finished in %.3fs (%.0f samples/s), %s", self.current_epoch, seconds,
                              self.processed_samples / max(seconds, 1e-9), self._values())
        self.current_epoch += 1


def _monitor_mode(mode: str, monitor: _metric.EvalMetric, owner: str) -> str:
    if mode not in ("auto", "min", "max"):
        raise ValueError(f"{owner}: mode must be 'auto', 'min' or 'max', got {mode!r}")
    if mode != "auto":
        return mode
    name = monitor.get()[0].lower()
    return "max" if any(word in name for word in ("acc", "f1", "auc")) else "min"


class CheckpointHandler(TrainBegin, BatchEnd, EpochEnd):
    """Saves the net and trainer every ``epoch_period`` epochs and/or ``batch_period`` batches as
    checkpoints in ``model_dir/model_prefix`` (``hybrid.export.save_checkpoint``: atomic, checked on
    load), keeping the ``max_checkpoints`` newest. With ``save_best`` and a ``monitor`` metric, the
    parameters of the best value so far are also written to ``model_dir/<model_prefix>-best.params``.
    ``resume_from_checkpoint`` restores the newest checkpoint at the start of ``fit`` and trains only
    the epochs (or batches) that remain."""

    def __init__(self, model_dir: str, model_prefix: str = "model", monitor: _metric.EvalMetric | None = None,
                 verbose: int = 0, save_best: bool = False, mode: str = "auto", epoch_period: int | None = 1,
                 batch_period: int | None = None, max_checkpoints: int = 5, resume_from_checkpoint: bool = False):
        if save_best and monitor is None:
            raise ValueError("CheckpointHandler: save_best=True needs a monitor metric (e.g. est.val_metrics[0])")
        self.model_dir, self.model_prefix = os.fspath(model_dir), model_prefix
        self.monitor, self.verbose, self.save_best = monitor, verbose, save_best
        self.mode = _monitor_mode(mode, monitor, "CheckpointHandler") if monitor is not None else mode
        self.epoch_period = _period("epoch_period", epoch_period, "CheckpointHandler")
        self.batch_period = _period("batch_period", batch_period, "CheckpointHandler")
        self.max_checkpoints = _period("max_checkpoints", max_checkpoints, "CheckpointHandler")
        self.resume_from_checkpoint = resume_from_checkpoint
        self.current_epoch = self.current_batch = 0
        self.best = -math.inf if self.mode == "max" else math.inf

    @property
    def directory(self) -> str:
        return os.path.join(self.model_dir, self.model_prefix)

    def train_begin(self, estimator: Any, *args: Any, **kwargs: Any) -> None:
        from ..export import list_checkpoints, load_checkpoint
        self.current_epoch = self.current_batch = 0
        if self.resume_from_checkpoint and os.path.isdir(self.directory) and list_checkpoints(self.directory):
            info = load_checkpoint(self.directory, estimator.net, estimator.trainer)
            self.current_epoch, self.current_batch = info["epoch"], info["step"]
            estimator.resume(self.current_epoch, self.current_batch)
            estimator.logger.info("Resumed from %s (epoch %d, batch %d)", info["path"], self.current_epoch,
                                  self.current_batch)

    def batch_end(self, estimator: Any, *args: Any, **kwargs: Any) -> None:
        self.current_batch += 1
        if self.batch_period and self.current_batch % self.batch_period == 0:
            self._save(estimator)

    def epoch_end(self, estimator: Any, *args: Any, **kwargs: Any) -> None:
        self.current_epoch += 1
        if self.epoch_period and self.current_epoch % self.epoch_period == 0:
            self._save(estimator)

    def _save(self, estimator: Any) -> None:
        from ..export import save_checkpoint
        path = save_checkpoint(self.directory, estimator.net, estimator.trainer, step=self.current_batch,
                               epoch=self.current_epoch, keep=self.max_checkpoints, overwrite=True)
        if self.verbose:
            estimator.logger.info("[Epoch %d] checkpoint saved to %s", self.current_epoch, path)
        if self.save_best:
            value = self.monitor.get()[1]
            better = value > self.best if self.mode == "max" else value < self.best
            if better and not math.isnan(value):
                self.best = value
                os.makedirs(self.model_dir, exist_ok=True)
                estimator.net.save_parameters(os.path.join(self.model_dir, f"{self.model_prefix}-best.params"))
                if self.verbose:
                    estimator.logger.info("[Epoch %d] %s improved to %.5f: best parameters saved",
                                          self.current_epoch, self.monitor.get()[0], value)


class EarlyStoppingHandler(TrainBegin, EpochEnd, TrainEnd):
    """Stops training when ``monitor`` has not improved by more than ``min_delta`` for ``patience``
    epochs (or has not reached ``baseline``). ``mode='auto'`` maximises accuracy-like metrics and
    minimises the others."""

    def __init__(self, monitor: _metric.EvalMetric, min_delta: float = 0, patience: int = 0, mode: str = "auto",
                 baseline: float | None = None):
        if not isinstance(monitor, _metric.EvalMetric):
            raise ValueError(f"EarlyStoppingHandler: monitor must be a metric (e.g. est.val_metrics[0]), "
                             f"got {type(monitor).__name__}")
        if isinstance(patience, bool) or not isinstance(patience, int) or patience < 0:
            raise ValueError(f"EarlyStoppingHandler: patience must be a non-negative integer, got {patience!r}")
        self.monitor, self.patience, self.baseline = monitor, patience, baseline
        self.mode = _monitor_mode(mode, monitor, "EarlyStoppingHandler")
        self.min_delta = abs(min_delta) if self.mode == "max" else -abs(min_delta)
        self.wait = self.stopped_epoch = self.current_epoch = 0
        self.best = -math.inf if self.mode == "max" else math.inf

    def _improved(self, value: float, reference: float) -> bool:
        return value - self.min_delta > reference if self.mode == "max" else value - self.min_delta < reference

    def train_begin(self, estimator: Any, *args: Any, **kwargs: Any) -> None:
        self.wait = self.stopped_epoch = self.current_epoch = 0
        if self.baseline is not None:
            self.best = self.baseline
        else:
            self.best = -math.inf if self.mode == "max" else math.inf

    def epoch_end(self, estimator: Any, *args: Any, **kwargs: Any) -> bool:
        name, value = self.monitor.get()
        self.current_epoch += 1
        if math.isnan(value):
            return False
        if self._improved(value, self.best):
            self.best, self.wait = value, 0
            return False
        self.wait += 1
        if self.wait > self.patience:
            self.stopped_epoch = self.current_epoch
            estimator.stop_training = True
            return True
        return False

    def train_end(self, estimator: Any, *args: Any, **kwargs: Any) -> None:
        if self.stopped_epoch:
            estimator.logger.info("[Epoch %d] Stopped early: %s did not improve for %d epochs",
                                  self.stopped_epoch, self.monitor.get()[0], self.patience + 1)


class GradientUpdateHandler(BatchEnd):
    """Applies the update, ``trainer.step(batch size)``, first at each batch end (``fit`` adds one)."""

    def __init__(self, priority: float = -2000):
        self.priority = priority

    def batch_end(self, estimator: Any, *args: Any, **kwargs: Any) -> None:
        data = kwargs["batch"][0]
        estimator.trainer.step(data.shape[estimator.batch_axis])


class CSVLogger(TrainBegin, EpochEnd):
    """Writes one row per epoch to ``path``: the epoch, then each metric's value (training and
    validation; all of the estimator's by default), with a header row."""

    def __init__(self, path: str, metrics: Sequence[_metric.EvalMetric] | None = None, priority: float = 1000):
        self.path, self.metrics, self.priority = os.fspath(path), metrics, priority
        self.current_epoch = 0

    def _metrics(self, estimator: Any) -> list:
        return list(self.metrics) if self.metrics is not None else estimator.train_metrics + estimator.val_metrics

    def train_begin(self, estimator: Any, *args: Any, **kwargs: Any) -> None:
        self.current_epoch = 0
        names = [name for m in self._metrics(estimator) for name, _ in m.get_name_value()]
        with open(self.path, "w", newline="") as handle:
            csv.writer(handle).writerow(["epoch"] + names)

    def epoch_end(self, estimator: Any, *args: Any, **kwargs: Any) -> None:
        self.current_epoch += 1
        values = [value for m in self._metrics(estimator) for _, value in m.get_name_value()]
        with open(self.path, "a", newline="") as handle:
            csv.writer(handle).writerow([self.current_epoch] + [f"{v:.6g}" for v in values])


class LRSchedulerHandler(TrainBegin, EpochBegin, BatchBegin):
    """Sets the trainer's learning rate from ``schedule(count)`` before each epoch (``by='epoch'``,
    counting from 0) or each batch (``by='batch'``); ``schedule`` is any callable, such as the
    schedulers of ``hybrid.lr_scheduler``."""

    def __init__(self, schedule: Callable[[int], float], by: str = "epoch", priority: float = -3000):
        if by not in ("epoch", "batch"):
            raise ValueError(f"LRSchedulerHandler: by must be 'epoch' or 'batch', got {by!r}")
        if not callable(schedule):
            raise ValueError(f"LRSchedulerHandler: schedule must be callable, got {type(schedule).__name__}")
        self.schedule, self.by, self.priority = schedule, by, priority
        self.count = 0

    def train_begin(self, estimator: Any, *args: Any, **kwargs: Any) -> None:
        self.count = 0

    def _set(self, estimator: Any) -> None:
        estimator.trainer.set_learning_rate(float(self.schedule(self.count)))
        self.count += 1

    def epoch_begin(self, estimator: Any, *args: Any, **kwargs: Any) -> None:
        if self.by == "epoch":
            self._set(estimator)

    def batch_begin(self, estimator: Any, *args: Any, **kwargs: Any) -> None:
        if self.by == "batch":
            self._set(estimator)


class TensorBoardHandler(TrainBegin, TrainEnd, BatchEnd, EpochEnd):
    """Writes metric values as TensorBoard scalars to an event file in ``logdir`` (tensorboardX,
    ``pip install hybrid[tensorboard]``): every metric at each epoch's end as ``epoch/<metric>``
    (step = epoch), and with an integer ``log_interval`` the training metrics every that many
    batches as ``batch/<metric>`` (step = batch); spaces in names become underscores. Raises
    ImportError without tensorboardX."""

    def __init__(self, logdir: str, metrics: Sequence[_metric.EvalMetric] | None = None,
                 log_interval: int | str = "epoch", priority: float = 1000):
        try:
            from tensorboardX import SummaryWriter
        except ImportError as exc:
            raise ImportError("TensorBoardHandler needs tensorboardX: pip install 'hybrid[tensorboard]'") from exc
        if log_interval != "epoch":
            _period("log_interval", log_interval, "TensorBoardHandler")
        self._writer_class = SummaryWriter
        self.logdir, self.metrics, self.log_interval, self.priority = os.fspath(logdir), metrics, log_interval, priority
        self.writer: Any = None
        self.current_epoch = self.current_batch = 0

    def _write(self, metrics: Sequence[_metric.EvalMetric], group: str, step: int) -> None:
        for m in metrics:
            for name, value in m.get_name_value():
                if not math.isnan(value):
                    self.writer.add_scalar(f"{group}/{name.replace(' ', '_')}", value, step)

    def train_begin(self, estimator: Any, *args: Any, **kwargs: Any) -> None:
        self.writer = self._writer_class(self.logdir)
        self.current_epoch, self.current_batch = estimator.start_epoch, estimator.start_batch

    def batch_end(self, estimator: Any, *args: Any, **kwargs: Any) -> None:
        self.current_batch += 1
        if self.log_interval != "epoch" and self.current_batch % self.log_interval == 0:
            self._write(self.metrics if self.metrics is not None else estimator.train_metrics, "batch",
                        self.current_batch)

    def epoch_end(self, estimator: Any, *args: Any, **kwargs: Any) -> None:
        self.current_epoch += 1
        metrics = self.metrics if self.metrics is not None else estimator.train_metrics + estimator.val_metrics
        self._write(metrics, "epoch", self.current_epoch)
        self.writer.flush()

    def train_end(self, estimator: Any, *args: Any, **kwargs: Any) -> None:
        self.release()

    def release(self) -> None:
        """Close the event file (also when training stopped on an error)."""
        if self.writer is not None:
            self.writer.close()
            self.writer = None
