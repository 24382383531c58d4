"""Losses. Like Gluon's, most return one value per sample (mean over all non-batch axes;
KLDivLoss sums, PoissonNLLLoss returns one batch mean, CosineEmbeddingLoss gives ``(N, 1)``, as
in MXNet 1.9.1) and accept a scalar ``weight`` and a broadcastable ``sample_weight``."""
from __future__ import annotations

import math
from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np

from .block import HybridBlock
from .errors import ShapeError
from .graph import layer_ops, precision

__all__ = ["Loss", "check_label_values", "L2Loss", "L1Loss", "SoftmaxCrossEntropyLoss", "SoftmaxCELoss",
           "SigmoidBinaryCrossEntropyLoss", "SigmoidBCELoss", "KLDivLoss", "HuberLoss", "HingeLoss",
           "SquaredHingeLoss", "LogisticLoss", "TripletLoss", "PoissonNLLLoss", "CosineEmbeddingLoss", "SDMLLoss",
           "CTCLoss"]


class _LabelValueChecks:
    """Whether hybridized losses check their labels' values (a debug mode; see :func:`check_label_values`)."""

    enabled = False


def check_label_values(enabled: bool = True) -> None:
    """Debug mode: hybridized losses also check the values of their labels before each call (class
    indices in range, CTC lengths, ``+-1`` pairs), at the cost of reading the labels on the host.
    Losses that are not hybridized always check labels given as concrete arrays."""
    _LabelValueChecks.enabled = bool(enabled)


_LABEL_KINDS: dict = {}  # dtype -> "integer", "real" or None (a check per call costs 0.8 us, the lookup 0.05 us)


def _label_kind(dtype: Any) -> str | None:
    """Whether labels of ``dtype`` hold integers, other real numbers (floating, bool) or neither."""
    kind = _LABEL_KINDS.get(dtype, False)
    if kind is False:
        kind = ("integer" if jnp.issubdtype(dtype, jnp.integer) else
                "real" if jnp.issubdtype(dtype, jnp.floating) or jnp.issubdtype(dtype, jnp.bool_) else None)
        _LABEL_KINDS[dtype] = kind
    return kind


class Loss(HybridBlock):
    """Base class: ``weight`` scales the loss, ``batch_axis`` is kept by the final mean.

    A loss with labels names the position of the label among its inputs (``_label_input``) and
    checks their values in :meth:`_check_label_values`, eagerly, on concrete labels."""

    _label_input: int | None = None

    def __init__(self, weight: float | None = None, batch_axis: int = 0):
        super().__init__()
        self._weight = weight
        self._batch_axis = batch_axis

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        at = self._label_input
        if at is not None and len(args) > at:
            label = args[at]
            if not (hasattr(label, "shape") and hasattr(label, "dtype")) or isinstance(label, (str, bytes)):
                raise TypeError(f"{type(self).__name__}: the label (input {at}) must be an array (NumPy or JAX), "
                                f"got {type(label).__name__}")
            if _label_kind(label.dtype) is None:
                raise TypeError(f"{type(self).__name__}: the label (input {at}) must hold real numbers, got dtype "
                                f"{label.dtype}")
            if (not self._active or _LabelValueChecks.enabled) and not isinstance(label, jax.core.Tracer):
                self._check_label_values(np.asarray(label), args)
        if precision.current() is not None:  # mixed precision: losses are computed in float32
            args = tuple(precision.floating_to(args, jnp.float32))
            kwargs = dict(zip(kwargs, precision.floating_to(list(kwargs.values()), jnp.float32)))
        return super().__call__(*args, **kwargs)

    def _check_label_values(self, label: np.ndarray, args: tuple) -> None:
        """Raise ValueError when the label's values are not what the loss is defined for."""

    def _apply_weighting(self, loss, weight: float | None = None, sample_weight: Any = None):
        if sample_weight is not None:
            loss = loss * sample_weight
        if weight is not None:
            loss = loss * weight
        return loss

    def _batch_mean(self, loss):
        axes = tuple(i for i in range(loss.ndim) if i != self._batch_axis % max(loss.ndim, 1))
        return jnp.mean(loss, axis=axes) if axes else loss

    def _label_like(self, label, pred):
        if label.size != pred.size:
            raise ShapeError(f"label of shape {label.shape} does not match prediction of shape {pred.shape}")
        return label.reshape(pred.shape).astype(pred.dtype)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(batch_axis={self._batch_axis}, w={self._weight})"


class L2Loss(Loss):
    """``weight / 2 * (label - pred)**2``, averaged per sample."""

    _label_input = 1

    def __init__(self, weight: float = 1.0, batch_axis: int = 0):
        super().__init__(weight, batch_axis)

    def forward(self, pred, label, sample_weight=None):
        label = self._label_like(label, pred)
        loss = jnp.square(label - pred)
        loss = self._apply_weighting(loss, None if self._weight is None else self._weight / 2, sample_weight)
        return self._batch_mean(loss)


class L1Loss(Loss):
    """``|label - pred|``, averaged per sample."""

    _label_input = 1

    def forward(self, pred, label, sample_weight=None):
        label = self._label_like(label, pred)
        loss = self._apply_weighting(jnp.abs(label - pred), self._weight, sample_weight)
        return self._batch_mean(loss)


class SoftmaxCrossEntropyLoss(Loss):
    """Cross-entropy of ``softmax(pred)`` (or ``pred`` as log-probabilities with ``from_logits``).

    With ``sparse_label`` the label holds class indices of shape ``pred.shape`` without
    ``axis``; otherwise a distribution of ``pred``'s shape.
    """

    _label_input = 1

    def __init__(self, axis: int = -1, sparse_label: bool = True, from_logits: bool = False,
                 weight: float | None = None, batch_axis: int = 0):
        super().__init__(weight, batch_axis)
        self._axis, self._sparse_label, self._from_logits = axis, sparse_label, from_logits

    def forward(self, pred, label, sample_weight=None):
        axis = self._axis % pred.ndim
        log_prob = pred if self._from_logits else layer_ops.log_softmax(pred, axis=axis)
        if self._sparse_label:
            expected = pred.shape[:axis] + pred.shape[axis + 1:]
            if label.size != math.prod(expected):
                raise ShapeError(f"sparse label of shape {label.shape} does not match prediction {pred.shape} "
                                 f"(expected {expected}: class indices)")
            loss = jnp.expand_dims(-layer_ops.pick(log_prob, label.reshape(expected), axis=axis), axis)
        else:
            loss = -jnp.sum(log_prob * self._label_like(label, pred), axis=axis, keepdims=True)
        loss = self._apply_weighting(loss, self._weight, sample_weight)
        return self._batch_mean(loss)


    def _check_label_values(self, label: np.ndarray, args: tuple) -> None:
        if not self._sparse_label or not hasattr(args[0], "shape"):
            return
        classes = args[0].shape[self._axis]
        _check_class_indices(self, label, 0, classes, lambda: f"the {classes} classes of pred's axis {self._axis}")


SoftmaxCELoss = SoftmaxCrossEntropyLoss


def _check_class_indices(loss: Loss, label: np.ndarray, low: int, high: int, what: Callable[[], str]) -> None:
    """Labels must be integers (of any dtype) in ``[low, high)``; ``what()`` names the range in the error."""
    if label.size == 0:
        return
    if _label_kind(label.dtype) != "integer":
        label = label.astype(np.float64)
        if not np.isfinite(label).all() or (label != np.round(label)).any():
            bad = label[~np.isfinite(label) | (label != np.round(label))].flat[0]
            raise ValueError(f"{type(loss).__name__}: labels must be class indices (whole numbers), got {bad}")
    smallest, largest = label.min(), label.max()
    if smallest < low or largest >= high:
        bad = smallest if smallest < low else largest
        raise ValueError(f"{type(loss).__name__}: label {bad:g} is outside {what()} (expected {low} to {high - 1})")


class SigmoidBinaryCrossEntropyLoss(Loss):
    """Binary cross-entropy of ``sigmoid(pred)`` (or of ``pred`` itself with ``from_sigmoid``).

    ``pos_weight`` (broadcastable) scales the loss of positive labels.
    """

    _label_input = 1

    def __init__(self, from_sigmoid: bool = False, weight: float | None = None, batch_axis: int = 0):
        super().__init__(weight, batch_axis)
        self._from_sigmoid = from_sigmoid

    def forward(self, pred, label, sample_weight=None, pos_weight=None):
        label = self._label_like(label, pred)
        if not self._from_sigmoid:
            softplus_neg_abs = jax.nn.softplus(-jnp.abs(pred))
            if pos_weight is None:
                loss = jax.nn.relu(pred) - pred * label + softplus_neg_abs
            else:
                log_weight = 1 + (pos_weight - 1) * label
                loss = pred - pred * label + log_weight * (softplus_neg_abs + jax.nn.relu(-pred))
        else:
            eps = 1e-12
            positive = jnp.log(pred + eps) * label
            if pos_weight is not None:
                positive = positive * pos_weight
            loss = -(positive + jnp.log(1.0 - pred + eps) * (1.0 - label))
        loss = self._apply_weighting(loss, self._weight, sample_weight)
        return self._batch_mean(loss)


SigmoidBCELoss = SigmoidBinaryCrossEntropyLoss


class KLDivLoss(Loss):
    """``label * (log(label) - pred)``, SUMMED over all non-batch axes (as in MXNet 1.9.1, so one
    KL divergence per sample); ``pred`` holds log-probabilities (``from_logits=True``) or
    unnormalised scores, log-softmaxed over ``axis`` otherwise."""

    _label_input = 1

    def __init__(self, from_logits: bool = True, axis: int = -1, weight: float | None = None, batch_axis: int = 0):
        super().__init__(weight, batch_axis)
        self._from_logits, self._axis = from_logits, axis

    def forward(self, pred, label, sample_weight=None):
        label = self._label_like(label, pred)
        log_prob = pred if self._from_logits else layer_ops.log_softmax(pred, axis=self._axis % pred.ndim)
        loss = label * (jnp.log(label + 1e-12) - log_prob)
        loss = self._apply_weighting(loss, self._weight, sample_weight)
        axes = tuple(i for i in range(loss.ndim) if i != self._batch_axis % max(loss.ndim, 1))
        return jnp.sum(loss, axis=axes) if axes else loss


class HuberLoss(Loss):
    """Smooth L1: ``0.5 / rho * d**2`` where ``|d| <= rho``, else ``|d| - 0.5 * rho``
    (``d = label - pred``), averaged per sample."""

    _label_input = 1

    def __init__(self, rho: float = 1, weight: float | None = None, batch_axis: int = 0):
        super().__init__(weight, batch_axis)
        if rho <= 0:
            raise ValueError(f"HuberLoss: rho must be positive, got {rho}")
        self._rho = rho

    def forward(self, pred, label, sample_weight=None):
        error = jnp.abs(self._label_like(label, pred) - pred)
        loss = jnp.where(error > self._rho, error - 0.5 * self._rho, (0.5 / self._rho) * jnp.square(error))
        return self._batch_mean(self._apply_weighting(loss, self._weight, sample_weight))


class HingeLoss(Loss):
    """``max(0, margin - pred * label)`` for labels in {-1, 1}, averaged per sample."""

    _label_input = 1

    _power = 1

    def __init__(self, margin: float = 1, weight: float | None = None, batch_axis: int = 0):
        super().__init__(weight, batch_axis)
        self._margin = margin

    def forward(self, pred, label, sample_weight=None):
        loss = jax.nn.relu(self._margin - pred * self._label_like(label, pred)) ** self._power
        return self._batch_mean(self._apply_weighting(loss, self._weight, sample_weight))


class SquaredHingeLoss(HingeLoss):
    """``max(0, margin - pred * label) ** 2`` for labels in {-1, 1}, averaged per sample."""

    _power = 2


class LogisticLoss(Loss):
    """``log(1 + exp(-pred * label))`` for labels in {-1, 1} (``label_format='signed'``) or
    {0, 1} (``'binary'``), computed stably, averaged per sample.

    Raises:
        ValueError: unknown ``label_format``.
    """

    _label_input = 1

    def __init__(self, weight: float | None = None, batch_axis: int = 0, label_format: str = "signed"):
        super().__init__(weight, batch_axis)
        if label_format not in ("signed", "binary"):
            raise ValueError(f"LogisticLoss: label_format must be 'signed' or 'binary', got {label_format!r}")
        self._label_format = label_format

    def forward(self, pred, label, sample_weight=None):
        label = self._label_like(label, pred)
        if self._label_format == "signed":
            label = (label + 1.0) / 2.0
        loss = jax.nn.relu(pred) - pred * label + jax.nn.softplus(-jnp.abs(pred))
        return self._batch_mean(self._apply_weighting(loss, self._weight, sample_weight))


class TripletLoss(Loss):
    """``max(0, ||positive - pred||**2 - ||negative - pred||**2 + margin)`` with the squared
    distances summed over all non-batch axes; one value per sample."""

    def __init__(self, margin: float = 1, weight: float | None = None, batch_axis: int = 0):
        super().__init__(weight, batch_axis)
        self._margin = margin

    def forward(self, pred, positive, negative, sample_weight=None):
        positive, negative = self._label_like(positive, pred), self._label_like(negative, pred)
        gap = jnp.square(positive - pred) - jnp.square(negative - pred)
        axes = tuple(i for i in range(pred.ndim) if i != self._batch_axis % pred.ndim)
        loss = jax.nn.relu(jnp.sum(gap, axis=axes) + self._margin)
        return self._apply_weighting(loss, self._weight, sample_weight)


class PoissonNLLLoss(Loss):
    """Poisson negative log-likelihood of ``target``, averaged over ALL elements (batch included)
    into one value of shape ``(1,)``, as in MXNet 1.9.1:
    ``exp(pred) - target * pred`` (``from_logits``, pred = log rate) or
    ``pred - target * log(pred + epsilon)``; ``compute_full`` adds Stirling's term
    ``target * log(target) - target + 0.5 * log(2 * pi * target)`` where ``target > 1``."""

    _label_input = 1

    def __init__(self, weight: float | None = None, from_logits: bool = True, batch_axis: int = 0,
                 compute_full: bool = False):
        super().__init__(weight, batch_axis)
        self._from_logits, self._compute_full = from_logits, compute_full

    def forward(self, pred, target, sample_weight=None, epsilon: float = 1e-08):
        target = self._label_like(target, pred)
        if self._from_logits:
            loss = jnp.exp(pred) - target * pred
        else:
            loss = pred - target * jnp.log(pred + epsilon)
        if self._compute_full:
            safe = jnp.where(target > 1, target, 1.0)
            stirling = safe * jnp.log(safe) - safe + 0.5 * jnp.log(2 * math.pi * safe)
            loss = loss + jnp.where(target > 1, stirling, 0.0)
        loss = self._apply_weighting(loss, self._weight, sample_weight)
        return jnp.reshape(jnp.mean(loss), (1,))


class CosineEmbeddingLoss(Loss):
    """With ``cos`` the cosine similarity of ``input1`` and ``input2`` along the last axis:
    ``1 - cos`` where ``label == 1``, ``max(0, cos - margin)`` where ``label == -1``;
    ``label`` has one entry per sample. Returns shape ``(N, 1)`` like MXNet 1.9.1
    (``sample_weight`` must broadcast to ``(N, 1)``)."""

    _label_input = 2

    def __init__(self, weight: float | None = None, batch_axis: int = 0, margin: float = 0):
        super().__init__(weight, batch_axis)
        self._margin = margin

    def forward(self, input1, input2, label, sample_weight=None):
        input1 = self._label_like(input1, input2)
        dot = jnp.sum(input1 * input2, axis=-1)
        norms = jnp.linalg.norm(input1, axis=-1) * jnp.linalg.norm(input2, axis=-1)
        cos = jnp.reshape(dot / jnp.maximum(norms, 1e-12), (-1, 1))
        if math.prod(jnp.shape(label)) != cos.shape[0]:
            raise ShapeError(f"CosineEmbeddingLoss: label must hold one entry per sample, shape ({cos.shape[0]},) "
                             f"for inputs of shape {jnp.shape(input2)}; got a label of shape {jnp.shape(label)}")
        label = jnp.reshape(label, (-1, 1))
        loss = jnp.where(label == 1, 1 - cos, jnp.where(label == -1, jax.nn.relu(cos - self._margin), 0.0))
        return self._apply_weighting(loss, self._weight, sample_weight)

    def _check_label_values(self, label: np.ndarray, args: tuple) -> None:
        if not np.isin(label, (1, -1)).all():
            bad = label[~np.isin(label, (1, -1))].flat[0]
            raise ValueError(f"CosineEmbeddingLoss: labels must be 1 (similar) or -1 (dissimilar), got {bad}")


class SDMLLoss(Loss):
    """Smoothed Deep Metric Learning loss (Bonadiman et al. 2019, arXiv:1905.12786), as MXNet 1.9.1's.

    ``x1`` and ``x2`` are ``(batch, dim)`` minibatches whose rows are aligned pairs (``x1[i]``
    matches ``x2[i]``; every other row is a negative). With ``d[i, j] = ||x1[i] - x2[j]||**2``,
    the loss of row ``i`` is the KL divergence (summed over ``j``) between the smoothed identity
    labels ``1 - smoothing_parameter`` on the diagonal, ``smoothing_parameter / (batch - 1)``
    elsewhere, and ``log_softmax(-d[i], axis=1)``. Returns shape ``(batch,)``, scaled by ``weight``
    (MXNet accepts ``weight`` but never applies it; the default 1.0 gives the same result).
    """

    def __init__(self, smoothing_parameter: float = 0.3, weight: float | None = 1.0, batch_axis: int = 0):
        super().__init__(weight, batch_axis)
        self.smoothing_parameter = smoothing_parameter

    def forward(self, x1, x2):
        if x1.shape != x2.shape or x1.ndim != 2:
            raise ShapeError(f"SDMLLoss: x1 and x2 must both be (batch, dim), got {x1.shape} and {x2.shape}")
        batch = x1.shape[0]
        distances = jnp.sum(jnp.square(x1[:, None, :] - x2[None, :, :]), axis=2)
        log_prob = layer_ops.log_softmax(-distances, axis=1)
        gold = jnp.eye(batch, dtype=log_prob.dtype)
        off = self.smoothing_parameter / (batch - 1) if batch > 1 else 0.0
        labels = gold * (1 - self.smoothing_parameter) + (1 - gold) * off
        loss = jnp.sum(labels * (jnp.log(labels + 1e-12) - log_prob), axis=1)
        return self._apply_weighting(loss, self._weight)


class CTCLoss(Loss):
    """Connectionist temporal classification: ``-log p(label | pred)`` summed over alignments.

    ``pred``: unnormalised scores, ``(N, T, C)`` for ``layout='NTC'`` or ``(T, N, C)`` for
    ``'TNC'``; the last class ``C - 1`` is the blank. ``label``: class indices ``(N, L)``
    (``label_layout='NT'``) or ``(L, N)`` (``'TN'``), padded with ``-1``. ``pred_lengths`` and
    ``label_lengths`` (``(N,)`` ints) default to ``T`` and to the count before the first ``-1``.
    Returns ``(N,)``; ``inf`` (with zero gradient) where no alignment fits in ``pred_lengths``.

    Raises:
        ValueError: unknown layout. ShapeError: ``pred``/``label`` batch sizes differ.
    """

    _label_input = 1

    def __init__(self, layout: str = "NTC", label_layout: str = "NT", weight: float | None = None):
        if layout not in ("NTC", "TNC"):
            raise ValueError(f"CTCLoss: layout must be 'NTC' or 'TNC', got {layout!r}")
        if label_layout not in ("NT", "TN"):
            raise ValueError(f"CTCLoss: label_layout must be 'NT' or 'TN', got {label_layout!r}")
        super().__init__(weight, label_layout.find("N"))
        self._layout, self._label_layout = layout, label_layout

    def forward(self, pred, label, pred_lengths=None, label_lengths=None, sample_weight=None):
        if self._layout == "NTC":
            pred = jnp.swapaxes(pred, 0, 1)
        if self._label_layout == "TN":
            label = jnp.swapaxes(label, 0, 1)
        batch = pred.shape[1]
        if label.ndim != 2 or label.shape[0] != batch:
            raise ShapeError(f"CTCLoss: label of shape {label.shape} does not match prediction with batch size "
                             f"{batch} (expected ({batch}, label_length) in layout NT)")
        loss = ctc_negative_log_likelihood(pred, label, pred_lengths, label_lengths)
        if sample_weight is not None:
            sample_weight = jnp.reshape(sample_weight, (batch,))
        return self._apply_weighting(loss, self._weight, sample_weight)

    def _check_label_values(self, label: np.ndarray, args: tuple) -> None:
        pred = args[0]
        if not hasattr(pred, "shape") or len(pred.shape) != 3:
            return
        classes, steps = pred.shape[2], pred.shape[self._layout.find("T")]
        label_length = label.shape[self._label_layout.find("T")] if label.ndim == 2 else None
        given = args[3] if len(args) > 3 else None
        if given is not None and label_length is not None and not isinstance(given, jax.core.Tracer):
            # only the first label_lengths[i] entries of each label are classes; the rest is padding
            rows = label if self._label_layout == "NT" else label.T
            lengths = np.clip(np.asarray(given).reshape(-1), 0, label_length)
            if lengths.shape[0] == rows.shape[0]:
                label = rows[np.arange(label_length)[None, :] < lengths[:, None]]
        _check_class_indices(self, label, -1, classes - 1,
                             lambda: f"the {classes - 1} classes before the blank {classes - 1} (-1 pads)")
        for name, at, limit in (("pred_lengths", 2, steps), ("label_lengths", 3, label_length)):
            lengths = args[at] if len(args) > at else None
            if lengths is None or limit is None or isinstance(lengths, jax.core.Tracer):
                continue
            lengths = np.asarray(lengths)
            if lengths.size and (lengths.min() < 0 or lengths.max() > limit):
                raise ValueError(f"CTCLoss: {name} must lie in [0, {limit}], got values from {lengths.min()} to "
                                 f"{lengths.max()}")


_IMPOSSIBLE = -1e30  # finite stand-in for log(0): keeps gradients of unreachable states at 0, not NaN


@jax.jit
def ctc_negative_log_likelihood(scores, label, pred_lengths=None, label_lengths=None):
    """CTC forward algorithm in log space with ``lax.scan`` over time.

    Args: scores ``(T, N, C)`` before softmax, blank ``C - 1``; label ``(N, L)`` padded with
    ``-1``; pred_lengths, label_lengths ``(N,)`` ints or None (``T``; count before the first
    ``-1``). Returns ``(N,)``.
    """
    log_probs = jax.nn.log_softmax(scores, axis=-1)
    label = label.astype(jnp.int32)
    if label_lengths is None:
        padded = label < 0
        label_lengths = jnp.where(padded.any(axis=1), jnp.argmax(padded, axis=1), label.shape[1])
    label_lengths = jnp.asarray(label_lengths, jnp.int32)
    pred_lengths = jnp.full(label.shape[:1], scores.shape[0], jnp.int32) if pred_lengths is None else \
        jnp.asarray(pred_lengths, jnp.int32)
    steps, batch, classes = log_probs.shape
    blank = classes - 1
    # extended label: blank, l1, blank, l2, ..., blank (length 2L + 1)
    extended = jnp.full((batch, 2 * label.shape[1] + 1), blank, jnp.int32)
    extended = extended.at[:, 1::2].set(jnp.where(label < 0, blank, label))
    positions = extended.shape[1]
    # a non-blank state may skip the blank before it when its label differs from the previous label
    skip = (extended != blank) & (extended != jnp.roll(extended, 2, axis=1))
    skip = skip.at[:, :2].set(False)

    def emit(t):
        return jnp.take_along_axis(log_probs[t], extended, axis=1)

    alpha = jnp.full((batch, positions), _IMPOSSIBLE, log_probs.dtype)
    alpha = alpha.at[:, :2].set(emit(0)[:, :2])

    def step(alpha, t):
        shifted1 = jnp.pad(alpha[:, :-1], ((0, 0), (1, 0)), constant_values=_IMPOSSIBLE)
        shifted2 = jnp.pad(alpha[:, :-2], ((0, 0), (2, 0)), constant_values=_IMPOSSIBLE)
        merged = jnp.logaddexp(alpha, shifted1)
        merged = jnp.where(skip, jnp.logaddexp(merged, shifted2), merged)
        updated = jnp.maximum(merged + emit(t), _IMPOSSIBLE)
        return jnp.where((t < pred_lengths)[:, None], updated, alpha), None

    alpha, _ = jax.lax.scan(step, alpha, jnp.arange(1, steps))
    last = jnp.take_along_axis(alpha, (2 * label_lengths)[:, None], axis=1)[:, 0]
    before_last = jnp.take_along_axis(alpha, jnp.maximum(2 * label_lengths - 1, 0)[:, None], axis=1)[:, 0]
    before_last = jnp.where(label_lengths > 0, before_last, _IMPOSSIBLE)
    log_likelihood = jnp.logaddexp(last, before_last)
    return jnp.where(log_likelihood < _IMPOSSIBLE / 2, jnp.inf, -log_likelihood)
