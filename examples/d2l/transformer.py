"""d2l 10.7, the Transformer encoder, with the attention machinery of d2l 10.3, 10.5 and 10.6.

    python examples/d2l/transformer.py

d2l's formulation, ported: ``masked_softmax``, ``DotProductAttention``, ``MultiHeadAttention``
(``transpose_qkv``/``transpose_output``), ``PositionalEncoding``, ``PositionWiseFFN``, ``AddNorm``,
``EncoderBlock`` and ``TransformerEncoder``, which keeps each block's attention weights in
``attention_weights``. hybrid also ships these as layers: :func:`to_nn_encoder_layer` copies an
``EncoderBlock`` into ``nn.TransformerEncoderLayer`` (post-norm, the same computation), whose
``nn.MultiHeadAttention`` takes a boolean ``key_mask`` where d2l takes ``valid_lens``.

The book trains the encoder inside an English-French translation model on a downloaded corpus. This
port trains it on a synthetic sequence classification task instead (:func:`synthetic_majority_data`):
the label of a sequence is its most frequent token among its valid positions, while the padded
positions repeat another token, so the model must respect ``valid_lens``.
"""
from __future__ import annotations

import argparse
import math

import jax
import jax.numpy as jnp
import numpy as np

import hybrid
from hybrid import autograd, data, init, loss as gloss, nn, Trainer


def masked_softmax(X, valid_lens):
    """Softmax over the last axis of ``X`` with the elements past ``valid_lens`` masked out.

    ``X``: 3-D ``(batch, queries, keys)``; ``valid_lens``: ``(batch,)`` or ``(batch, queries)``.
    """
    if valid_lens is None:
        return jax.nn.softmax(X, axis=-1)
    shape = X.shape
    if valid_lens.ndim == 1:
        valid_lens = jnp.repeat(valid_lens, shape[1])
    else:
        valid_lens = valid_lens.reshape(-1)
    # Masked elements on the last axis get a large negative value, so their exponential is 0
    X = X.reshape(-1, shape[-1])
    X = jnp.where(jnp.arange(shape[-1])[None, :] < valid_lens[:, None], X, -1e6)  # npx.sequence_mask
    return jax.nn.softmax(X, axis=-1).reshape(shape)


class DotProductAttention(nn.Block):
    """Scaled dot-product attention; keeps the weights in ``attention_weights``."""

    def __init__(self, dropout: float, **kwargs):
        super().__init__(**kwargs)
        self.dropout = nn.Dropout(dropout)

    # queries (batch, no. of queries, d), keys (batch, no. of key-value pairs, d),
    # values (batch, no. of key-value pairs, value dimension), valid_lens (batch,) or (batch, no. of queries)
    def forward(self, queries, keys, values, valid_lens=None):
        d = queries.shape[-1]
        scores = jnp.matmul(queries, jnp.swapaxes(keys, 1, 2)) / math.sqrt(d)  # npx.batch_dot(transpose_b)
        self.attention_weights = masked_softmax(scores, valid_lens)
        return jnp.matmul(self.dropout(self.attention_weights), values)


def transpose_qkv(X, num_heads: int):
    """(batch, n, num_hiddens) -> (batch * num_heads, n, num_hiddens / num_heads), for parallel heads."""
    X = X.reshape(X.shape[0], X.shape[1], num_heads, -1)
    X = X.transpose(0, 2, 1, 3)
    return X.reshape(-1, X.shape[2], X.shape[3])


def transpose_output(X, num_heads: int):
    """Reverse :func:`transpose_qkv`."""
    X = X.reshape(-1, num_heads, X.shape[1], X.shape[2])
    X = X.transpose(0, 2, 1, 3)
    return X.reshape(X.shape[0], X.shape[1], -1)


class MultiHeadAttention(nn.Block):
    """Multi-head attention (d2l 10.5)."""

    def __init__(self, num_hiddens: int, num_heads: int, dropout: float, use_bias: bool = False, **kwargs):
        super().__init__(**kwargs)
        self.num_heads = num_heads
        self.attention = DotProductAttention(dropout)
        self.W_q = nn.Dense(num_hiddens, use_bias=use_bias, flatten=False)
        self.W_k = nn.Dense(num_hiddens, use_bias=use_bias, flatten=False)
        self.W_v = nn.Dense(num_hiddens, use_bias=use_bias, flatten=False)
        self.W_o = nn.Dense(num_hiddens, use_bias=use_bias, flatten=False)

    def forward(self, queries, keys, values, valid_lens):
        queries = transpose_qkv(self.W_q(queries), self.num_heads)
        keys = transpose_qkv(self.W_k(keys), self.num_heads)
        values = transpose_qkv(self.W_v(values), self.num_heads)
        if valid_lens is not None:
            # Copy each length num_heads times: the heads of one example are consecutive
            valid_lens = jnp.repeat(valid_lens, self.num_heads, axis=0)
        output = self.attention(queries, keys, values, valid_lens)  # (batch * num_heads, no. of queries, d / h)
        output_concat = transpose_output(output, self.num_heads)
        return self.W_o(output_concat)


class PositionalEncoding(nn.Block):
    """Sinusoidal positional encoding added to the input, then dropout."""

    def __init__(self, num_hiddens: int, dropout: float, max_len: int = 1000):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        # A long enough P (a constant, not a parameter), built with NumPy: JAX arrays are immutable
        P = np.zeros((1, max_len, num_hiddens), np.float32)
        X = np.arange(max_len, dtype=np.float32).reshape(-1, 1) / np.power(
            10000, np.arange(0, num_hiddens, 2, dtype=np.float32) / num_hiddens)
        P[:, :, 0::2] = np.sin(X)
        P[:, :, 1::2] = np.cos(X)
        self.P = jnp.asarray(P)

    def forward(self, X):
        X = X + self.P[:, :X.shape[1], :]
        return self.dropout(X)


class PositionWiseFFN(nn.Block):
    """The position-wise feed-forward network."""

    def __init__(self, ffn_num_hiddens: int, ffn_num_outputs: int, **kwargs):
        super().__init__(**kwargs)
        self.dense1 = nn.Dense(ffn_num_hiddens, flatten=False, activation="relu")
        self.dense2 = nn.Dense(ffn_num_outputs, flatten=False)

    def forward(self, X):
        return self.dense2(self.dense1(X))


class AddNorm(nn.Block):
    """Residual connection followed by layer normalization."""

    def __init__(self, dropout: float, **kwargs):
        super().__init__(**kwargs)
        self.dropout = nn.Dropout(dropout)
        self.ln = nn.LayerNorm()

    def forward(self, X, Y):
        return self.ln(self.dropout(Y) + X)


class EncoderBlock(nn.Block):
    """A Transformer encoder block: multi-head self-attention and the FFN, each followed by AddNorm."""

    def __init__(self, num_hiddens: int, ffn_num_hiddens: int, num_heads: int, dropout: float,
                 use_bias: bool = False, **kwargs):
        super().__init__(**kwargs)
        self.attention = MultiHeadAttention(num_hiddens, num_heads, dropout, use_bias)
        self.addnorm1 = AddNorm(dropout)
        self.ffn = PositionWiseFFN(ffn_num_hiddens, num_hiddens)
        self.addnorm2 = AddNorm(dropout)

    def forward(self, X, valid_lens):
        Y = self.addnorm1(X, self.attention(X, X, X, valid_lens))
        return self.addnorm2(Y, self.ffn(Y))


class TransformerEncoder(nn.Block):
    """The Transformer encoder: embedding scaled by sqrt(num_hiddens), positional encoding, and
    ``num_layers`` encoder blocks. (d2l derives it from its ``Encoder`` interface, a plain Block.)"""

    def __init__(self, vocab_size: int, num_hiddens: int, ffn_num_hiddens: int, num_heads: int,
                 num_layers: int, dropout: float, use_bias: bool = False, **kwargs):
        super().__init__(**kwargs)
        self.num_hiddens = num_hiddens
        self.embedding = nn.Embedding(vocab_size, num_hiddens)
        self.pos_encoding = PositionalEncoding(num_hiddens, dropout)
        self.blks = nn.Sequential()
        for _ in range(num_layers):
            self.blks.add(EncoderBlock(num_hiddens, ffn_num_hiddens, num_heads, dropout, use_bias))

    def forward(self, X, valid_lens, *args):
        # The embedding values are multiplied by sqrt(num_hiddens) before the positional encoding is
        # added, since the encoding's values lie in [-1, 1]
        X = self.pos_encoding(self.embedding(X) * math.sqrt(self.num_hiddens))
        self.attention_weights = [None] * len(self.blks)
        for i, blk in enumerate(self.blks):
            X = blk(X, valid_lens)
            self.attention_weights[i] = blk.attention.attention.attention_weights
        return X


def to_nn_encoder_layer(blk: EncoderBlock, dropout: float = 0.0) -> nn.TransformerEncoderLayer:
    """An ``nn.TransformerEncoderLayer`` computing what the initialised ``blk`` computes, with copies of
    its weights (the attention projections of ``blk`` have no biases: those of the layer are zero)."""
    num_hiddens = blk.attention.W_q.weight.shape[0]
    ffn_num_hiddens = blk.ffn.dense1.weight.shape[0]
    layer = nn.TransformerEncoderLayer(num_hiddens, ffn_num_hiddens, blk.attention.num_heads, dropout=dropout)
    layer.initialize()
    pairs = [(layer.attention.query_proj, blk.attention.W_q), (layer.attention.key_proj, blk.attention.W_k),
             (layer.attention.value_proj, blk.attention.W_v), (layer.attention.out_proj, blk.attention.W_o),
             (layer.ffn_1, blk.ffn.dense1), (layer.ffn_2, blk.ffn.dense2)]
    for dst, src in pairs:
        dst.weight.set_data(src.weight.data())
        dst.bias.set_data(src.bias.data() if src.bias is not None else jnp.zeros(dst.bias.shape))
    for dst, src in ((layer.attention_norm, blk.addnorm1.ln), (layer.ffn_norm, blk.addnorm2.ln)):
        dst.gamma.set_data(src.gamma.data())
        dst.beta.set_data(src.beta.data())
    return layer


def synthetic_majority_data(num_examples: int, vocab_size: int = 6, max_len: int = 12, min_len: int = 4,
                            seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Token sequences ``(N, max_len)`` int32, their valid lengths ``(N,)`` and labels ``(N,)``.

    The label is the most frequent token among the first ``valid_len`` positions (drawn so that it is
    unique). The positions past ``valid_len`` repeat one other token, which would often be the most
    frequent one if the padding were not masked.
    """
    rng = np.random.default_rng(seed)
    tokens = np.empty((num_examples, max_len), np.int32)
    valid_lens = rng.integers(min_len, max_len + 1, num_examples).astype(np.int32)
    labels = np.empty(num_examples, np.int32)
    for i, n in enumerate(valid_lens):
        while True:
            seq = rng.integers(0, vocab_size, n)
            counts = np.bincount(seq, minlength=vocab_size)
            if (counts == counts.max()).sum() == 1:
                break
        labels[i] = counts.argmax()
        distractor = rng.choice([t for t in range(vocab_size) if t != labels[i]])
        tokens[i, :n], tokens[i, n:] = seq, distractor
    return tokens, valid_lens, labels


class EncoderClassifier(nn.Block):
    """The Transformer encoder, the mean of its outputs over the valid positions, and a dense layer."""

    def __init__(self, vocab_size: int, num_classes: int, num_hiddens: int, ffn_num_hiddens: int,
                 num_heads: int, num_layers: int, dropout: float, **kwargs):
        super().__init__(**kwargs)
        self.encoder = TransformerEncoder(vocab_size, num_hiddens, ffn_num_hiddens, num_heads, num_layers,
                                          dropout)
        self.output = nn.Dense(num_classes)

    def forward(self, X, valid_lens):
        H = self.encoder(X, valid_lens)
        mask = (jnp.arange(X.shape[1])[None, :] < valid_lens[:, None]).astype(H.dtype)[:, :, None]
        return self.output((H * mask).sum(axis=1) / mask.sum(axis=1))


def evaluate_accuracy(net: EncoderClassifier, data_iter) -> float:
    """Classification accuracy over a dataset of ``(X, valid_lens, y)`` batches."""
    correct, total = 0.0, 0
    for X, valid_lens, y in data_iter:
        correct += float((np.asarray(net(X, valid_lens)).argmax(axis=1) == np.asarray(y)).sum())
        total += y.shape[0]
    return correct / total


def main(num_epochs: int = 10, lr: float = 0.005, batch_size: int = 64, num_hiddens: int = 32,
         ffn_num_hiddens: int = 64, num_heads: int = 4, num_layers: int = 2, dropout: float = 0.1,
         num_train: int = 4096, num_test: int = 1024, vocab_size: int = 6, max_len: int = 12,
         seed: int = 0) -> dict:
    """Train the encoder on the synthetic majority task with Adam; returns the per-epoch training loss
    and test accuracy, and the trained net."""
    hybrid.random.seed(seed)
    # d2l's shape checks: an encoder block and the encoder keep the (batch, steps, num_hiddens) shape
    X, valid_lens = jnp.ones((2, 100, 24)), jnp.array([3, 2])
    blk = EncoderBlock(24, 48, 8, 0.5)
    blk.initialize()
    assert blk(X, valid_lens).shape == (2, 100, 24)
    encoder = TransformerEncoder(200, 24, 48, 8, 2, 0.5)
    encoder.initialize()
    assert encoder(jnp.ones((2, 100), jnp.int32), valid_lens).shape == (2, 100, 24)

    train = data.ArrayDataset(*synthetic_majority_data(num_train, vocab_size, max_len, seed=seed))
    test = data.ArrayDataset(*synthetic_majority_data(num_test, vocab_size, max_len, seed=seed + 1))
    train_iter = data.DataLoader(train, batch_size, shuffle=True, last_batch="discard")
    test_iter = data.DataLoader(test, batch_size)
    net = EncoderClassifier(vocab_size, vocab_size, num_hiddens, ffn_num_hiddens, num_heads, num_layers, dropout)
    net.initialize(init.Xavier())
    loss = gloss.SoftmaxCrossEntropyLoss()
    trainer = Trainer(net.collect_params(), "adam", {"learning_rate": lr})
    history = {"train_loss": [], "test_acc": []}
    for epoch in range(num_epochs):
        total, count = 0.0, 0
        for X, valid_lens, y in train_iter:
            with autograd.record():
                l = loss(net(X, valid_lens), y)
            autograd.backward(l)
            trainer.step(X.shape[0])
            total += float(l.sum())
            count += X.shape[0]
        history["train_loss"].append(total / count)
        history["test_acc"].append(evaluate_accuracy(net, test_iter))
        print(f"epoch {epoch + 1}, loss {history['train_loss'][-1]:.3f}, test acc {history['test_acc'][-1]:.3f}")
    history["net"] = net
    return history


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--lr", type=float, default=0.005)
    args = parser.parse_args()
    main(args.epochs, args.lr)
