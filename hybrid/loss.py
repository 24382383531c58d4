"""Losses. Like Gluon's, each returns one value per sample (mean over all non-batch axes)
and accepts a scalar ``weight`` and a broadcastable ``sample_weight``."""
from __future__ import annotations

import math
from typing import Any

import jax
import jax.numpy as jnp

from .block import HybridBlock
from .errors import ShapeError
from .graph import layer_ops

__all__ = ["Loss", "L2Loss", "L1Loss", "SoftmaxCrossEntropyLoss", "SoftmaxCELoss",
           "SigmoidBinaryCrossEntropyLoss", "SigmoidBCELoss"]


class Loss(HybridBlock):
    """Base class: ``weight`` scales the loss, ``batch_axis`` is kept by the final mean."""

    def __init__(self, weight: float | None = None, batch_axis: int = 0):
        super().__init__()
        self._weight = weight
        self._batch_axis = batch_axis

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

    def __init__(self, weight: float = 1.0, batch_axis: int = 0):
        super().__init__(weight, batch_axis)

    def forward(self, pred, label, sample_weight=None):
        label = self._label_like(label, pred)
        loss = jnp.square(label - pred)
        loss = self._apply_weighting(loss, None if self._weight is None else self._weight / 2, sample_weight)
        return self._batch_mean(loss)


class L1Loss(Loss):
    """``|label - pred|``, averaged per sample."""

    def forward(self, pred, label, sample_weight=None):
        label = self._label_like(label, pred)
        loss = self._apply_weighting(jnp.abs(label - pred), self._weight, sample_weight)
        return self._batch_mean(loss)


class SoftmaxCrossEntropyLoss(Loss):
    """Cross-entropy of ``softmax(pred)`` (or ``pred`` as log-probabilities with ``from_logits``).

    With ``sparse_label`` the label holds class indices of shape ``pred.shape`` without
    ``axis``; otherwise a distribution of ``pred``'s shape.
    """

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


SoftmaxCELoss = SoftmaxCrossEntropyLoss


class SigmoidBinaryCrossEntropyLoss(Loss):
    """Binary cross-entropy of ``sigmoid(pred)`` (or of ``pred`` itself with ``from_sigmoid``).

    ``pos_weight`` (broadcastable) scales the loss of positive labels.
    """

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
