"""A GPT-style causal language model (Radford et al., 2019: pre-norm decoder layers, learned positions,
GELU, a final LayerNorm and an output projection tied to the token embedding)."""
from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from .. import autograd, nn
from .. import random as _random
from ..block import HybridBlock
from ._common import no_pretrained
from .transformer import TokenPositionEmbedding, encoder_stack

__all__ = ["GPTModel", "gpt_small"]


class GPTModel(HybridBlock):
    """Causal Transformer language model.

    Args:
        vocab_size: number of tokens.
        units: model size.
        num_layers: decoder layers (:class:`hybrid.nn.TransformerEncoderLayer` with ``pre_norm=True``,
            tanh-approximated GELU, run with ``causal=True``).
        num_heads: attention heads.
        hidden_size: feed-forward size (default ``4 * units``).
        max_length: longest context (number of learned positions).
        dropout: on embeddings, attention weights and residual branches, training mode only.
        tie_weights: the output projection is the transposed token embedding (no bias), as in GPT-2;
            otherwise a separate ``Dense(vocab_size, use_bias=False)`` named ``output``.
    ``forward(tokens)``: int ``(B, T)`` with ``T <= max_length`` -> next-token scores ``(B, T, vocab_size)``;
    position ``t`` sees tokens ``0..t`` only. Children: ``embedding``, ``decoder``, ``norm``, ``output``
    (untied only). Raises ShapeError for bad token shapes.
    """

    def __init__(self, vocab_size: int = 50257, units: int = 768, num_layers: int = 12, num_heads: int = 12,
                 hidden_size: int | None = None, max_length: int = 1024, dropout: float = 0.1,
                 tie_weights: bool = True):
        super().__init__()
        self._max_length = max_length
        self.embedding = TokenPositionEmbedding(vocab_size, units, max_length, dropout)
        self.decoder = encoder_stack("GPTModel", num_layers, units, hidden_size or 4 * units, num_heads, dropout,
                                     "gelu_tanh", pre_norm=True)
        self.norm = nn.LayerNorm(in_channels=units)
        self.output = None if tie_weights else nn.Dense(vocab_size, use_bias=False, flatten=False, in_units=units)

    @property
    def max_length(self) -> int:
        return self._max_length

    def forward(self, tokens):
        x = self.embedding(tokens)
        for layer in self.decoder:
            x = layer(x, causal=True)
        x = self.norm(x)
        if self.output is not None:
            return self.output(x)
        return jnp.einsum("btc,vc->btv", x, self.embedding.token.weight.data())

    def generate(self, prompt: Any, steps: int, sample: bool = False, temperature: float = 1.0,
                 top_k: int | None = None) -> np.ndarray:
        """Extend ``prompt`` by ``steps`` tokens, one at a time, in predict mode.

        Args:
            prompt: int tokens ``(T,)`` or ``(B, T)``, ``T >= 1``.
            steps: tokens to add.
            sample: draw each token from ``softmax(scores / temperature)`` (restricted to the ``top_k``
                best when given) with keys from :mod:`hybrid.random`; otherwise take the arg-max (greedy).
        The context is the last ``max_length`` tokens, right-padded to a fixed length so that a hybridized
        model compiles once. Returns int32 NumPy tokens ``(T + steps,)`` or ``(B, T + steps)``.
        Raises ValueError for an empty prompt, ``steps < 0`` or ``temperature <= 0``.
        """
        tokens = np.asarray(prompt, np.int32)
        single = tokens.ndim == 1
        tokens = tokens[None] if single else tokens
        if tokens.ndim != 2 or tokens.shape[1] == 0:
            raise ValueError(f"GPTModel.generate: prompt must be (T,) or (B, T) with T >= 1, got {tokens.shape}")
        if isinstance(steps, bool) or not isinstance(steps, int) or steps < 0:
            raise ValueError(f"GPTModel.generate: steps must be a non-negative integer, got {steps!r}")
        if sample and temperature <= 0:
            raise ValueError(f"GPTModel.generate: temperature must be positive, got {temperature!r}")
        window = min(self._max_length, tokens.shape[1] + steps)
        with autograd.pause(train_mode=False):
            for _ in range(steps):
                context = tokens[:, -window:]
                filled = context.shape[1]
                padded = np.zeros((tokens.shape[0], window), np.int32)
                padded[:, :filled] = context
                scores = self(padded)[:, filled - 1]
                tokens = np.concatenate([tokens, self._choose(scores, sample, temperature, top_k)[:, None]], axis=1)
        return tokens[0] if single else tokens

    @staticmethod
    def _choose(scores, sample: bool, temperature: float, top_k: int | None) -> np.ndarray:
        if not sample:
            return np.asarray(jnp.argmax(scores, axis=-1), np.int32)
        scores = scores / temperature
        if top_k is not None and top_k < scores.shape[-1]:
            threshold = jax.lax.top_k(scores, top_k)[0][:, -1:]
            scores = jnp.where(scores < threshold, -jnp.inf, scores)
        return np.asarray(jax.random.categorical(_random.next_key(), scores, axis=-1), np.int32)


def gpt_small(pretrained: bool = False, root: Any = None,
              ctx: Any = None, device: Any = None, **kwargs: Any) -> GPTModel:
    """A :class:`GPTModel` with GPT-2 small's sizes by default (vocabulary 50257, 1024 positions, 12 layers of
    768 units, 12 heads; 124,439,808 parameters); pass smaller ``units``, ``num_layers``, ... to shrink it.
    ``pretrained=True`` raises ValueError (no weights are shipped); ``root``, ``ctx`` and ``device``
    are accepted without effect."""
    no_pretrained("gpt_small", pretrained, root, ctx, device)
    return GPTModel(**kwargs)
