"""``mxnet.gluon.contrib.data.text``: the WikiText language-modelling datasets, read from local files.

hybrid does not download: the files of Salesforce's archives (``wiki.train.tokens``, ``wiki.valid.tokens``,
``wiki.test.tokens``) must lie in ``root``; their checksums are not verified.
"""
from __future__ import annotations

import os
from typing import Any

import numpy as np

from .....data.dataset import Dataset
from ....contrib.text import utils as _text_utils
from ....contrib.text import vocab as _vocab
from .... import ndarray as _nd

__all__ = ["WikiText2", "WikiText103"]

EOS_TOKEN = "<eos>"
_FILES = {"train": "wiki.train.tokens", "validation": "wiki.valid.tokens", "test": "wiki.test.tokens"}


def _default_root(name: str) -> str:
    home = os.environ.get("MXNET_HOME", os.path.join(os.path.expanduser("~"), ".mxnet"))
    return os.path.join(home, "datasets", name)


class _WikiText(Dataset):
    """Samples ``(data, label)``: rows of ``seq_len`` token indices (int32 ``mx.nd`` arrays), the label the
    data shifted by one token. Lines are split at whitespace, empty lines dropped, and ``<eos>`` ends
    every line; the text is cut to a multiple of ``seq_len``. Without ``vocab``, a
    ``contrib.text.vocab.Vocabulary`` of this segment's tokens is built (``<eos>`` reserved, index 1).

    Raises ValueError for an unknown ``segment``; FileNotFoundError naming the file and the folder when
    the file is not in ``root``.
    """

    _name = ""
    _archive = ""

    def __init__(self, root: str | None = None, segment: str = "train", vocab: Any = None, seq_len: int = 35):
        if segment not in _FILES:
            raise ValueError(f"{type(self).__name__}: segment must be one of {sorted(_FILES)}, got {segment!r}")
        self._root = os.path.expanduser(root if root is not None else _default_root(self._name))
        self._segment, self._seq_len = segment, int(seq_len)
        self._vocab: Any = vocab
        self._counter: Any = None
        path = os.path.join(self._root, _FILES[segment])
        if not os.path.isfile(path):
            raise FileNotFoundError(
                f"{type(self).__name__}: {_FILES[segment]} not found in {self._root!r}. hybrid does not download "
                f"datasets: extract {self._archive} (its {', '.join(_FILES.values())}) into that folder, or "
                "pass root=<folder holding them>")
        data, label = self._read(path)
        usable = len(data) // self._seq_len * self._seq_len
        self._data = _nd.array(data[:usable].reshape(-1, self._seq_len), dtype="int32")
        self._label = _nd.array(label[:usable].reshape(-1, self._seq_len), dtype="int32")

    def _read(self, path: str) -> tuple[np.ndarray, np.ndarray]:
        with open(path, encoding="utf8") as f:
            content = f.read()
        if self._counter is None:
            self._counter = _text_utils.count_tokens_from_str(content)
        if self._vocab is None:
            self._vocab = _vocab.Vocabulary(counter=self._counter, reserved_tokens=[EOS_TOKEN])
        tokens = [token for line in content.splitlines() if line.split() for token in line.split() + [EOS_TOKEN]]
        indices = np.asarray(self._vocab.to_indices(tokens), dtype=np.int32)
        return indices[:-1], indices[1:]

    @property
    def vocabulary(self) -> Any:
        """The Vocabulary indexing the tokens."""
        return self._vocab

    @property
    def frequencies(self) -> Any:
        """The token counts of this segment's file (a ``collections.Counter``)."""
        return self._counter

    def __getitem__(self, idx: int) -> tuple:
        return self._data[idx], self._label[idx]

    def __len__(self) -> int:
        return len(self._label)


class WikiText2(_WikiText):
    """WikiText-2 (Merity et al.): ``WikiText2(root='$MXNET_HOME/datasets/wikitext-2', segment='train',
    vocab=None, seq_len=35)``, ``segment`` one of ``'train'``, ``'validation'``, ``'test'``."""

    _name = "wikitext-2"
    _archive = "wikitext-2-v1.zip"


class WikiText103(_WikiText):
    """WikiText-103 (Merity et al.): as :class:`WikiText2`, its files in ``$MXNET_HOME/datasets/wikitext-103``."""

    _name = "wikitext-103"
    _archive = "wikitext-103-v1.zip"
