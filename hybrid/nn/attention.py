"""Multi-head attention and a Transformer encoder layer (batch-major ``(B, T, C)`` sequences)."""
from __future__ import annotations

from typing import Any

import jax.numpy as jnp
import numpy as np

from .. import autograd
from .. import random as _random
from ..block import HybridBlock
from ..errors import ShapeError
from ..graph import layer_ops
from .basic_layers import Dense, Dropout, LayerNorm, check_non_negative_int, check_positive_int, check_rate

__all__ = ["MultiHeadAttention", "TransformerEncoderLayer"]


def _attention_mask(mask, key_mask, batch: int, heads: int, t: int, s: int):
    """``mask`` and ``key_mask`` combined into one boolean ``(B, N, T, S)`` mask, or None."""
    full = (batch, heads, t, s)
    combined = None
    if mask is not None:
        mask = jnp.asarray(mask)
        if mask.ndim == 2:
            mask = mask[None, None]
        elif mask.ndim == 3:
            mask = mask[:, None]
        if mask.ndim != 4 or any(m not in (1, f) for m, f in zip(mask.shape, full)):
            raise ShapeError(f"mask must broadcast to (T, S) = {(t, s)}, (B, T, S) = {(batch, t, s)} or "
                             f"(B, num_heads, T, S) = {full}, got shape {tuple(mask.shape)}")
        combined = mask.astype(bool)
    if key_mask is not None:
        key_mask = jnp.asarray(key_mask)
        if key_mask.shape != (batch, s):
            raise ShapeError(f"key_mask must have shape (B, S) = {(batch, s)}, got {tuple(key_mask.shape)}")
        key_mask = key_mask.astype(bool)[:, None, None, :]
        combined = key_mask if combined is None else combined & key_mask
    return None if combined is None else jnp.broadcast_to(combined, full)


class MultiHeadAttention(HybridBlock):
    """Multi-head scaled dot-product attention (Vaswani et al., 2017), batch-major like Keras and
    PyTorch's ``batch_first=True``.

    ``query``, ``key`` and ``value`` are projected to ``units`` features (``num_heads`` heads of
    ``units // num_heads``), attended per head with ``softmax(q k^T / sqrt(head_size))``, and the
    concatenated heads go through an output projection to ``units``.

    Args:
        units: model size; must be divisible by ``num_heads``.
        num_heads: number of heads.
        dropout: dropout rate on the attention weights, in training mode only.
        use_bias: biases in the four projections.
        in_units, key_units, value_units: feature sizes of query, key and value (0: inferred
            at the first call).
        weight_initializer, bias_initializer: for the projections.
    Children: ``query_proj``, ``key_proj``, ``value_proj``, ``out_proj`` (``Dense(units, flatten=False)``;
    weights ``(units, in_features)``).

    ``forward(query, key=None, value=None, mask=None, key_mask=None, causal=False)``:
        query ``(B, T, Cq)``; key ``(B, S, Ck)`` (default: query, i.e. self-attention); value
        ``(B, S, Cv)`` (default: key). ``mask``: boolean, True = may attend (as in Keras and JAX; the
        opposite of PyTorch's boolean masks), of shape ``(T, S)``, ``(B, T, S)`` or ``(B, num_heads,
        T, S)``. ``key_mask``: boolean ``(B, S)``, False marks padding keys. ``causal``: query ``t``
        attends keys ``s <= t`` only. Masks combine with AND; a query with no allowed key gets the
        mean of the values. Returns ``(B, T, units)``. Raises ShapeError for mismatched shapes.
    """

    def __init__(self, units: int, num_heads: int, dropout: float = 0.0, use_bias: bool = True,
                 in_units: int = 0, key_units: int = 0, value_units: int = 0, weight_initializer: Any = None,
                 bias_initializer: Any = "zeros", dtype: Any = "float32"):
        super().__init__()
        name = "MultiHeadAttention"
        self._units = check_positive_int(name, "units", units)
        self._num_heads = check_positive_int(name, "num_heads", num_heads)
        if units % num_heads:
            raise ValueError(f"{name}: units ({units}) must be divisible by num_heads ({num_heads})")
        self._dropout = check_rate(name, "dropout", dropout)
        sizes = {n: check_non_negative_int(name, n, v) for n, v in
                 (("in_units", in_units), ("key_units", key_units), ("value_units", value_units))}
        proj = dict(use_bias=use_bias, flatten=False, dtype=dtype, weight_initializer=weight_initializer,
                    bias_initializer=bias_initializer)
        self.query_proj = Dense(units, in_units=sizes["in_units"], **proj)
        self.key_proj = Dense(units, in_units=sizes["key_units"], **proj)
        self.value_proj = Dense(units, in_units=sizes["value_units"], **proj)
        self.out_proj = Dense(units, in_units=units, **proj)

    def forward(self, query, key=None, value=None, mask=None, key_mask=None, causal: bool = False):
        key = query if key is None else key
        value = key if value is None else value
        shapes = {"query": query.shape, "key": key.shape, "value": value.shape}
        if any(len(s) != 3 for s in shapes.values()) or not query.shape[0] == key.shape[0] == value.shape[0] \
                or key.shape[1] != value.shape[1]:
            raise ShapeError(f"expected query (B, T, Cq), key (B, S, Ck) and value (B, S, Cv), got {shapes}")
        (batch, t, _), s, heads = query.shape, key.shape[1], self._num_heads
        split = lambda y, n: y.reshape(batch, n, heads, self._units // heads)  # noqa: E731
        q = split(self.query_proj(query), t)
        k = split(self.key_proj(key), s)
        v = split(self.value_proj(value), s)
        mask = _attention_mask(mask, key_mask, batch, heads, t, s)
        if autograd.is_training() and self._dropout > 0:
            out = self._attend_with_dropout(q, k, v, mask, bool(causal))
        else:
            out = layer_ops.attention(q, k, v, mask, causal=bool(causal))
        return self.out_proj(out.reshape(batch, t, self._units))

    def _attend_with_dropout(self, q, k, v, mask, causal: bool):
        """Attention with the weights computed explicitly, so that dropout can be applied to them."""
        logits = jnp.einsum("btnh,bsnh->bnts", q, k) / np.sqrt(q.shape[-1]).astype(q.dtype)
        if causal:
            tril = jnp.tril(jnp.ones(logits.shape[-2:], bool))
            mask = tril if mask is None else mask & tril
        if mask is not None:  # the same fill value as jax.nn.dot_product_attention
            logits = jnp.where(mask, logits, -0.7 * jnp.finfo(logits.dtype).max)
        weights = layer_ops.softmax(logits, axis=-1)
        weights = layer_ops.dropout(weights, _random.next_key(), rate=self._dropout)
        return jnp.einsum("bnts,bsnh->btnh", weights, v)

    def __repr__(self) -> str:
        return f"MultiHeadAttention(units={self._units}, num_heads={self._num_heads}, dropout={self._dropout})"


class TransformerEncoderLayer(HybridBlock):
    """One Transformer encoder layer: self-attention then a position-wise feed-forward network, each
    with a residual connection, dropout and layer normalisation (PyTorch's ``TransformerEncoderLayer``
    with ``batch_first=True``).

    Post-norm (default, Vaswani et al.): ``x = norm1(x + drop(attn(x)))``, ``x = norm2(x + drop(ffn(x)))``.
    Pre-norm (``pre_norm=True``): ``x = x + drop(attn(norm1(x)))``, ``x = x + drop(ffn(norm2(x)))``.
    ``ffn(x) = ffn_2(drop(activation(ffn_1(x))))``.

    Args:
        units: model size (input and output features).
        hidden_size: feed-forward hidden size.
        num_heads: attention heads (``units`` must be divisible by it).
        dropout: rate used on the attention weights, after each sub-layer and inside the feed-forward
            network, in training mode.
        activation: the feed-forward activation, any :class:`Activation` name (``'relu'``, ``'gelu'``, ...).
        pre_norm: normalise before each sub-layer instead of after.
        layer_norm_eps: epsilon of the two LayerNorms.
    Children: ``attention``, ``attention_norm``, ``ffn_1``, ``ffn_2``, ``ffn_norm``, ``dropout``.

    ``forward(x, mask=None, key_mask=None, causal=False)``: x ``(B, T, units)``; the masks are those of
    :class:`MultiHeadAttention` (True = attend). Returns ``(B, T, units)``.
    """

    def __init__(self, units: int, hidden_size: int, num_heads: int, dropout: float = 0.1,
                 activation: str = "relu", pre_norm: bool = False, layer_norm_eps: float = 1e-5,
                 use_bias: bool = True, weight_initializer: Any = None, bias_initializer: Any = "zeros",
                 dtype: Any = "float32"):
        super().__init__()
        name = "TransformerEncoderLayer"
        self._units = check_positive_int(name, "units", units)
        hidden_size = check_positive_int(name, "hidden_size", hidden_size)
        rate = check_rate(name, "dropout", dropout)
        self._pre_norm = bool(pre_norm)
        init = dict(use_bias=use_bias, weight_initializer=weight_initializer, bias_initializer=bias_initializer,
                    dtype=dtype)
        self.attention = MultiHeadAttention(units, num_heads, rate, in_units=units, key_units=units,
                                            value_units=units, **init)
        self.attention_norm = LayerNorm(epsilon=layer_norm_eps, in_channels=units, dtype=dtype)
        self.ffn_1 = Dense(hidden_size, activation=activation, flatten=False, in_units=units, **init)
        self.ffn_2 = Dense(units, flatten=False, in_units=hidden_size, **init)
        self.ffn_norm = LayerNorm(epsilon=layer_norm_eps, in_channels=units, dtype=dtype)
        self.dropout = Dropout(rate)

    def forward(self, x, mask=None, key_mask=None, causal: bool = False):
        if x.ndim != 3 or x.shape[-1] != self._units:
            raise ShapeError(f"expected an input (B, T, {self._units}), got shape {x.shape}")
        h = self.attention_norm(x) if self._pre_norm else x
        x = x + self.dropout(self.attention(h, mask=mask, key_mask=key_mask, causal=causal))
        if not self._pre_norm:
            x = self.attention_norm(x)
        h = self.ffn_norm(x) if self._pre_norm else x
        x = x + self.dropout(self.ffn_2(self.dropout(self.ffn_1(h))))
        return x if self._pre_norm else self.ffn_norm(x)

    def __repr__(self) -> str:
        return (f"TransformerEncoderLayer(units={self._units}, num_heads={self.attention._num_heads}, "
                f"pre_norm={self._pre_norm})")
