"""``mxnet.contrib.text.vocab``: ``Vocabulary``, the indexing of text tokens."""
from __future__ import annotations

import collections
from typing import Any, Sequence

__all__ = ["Vocabulary"]


class Vocabulary:
    """Indices for tokens, as MXNet 1.x's: index 0 is ``unknown_token``, then ``reserved_tokens`` in their
    order, then the keys of ``counter`` by falling frequency (equal frequencies in string order), at most
    ``most_freq_count`` of them and only those counted at least ``min_freq`` times.

    Raises ValueError for ``min_freq < 1``, a reserved token that is the unknown token or repeated, and
    TypeError for a ``counter`` that is not a ``collections.Counter``.
    """

    def __init__(self, counter: collections.Counter | None = None, most_freq_count: int | None = None,
                 min_freq: int = 1, unknown_token: Any = "<unk>", reserved_tokens: Sequence[Any] | None = None):
        if min_freq < 1:
            raise ValueError(f"Vocabulary: min_freq must be a positive value, got {min_freq}")
        if reserved_tokens is not None:
            if unknown_token in reserved_tokens:
                raise ValueError(f"Vocabulary: the unknown token {unknown_token!r} cannot be a reserved token")
            if len(set(reserved_tokens)) != len(reserved_tokens):
                raise ValueError(f"Vocabulary: reserved_tokens {list(reserved_tokens)} repeat a token")
        self._unknown_token = unknown_token
        self._reserved_tokens = None if reserved_tokens is None else list(reserved_tokens)
        self._idx_to_token = [unknown_token] + list(reserved_tokens or [])
        self._token_to_idx = {token: i for i, token in enumerate(self._idx_to_token)}
        if counter is not None:
            self._index_counter(counter, most_freq_count, min_freq)

    def _index_counter(self, counter: collections.Counter, most_freq_count: int | None, min_freq: int) -> None:
        if not isinstance(counter, collections.Counter):
            raise TypeError(f"Vocabulary: counter must be a collections.Counter, got {type(counter).__name__}")
        special = set(self._idx_to_token)
        cap = len(special) + (len(counter) if most_freq_count is None else most_freq_count)
        for token, freq in sorted(sorted(counter.items(), key=lambda kv: kv[0]), key=lambda kv: kv[1], reverse=True):
            if freq < min_freq or len(self._idx_to_token) == cap:
                break
            if token not in special:
                self._token_to_idx[token] = len(self._idx_to_token)
                self._idx_to_token.append(token)

    def __len__(self) -> int:
        return len(self._idx_to_token)

    @property
    def token_to_idx(self) -> dict:
        return self._token_to_idx

    @property
    def idx_to_token(self) -> list:
        return self._idx_to_token

    @property
    def unknown_token(self) -> Any:
        return self._unknown_token

    @property
    def reserved_tokens(self) -> list | None:
        return self._reserved_tokens

    def to_indices(self, tokens: Any) -> Any:
        """The index of a token, or the list of indices of a list of tokens (0 for an unknown token)."""
        if not isinstance(tokens, list):
            return self._token_to_idx.get(tokens, 0)
        return [self._token_to_idx.get(token, 0) for token in tokens]

    def to_tokens(self, indices: Any) -> Any:
        """The token of an index, or the tokens of a list of indices. Raises ValueError for an index that
        is not an int in ``range(len(self))``."""
        many = isinstance(indices, list)
        tokens = []
        for index in indices if many else [indices]:
            if not isinstance(index, int) or not 0 <= index < len(self._idx_to_token):
                raise ValueError(f"Token index {index} in the provided `indices` is invalid.")
            tokens.append(self._idx_to_token[index])
        return tokens if many else tokens[0]
