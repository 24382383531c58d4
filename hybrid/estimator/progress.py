"""``ProgressBar``: live progress of ``fit``: a tqdm bar per epoch on a terminal, plain lines elsewhere."""
from __future__ import annotations

import logging
import math
import sys
import time
from typing import Any

from .event_handler import BatchEnd, EpochBegin, EpochEnd, TrainBegin, TrainEnd

__all__ = ["ProgressBar"]

_COMPILE_LOG = logging.getLogger("hybrid.compile")


def _tqdm() -> Any:
    try:
        from tqdm.auto import tqdm
    except ImportError:
        return None
    return tqdm


class _CompileLines(logging.Handler):
    """Shows hybrid's 'compiled ... in N s' log lines while a bar is drawn, without breaking it."""

    def __init__(self, progress: "ProgressBar"):
        super().__init__(logging.INFO)
        self.progress = progress

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        if record.levelno == logging.INFO and message.startswith("compiled"):
            self.progress._line(message)


class ProgressBar(TrainBegin, TrainEnd, EpochBegin, BatchEnd, EpochEnd):
    """Per epoch: batches done (of the epoch's total when the data has a length), samples per second,
    time left, and the running training metrics; and a line for every compile (what, how long).

    ``style='auto'`` draws a tqdm bar when tqdm is installed (``pip install hybrid[tqdm]``) and the
    output is a terminal, and otherwise writes a plain line to ``estimator.logger`` at most every
    ``interval`` seconds; ``'bar'`` and ``'lines'`` force either. ``fit`` adds one unless given.
    Raises ValueError for another style, ImportError for ``'bar'`` without tqdm."""

    def __init__(self, style: str = "auto", interval: float = 10.0, priority: float = math.inf):
        if style not in ("auto", "bar", "lines"):
            raise ValueError(f"ProgressBar: style must be 'auto', 'bar' or 'lines', got {style!r}")
        if style == "bar" and _tqdm() is None:
            raise ImportError("ProgressBar(style='bar') needs tqdm: pip install 'hybrid[tqdm]'")
        self.style, self.interval, self.priority = style, interval, priority
        self._bar: Any = None
        self._logger: logging.Logger | None = None
        self._handler: _CompileLines | None = None
        self._old_level = logging.NOTSET
        self.epoch = 0

    def _uses_bar(self) -> bool:
        if self.style == "auto":
            return _tqdm() is not None and sys.stderr.isatty()
        return self.style == "bar"

    def _line(self, text: str) -> None:
        if self._bar is not None:
            self._bar.write(text)
        elif self._logger is not None:
            self._logger.info("%s", text)

    def train_begin(self, estimator: Any, *args: Any, **kwargs: Any) -> None:
        self._logger = estimator.logger
        self.epoch = estimator.start_epoch
        self._handler = _CompileLines(self)
        _COMPILE_LOG.addHandler(self._handler)
        self._old_level = _COMPILE_LOG.level
        if not _COMPILE_LOG.isEnabledFor(logging.INFO):
            _COMPILE_LOG.setLevel(logging.INFO)

    def train_end(self, estimator: Any, *args: Any, **kwargs: Any) -> None:
        self.release()

    def release(self) -> None:
        """Close the bar and stop showing compile lines (also when training stopped on an error)."""
        self._close()
        if self._handler is not None:
            _COMPILE_LOG.removeHandler(self._handler)
            _COMPILE_LOG.setLevel(self._old_level)
            self._handler = None

    def epoch_begin(self, estimator: Any, *args: Any, **kwargs: Any) -> None:
        self._start = self._last_line = time.perf_counter()
        self._batches = self._samples = 0
        self._total = estimator.batches_per_epoch
        if self._uses_bar():
            self._bar = _tqdm()(total=self._total, desc=f"epoch {self.epoch}", unit="batch", leave=True,
                                dynamic_ncols=True)

    def _status(self, estimator: Any) -> dict[str, str]:
        seconds = max(time.perf_counter() - self._start, 1e-9)
        status = {"samples/s": f"{self._samples / seconds:.0f}"}
        for metric in estimator.train_metrics:
            for name, value in metric.get_name_value():
                status[name.replace("training ", "")] = f"{value:.4f}"
        return status

    def batch_end(self, estimator: Any, *args: Any, **kwargs: Any) -> None:
        self._batches += 1
        self._samples += int(kwargs["batch"][0].shape[estimator.batch_axis])
        now = time.perf_counter()
        if self._bar is not None:
            self._bar.update(1)
            if now - self._last_line > 0.2:  # the postfix is text work: a few times a second
                self._bar.set_postfix(self._status(estimator), refresh=False)
                self._last_line = now
        elif now - self._last_line >= self.interval:
            self._last_line = now
            done = f"{self._batches}/{self._total}" if self._total else str(self._batches)
            left = ""
            if self._total:
                left = f", {(now - self._start) / self._batches * (self._total - self._batches):.0f}s left"
            status = ", ".join(f"{k} {v}" for k, v in self._status(estimator).items())
            self._line(f"[Epoch {self.epoch}] batch {done}{left}, {status}")

    def epoch_end(self, estimator: Any, *args: Any, **kwargs: Any) -> None:
        if self._bar is not None:
            self._bar.set_postfix(self._status(estimator), refresh=False)
        self._close()
        self.epoch += 1

    def _close(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None
