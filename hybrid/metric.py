"""Evaluation metrics (Gluon's API), accumulated on the host with NumPy.

``update(labels, preds)`` takes arrays (NumPy or JAX) or lists of them; it copies them
to the host once and never compiles anything. ``get()`` returns ``(name, value)``,
``nan`` before the first update. ``Accuracy`` and ``Loss`` given JAX arrays (a training loop's
outputs) do not wait for them: the copy to the host starts in the background and the arrays are
read at the next ``get()`` or after 16 batches, so that updating them every batch does not stop
the device's queue.
"""
from __future__ import annotations

import functools
import math
from typing import Any, Callable, Sequence

import jax
import numpy as np

from ._core import context as _context, lazy as _lazy

__all__ = ["EvalMetric", "Accuracy", "TopKAccuracy", "F1", "MAE", "MSE", "RMSE", "CrossEntropy", "Perplexity",
           "Loss", "CompositeEvalMetric", "CustomMetric", "create", "register"]

_REGISTRY: dict[str, type] = {}


def register(cls: type, *aliases: str) -> type:
    """Register an EvalMetric subclass for :func:`create` under its lower-case name and ``aliases``."""
    for name in (cls.__name__.lower(), *aliases):
        _REGISTRY[name] = cls
    return cls


def _alias(*names: str) -> Callable[[type], type]:
    return lambda cls: register(cls, *names)


def _as_list(arrays: Any) -> list[np.ndarray]:
    if isinstance(arrays, (list, tuple)):
        return [np.asarray(a) for a in arrays]
    return [np.asarray(arrays)]


def _pairs(labels: Any, preds: Any) -> list[tuple[np.ndarray, np.ndarray]]:
    labels, preds = _as_list(labels), _as_list(preds)
    if len(labels) != len(preds):
        raise ValueError(f"{len(labels)} label arrays but {len(preds)} prediction arrays")
    return list(zip(labels, preds))


HELD_BATCHES = 16  # batches a deferring metric holds before reading their values


def _host_update(update: Callable) -> Callable:
    """Wrap a metric's ``update`` so that, inside a ``hybrid.compile`` step, it runs on the host
    with the step's concrete arrays (an ordered callback in the compiled program), and so that a
    metric with ``_defers`` holds device arrays instead of waiting for them."""
    @functools.wraps(update)
    def wrapped(self, labels, preds):
        if _context.current().store.host_call(functools.partial(update, self), labels, preds):
            return  # inside hybrid.compile: an ordered callback of the step
        if not (self._defers and self._hold(labels, preds)):
            update(self, labels, preds)
            self._note_batch()
    wrapped.now = update
    return wrapped


def _device_arrays(value: Any) -> list | None:
    """The JAX arrays of ``value`` (an array or a list of them), recorded values made concrete;
    None when one of them is not a JAX array."""
    arrays = [_lazy.concrete(a) for a in (value if isinstance(value, (list, tuple)) else [value])]
    return arrays if all(isinstance(a, jax.Array) for a in arrays) else None


class EvalMetric:
    """Base class: keeps ``sum_metric`` and ``num_inst``; ``get()`` is their ratio.

    Subclasses implement ``update``; inside a ``hybrid.compile`` step it is called on the
    host with the step's arrays each time the compiled step runs.
    """

    _defers = False  # whether update may hold device arrays and read them later (see _hold)
    batch_values: list | None = None  # when a list, the running value is appended after each batch

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "update" in cls.__dict__:
            cls.update = _host_update(cls.__dict__["update"])

    def __init__(self, name: str, output_names: Sequence[str] | None = None,
                 label_names: Sequence[str] | None = None, **kwargs: Any):
        self.name = str(name)
        self.output_names, self.label_names = output_names, label_names
        self._kwargs = kwargs
        self.reset()

    def update(self, labels: Any, preds: Any) -> None:
        """Accumulate one batch (arrays or lists of arrays)."""
        raise NotImplementedError

    def reset(self) -> None:
        """Forget everything accumulated."""
        self.num_inst = 0
        self.sum_metric = 0.0
        self._held: list = []

    def _check(self, labels: list, preds: list) -> None:
        """Check shapes when an update is held (its values are read later)."""
        if len(labels) != len(preds):
            raise ValueError(f"{len(labels)} label arrays but {len(preds)} prediction arrays")

    def _hold(self, labels: Any, preds: Any) -> bool:
        """Keep an update of JAX arrays for later, their copy to the host started; False (nothing
        held) when some of them are not JAX arrays."""
        label_arrays, pred_arrays = _device_arrays(labels), _device_arrays(preds)
        if label_arrays is None or pred_arrays is None:
            return False
        self._check(label_arrays, pred_arrays)
        for array in label_arrays + pred_arrays:
            array.copy_to_host_async()
        self._held.append((label_arrays, pred_arrays))
        if len(self._held) >= HELD_BATCHES:
            self._read_held()
        return True

    def _read_held(self) -> None:
        held, self._held = self._held, []
        for labels, preds in held:
            type(self).update.now(self, labels, preds)
            self._note_batch()

    def _note_batch(self) -> None:
        if self.batch_values is not None and self.num_inst:
            self.batch_values.append(float(self.sum_metric / self.num_inst))

    def get(self) -> tuple[Any, Any]:
        """``(name, value)``; ``value`` is ``nan`` when nothing was accumulated."""
        if self._held:
            self._read_held()
        if self.num_inst == 0:
            return self.name, float("nan")
        return self.name, float(self.sum_metric / self.num_inst)

    def get_name_value(self) -> list[tuple[str, float]]:
        """``[(name, value), ...]``: one pair, or one per child of a composite."""
        name, value = self.get()
        if not isinstance(name, list):
            name, value = [name], [value]
        return list(zip(name, value))

    def __str__(self) -> str:
        return f"EvalMetric: {dict(self.get_name_value())}"


@_alias("composite")
class CompositeEvalMetric(EvalMetric):
    """Several metrics updated together; ``get()`` returns lists of names and values."""

    def __init__(self, metrics: Sequence[Any] | None = None, name: str = "composite",
                 output_names: Sequence[str] | None = None, label_names: Sequence[str] | None = None):
        self.metrics = [create(m) for m in (metrics or [])]
        super().__init__(name, output_names, label_names)

    def add(self, metric: Any) -> None:
        """Add a child metric (instance or name)."""
        self.metrics.append(create(metric))

    def get_metric(self, index: int) -> EvalMetric:
        return self.metrics[index]

    def update(self, labels, preds):
        labels, preds = _as_list(labels), _as_list(preds)
        for metric in self.metrics:
            metric.update(labels, preds)

    def reset(self):
        for metric in getattr(self, "metrics", []):
            metric.reset()

    def get(self):
        names, values = [], []
        for metric in self.metrics:
            for name, value in metric.get_name_value():
                names.append(name)
                values.append(value)
        return names, values


@_alias("acc")
class Accuracy(EvalMetric):
    """Fraction of correct predictions. Predictions are class indices of the labels' shape,
    or scores whose arg-max over ``axis`` is the class."""

    _defers = True

    def __init__(self, axis: int = 1, name: str = "accuracy", output_names=None, label_names=None):
        super().__init__(name, output_names, label_names, axis=axis)
        self.axis = axis

    def _check(self, labels: list, preds: list) -> None:
        super()._check(labels, preds)
        for label, pred in zip(labels, preds):
            classes = pred.size if pred.shape == label.shape else pred.size // max(pred.shape[self.axis], 1)
            if classes != label.size:
                raise ValueError(f"Accuracy: {label.size} labels but {classes} predicted classes")

    def update(self, labels, preds):
        for label, pred in _pairs(labels, preds):
            if pred.shape != label.shape:
                pred = pred.argmax(axis=self.axis)
            pred, label = pred.astype(np.int64).ravel(), label.astype(np.int64).ravel()
            if pred.shape != label.shape:
                raise ValueError(f"Accuracy: {label.size} labels but {pred.size} predicted classes")
            self.sum_metric += float((pred == label).sum())
            self.num_inst += label.size


@_alias("top_k_accuracy", "top_k_acc")
class TopKAccuracy(EvalMetric):
    """Fraction of samples whose label is among the ``top_k`` highest scores of
    ``preds`` ``(N, C)``. Named ``'top_k_accuracy_<k>'``."""

    def __init__(self, top_k: int = 1, name: str = "top_k_accuracy", output_names=None, label_names=None):
        if top_k < 1:
            raise ValueError(f"TopKAccuracy: top_k must be >= 1, got {top_k}")
        super().__init__(f"{name}_{top_k}", output_names, label_names, top_k=top_k)
        self.top_k = top_k

    def update(self, labels, preds):
        for label, pred in _pairs(labels, preds):
            if pred.ndim != 2:
                raise ValueError(f"TopKAccuracy: predictions must be (batch, classes), got shape {pred.shape}")
            top = np.argsort(-pred, axis=1, kind="stable")[:, :self.top_k]
            label = label.astype(np.int64).reshape(-1, 1)
            self.sum_metric += float((top == label).any(axis=1).sum())
            self.num_inst += pred.shape[0]


@register
class F1(EvalMetric):
    """F1 score from true/false positive counts accumulated over all updates.

    ``average='binary'``: labels in {0, 1}; predictions are probabilities of class 1
    (labels' shape, positive when ``> threshold``) or ``(N, 2)`` scores (column 1 against
    ``threshold``). ``'micro'``/``'macro'``: multi-class with ``(N, C)`` scores (arg-max);
    micro pools the counts of all classes, macro averages the per-class F1.
    """

    def __init__(self, name: str = "f1", output_names=None, label_names=None, average: str = "binary",
                 threshold: float = 0.5):
        if average not in ("binary", "micro", "macro"):
            raise ValueError(f"F1: average must be 'binary', 'micro' or 'macro', got {average!r}")
        self.average, self.threshold = average, threshold
        super().__init__(name, output_names, label_names, average=average, threshold=threshold)

    def reset(self):
        super().reset()
        self._counts = None  # (3, classes): true positives, false positives, false negatives

    def update(self, labels, preds):
        for label, pred in _pairs(labels, preds):
            label = label.astype(np.int64)
            if self.average == "binary":
                if label.size and (label.min() < 0 or label.max() > 1):
                    raise ValueError("F1: binary labels must be 0 or 1")
                if pred.shape != label.shape:
                    if pred.shape[-1] != 2:
                        raise ValueError(f"F1: binary predictions must match the labels' shape {label.shape} or "
                                         f"be (N, 2) scores, got {pred.shape}")
                    pred = pred.reshape(-1, 2)[:, 1]
                predicted = (pred.ravel() > self.threshold)[:, None]
                actual = (label.ravel() == 1)[:, None]
            else:
                classes = pred.shape[-1]
                eye = np.eye(classes, dtype=bool)
                predicted, actual = eye[pred.reshape(-1, classes).argmax(axis=1)], eye[label.ravel()]
            counts = np.stack([(predicted & actual).sum(0), (predicted & ~actual).sum(0),
                               (~predicted & actual).sum(0)]).astype(np.float64)
            if self._counts is not None and self._counts.shape != counts.shape:
                raise ValueError(f"F1: number of classes changed from {self._counts.shape[1]} to {counts.shape[1]}")
            self._counts = counts if self._counts is None else self._counts + counts
            self.num_inst += label.size
        tp, fp, fn = self._counts.sum(axis=1, keepdims=True) if self.average == "micro" else self._counts
        f1 = 2 * tp / np.maximum(2 * tp + fp + fn, 1e-12)
        self.sum_metric = float(f1.mean()) * self.num_inst


@register
class MAE(EvalMetric):
    """Mean absolute error: per-sample mean of ``|label - pred|``, averaged over samples."""

    _power = 1

    def __init__(self, name: str = "mae", output_names=None, label_names=None):
        super().__init__(name, output_names, label_names)

    def update(self, labels, preds):
        for label, pred in _pairs(labels, preds):
            samples = label.shape[0] if label.ndim else 1
            error = np.abs(label.astype(np.float64).reshape(samples, -1) - pred.reshape(samples, -1))
            self.sum_metric += float((error ** self._power).mean(axis=1).sum())
            self.num_inst += samples


@register
class MSE(MAE):
    """Mean squared error: per-sample mean of ``(label - pred)**2``, averaged over samples."""

    _power = 2

    def __init__(self, name: str = "mse", output_names=None, label_names=None):
        super().__init__(name, output_names, label_names)


@register
class RMSE(MSE):
    """Square root of :class:`MSE` (of the whole accumulation)."""

    def __init__(self, name: str = "rmse", output_names=None, label_names=None):
        super().__init__(name, output_names, label_names)

    def get(self):
        name, value = super().get()
        return name, math.sqrt(value)


@_alias("ce", "cross-entropy")
class CrossEntropy(EvalMetric):
    """Mean of ``-log(max(p[label], eps))`` over all labels, where ``p`` are the predicted
    probabilities over ``axis`` (softmax of ``preds`` with ``from_logits``). Labels equal to
    ``ignore_label`` are not counted."""

    def __init__(self, eps: float = 1e-12, ignore_label: int | None = None, axis: int = -1,
                 from_logits: bool = False, name: str = "cross-entropy", output_names=None, label_names=None):
        super().__init__(name, output_names, label_names)
        self.eps, self.ignore_label, self.axis, self.from_logits = eps, ignore_label, axis, from_logits

    def update(self, labels, preds):
        for label, pred in _pairs(labels, preds):
            pred = np.moveaxis(pred.astype(np.float64), self.axis, -1)
            if label.size * pred.shape[-1] != pred.size:
                raise ValueError(f"{type(self).__name__}: labels of shape {label.shape} do not match predictions "
                                 f"of shape {pred.shape} (one label per distribution)")
            pred = pred.reshape(-1, pred.shape[-1])
            if self.from_logits:
                pred = np.exp(pred - pred.max(axis=1, keepdims=True))
                pred /= pred.sum(axis=1, keepdims=True)
            label = label.astype(np.int64).ravel()
            keep = np.ones(label.shape, bool) if self.ignore_label is None else label != self.ignore_label
            picked = pred[np.arange(label.size)[keep], label[keep]]
            self.sum_metric += float(-np.log(np.maximum(picked, self.eps)).sum())
            self.num_inst += int(keep.sum())


@register
class Perplexity(CrossEntropy):
    """``exp`` of :class:`CrossEntropy`."""

    def __init__(self, eps: float = 1e-12, ignore_label: int | None = None, axis: int = -1,
                 from_logits: bool = False, name: str = "perplexity", output_names=None, label_names=None):
        super().__init__(eps, ignore_label, axis, from_logits, name, output_names, label_names)

    def get(self):
        name, value = super().get()
        return name, math.exp(value)


@register
class Loss(EvalMetric):
    """Mean of loss values: ``update(_, losses)`` averages every element of ``losses``."""

    _defers = True

    def __init__(self, name: str = "loss", output_names=None, label_names=None):
        super().__init__(name, output_names, label_names)

    def _hold(self, labels: Any, preds: Any) -> bool:
        return super()._hold([], preds)  # labels are ignored: any value

    def _check(self, labels: list, preds: list) -> None:
        pass

    def update(self, _, preds):
        for pred in _as_list(preds):
            self.sum_metric += float(pred.sum())
            self.num_inst += pred.size


@register
class CustomMetric(EvalMetric):
    """Wraps ``feval(label, pred)`` on NumPy arrays, returning a value or ``(sum, count)``."""

    def __init__(self, feval: Callable, name: str | None = None, output_names=None, label_names=None):
        if name is None:
            name = feval.__name__
            name = f"custom({name})" if "<" in name else name
        super().__init__(name, output_names, label_names)
        self._feval = feval

    def update(self, labels, preds):
        for label, pred in _pairs(labels, preds):
            result = self._feval(label, pred)
            total, count = result if isinstance(result, tuple) else (result, 1)
            self.sum_metric += float(total)
            self.num_inst += count


def create(metric: Any, *args: Any, **kwargs: Any) -> EvalMetric:
    """An EvalMetric from a name (``'acc'``, ``'f1'``, ``'rmse'``, ...), an instance (returned
    as is), a list (a :class:`CompositeEvalMetric`) or a function ``feval(label, pred)``.

    Raises:
        ValueError: unknown name. TypeError: anything else.
    """
    if isinstance(metric, EvalMetric):
        return metric
    if isinstance(metric, (list, tuple)):
        return CompositeEvalMetric([create(m, *args, **kwargs) for m in metric])
    if isinstance(metric, str):
        cls = _REGISTRY.get(metric.lower())
        if cls is None:
            raise ValueError(f"unknown metric {metric!r}; available: {sorted(_REGISTRY)}")
        return cls(*args, **kwargs)
    if callable(metric):
        return CustomMetric(metric, *args, **kwargs)
    raise TypeError(f"metric must be a name, an EvalMetric, a list or a function, got {type(metric).__name__}")
