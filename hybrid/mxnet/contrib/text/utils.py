"""``mxnet.contrib.text.utils``: counting the tokens of a string."""
from __future__ import annotations

import collections
import re

__all__ = ["count_tokens_from_str"]


def count_tokens_from_str(source_str: str, token_delim: str = " ", seq_delim: str = "\n", to_lower: bool = False,
                          counter_to_update: collections.Counter | None = None) -> collections.Counter:
    """The tokens of ``source_str`` counted, as MXNet counts them: the string is split at every
    ``token_delim`` and ``seq_delim`` (regular expressions), empty pieces are dropped (so a tab or a
    ``\\r`` stays inside a token). Counts are added to ``counter_to_update`` when given, which is
    returned."""
    tokens = [t for t in re.split(token_delim + "|" + seq_delim, source_str) if t]
    if to_lower:
        tokens = [t.lower() for t in tokens]
    if counter_to_update is None:
        return collections.Counter(tokens)
    counter_to_update.update(tokens)
    return counter_to_update
