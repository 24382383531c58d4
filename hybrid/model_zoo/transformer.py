"""A Transformer encoder classifier for token sequences (Vaswani et al., 2017; pooled like BERT or by mean)."""
from __future__ import annotations

from typing import Any

import jax.numpy as jnp

from .. import nn
from ..block import HybridBlock
from ..errors import ShapeError
from ._common import check_classes, no_pretrained

__all__ = ["TokenPositionEmbedding", "TransformerClassifier", "transformer_classifier"]

POOLINGS = ("mean", "first")


class TokenPositionEmbedding(HybridBlock):
    """Token embedding plus a learned position embedding, then dropout.

    Args:
        vocab_size: number of tokens.
        units: embedding size.
        max_length: longest sequence (number of positions).
        dropout: rate, training mode only.
    Input: integer tokens ``(B, T)`` with ``T <= max_length``; output ``(B, T, units)`` float32.
    Children: ``token``, ``position`` (``Embedding``s with weights ``(vocab_size, units)`` and
    ``(max_length, units)``), ``dropout``. Raises ShapeError for other input ranks or longer sequences.
    """

    def __init__(self, vocab_size: int, units: int, max_length: int, dropout: float = 0.0):
        super().__init__()
        self.token = nn.Embedding(vocab_size, units)
        self.position = nn.Embedding(max_length, units)
        self.dropout = nn.Dropout(dropout)
        self._max_length = max_length

    def forward(self, tokens):
        if tokens.ndim != 2 or tokens.shape[1] > self._max_length:
            raise ShapeError(f"expected tokens (B, T) with T <= max_length = {self._max_length}, "
                             f"got shape {tokens.shape}")
        positions = jnp.arange(tokens.shape[1])
        return self.dropout(self.token(tokens) + self.position(positions)[None])


def encoder_stack(who: str, num_layers: int, units: int, hidden_size: int, num_heads: int, dropout: float,
                  activation: str, pre_norm: bool) -> nn.HybridSequential:
    """``num_layers`` :class:`hybrid.nn.TransformerEncoderLayer` s in a HybridSequential (called one by
    one, since they take masks); ValueError naming ``who`` for a bad ``num_layers``."""
    if isinstance(num_layers, bool) or not isinstance(num_layers, int) or num_layers <= 0:
        raise ValueError(f"{who}: num_layers must be a positive integer, got {num_layers!r}")
    stack = nn.HybridSequential()
    for _ in range(num_layers):
        stack.add(nn.TransformerEncoderLayer(units, hidden_size, num_heads, dropout=dropout, activation=activation,
                                             pre_norm=pre_norm))
    return stack


class TransformerClassifier(HybridBlock):
    """Sequence classifier: :class:`TokenPositionEmbedding`, ``num_layers`` Transformer encoder layers,
    pooling over time, and a Dense output.

    Args:
        vocab_size, max_length: see :class:`TokenPositionEmbedding`.
        classes: number of outputs.
        units, hidden_size, num_heads, dropout, activation, pre_norm: of each
            :class:`hybrid.nn.TransformerEncoderLayer`; with ``pre_norm`` a final LayerNorm follows the stack.
        num_layers: encoder layers.
        pooling: ``'mean'`` (mean over the valid positions) or ``'first'`` (the first token's features,
            as BERT's [CLS] token).
    ``forward(tokens, valid_length=None)``: tokens ``(B, T)`` int; ``valid_length`` ``(B,)`` ints: positions
    at and after it are padding, masked out of attention and pooling. Returns ``(B, classes)`` scores.
    Children: ``embedding``, ``encoder``, ``norm`` (pre-norm only), ``output``.
    """

    def __init__(self, vocab_size: int = 10000, classes: int = 2, units: int = 128, hidden_size: int = 512,
                 num_heads: int = 4, num_layers: int = 2, max_length: int = 512, dropout: float = 0.1,
                 activation: str = "relu", pre_norm: bool = False, pooling: str = "mean"):
        super().__init__()
        check_classes("TransformerClassifier", classes)
        if pooling not in POOLINGS:
            raise ValueError(f"TransformerClassifier: pooling must be one of {POOLINGS}, got {pooling!r}")
        self._pooling = pooling
        self.embedding = TokenPositionEmbedding(vocab_size, units, max_length, dropout)
        self.encoder = encoder_stack("TransformerClassifier", num_layers, units, hidden_size, num_heads, dropout,
                                     activation, pre_norm)
        self.norm = nn.LayerNorm(in_channels=units) if pre_norm else None
        self.output = nn.Dense(classes, in_units=units)

    def forward(self, tokens, valid_length=None):
        x = self.embedding(tokens)
        key_mask = None
        if valid_length is not None:
            if valid_length.shape != tokens.shape[:1]:
                raise ShapeError(f"valid_length must have shape (B,) = {tokens.shape[:1]}, "
                                 f"got {valid_length.shape}")
            key_mask = jnp.arange(tokens.shape[1])[None, :] < valid_length[:, None]
        for layer in self.encoder:
            x = layer(x, key_mask=key_mask)
        if self.norm is not None:
            x = self.norm(x)
        if self._pooling == "first":
            pooled = x[:, 0]
        elif key_mask is None:
            pooled = x.mean(axis=1)
        else:
            weights = key_mask.astype(x.dtype)[..., None]
            pooled = (x * weights).sum(axis=1) / jnp.maximum(weights.sum(axis=1), 1.0)
        return self.output(pooled)


def transformer_classifier(pretrained: bool = False, root: Any = None,
                           ctx: Any = None, device: Any = None, **kwargs: Any) -> TransformerClassifier:
    """A :class:`TransformerClassifier` (2 layers of 128 units, 4 heads, vocabulary 10000, 2 classes by
    default). ``pretrained=True`` raises ValueError (no weights are shipped); ``root``, ``ctx`` and
    ``device`` are accepted without effect."""
    no_pretrained("transformer_classifier", pretrained, root, ctx, device)
    return TransformerClassifier(**kwargs)
