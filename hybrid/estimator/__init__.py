"""``hybrid.estimator``: Gluon's ``gluon.contrib.estimator``, a ``fit`` loop with event handlers.

    est = estimator.Estimator(net, loss.SoftmaxCELoss(), trainer=trainer)
    history = est.fit(train_loader, val_data=val_loader, epochs=5,
                      event_handlers=[estimator.CSVLogger("log.csv")])
"""
from .batch_processor import BatchProcessor
from .estimator import Estimator
from .event_handler import (BatchBegin, BatchEnd, CheckpointHandler, CSVLogger, EarlyStoppingHandler, EpochBegin,
                            EpochEnd, EventHandler, GradientUpdateHandler, LoggingHandler, LRSchedulerHandler,
                            MetricHandler, StoppingHandler, TensorBoardHandler, TrainBegin, TrainEnd,
                            ValidationHandler)
from .history import History
from .progress import ProgressBar

__all__ = ["Estimator", "BatchProcessor", "History", "EventHandler", "TrainBegin", "TrainEnd", "EpochBegin",
           "EpochEnd", "BatchBegin", "BatchEnd", "StoppingHandler", "MetricHandler", "ValidationHandler",
           "LoggingHandler", "CheckpointHandler", "EarlyStoppingHandler", "GradientUpdateHandler", "CSVLogger",
           "LRSchedulerHandler", "TensorBoardHandler", "ProgressBar"]
