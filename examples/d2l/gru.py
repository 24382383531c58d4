"""d2l 9.1, gated recurrent units (concise implementation): a character-level language model.

    python examples/d2l/gru.py                                 # the built-in text below
    python examples/d2l/gru.py --text timemachine.txt          # The Time Machine, or any text file

The MXNet edition downloads H. G. Wells' *The Time Machine*. This port trains on a few paragraphs
written into the script (``TEXT``) unless a text file is given. The text is preprocessed as in the
book (letters and spaces, lower case) and read as characters; ``RNNModel`` wraps ``rnn.GRU`` with a
one-hot input and a dense output layer, trained by ``train_ch8`` (SGD, gradient clipping, perplexity).
"""
from __future__ import annotations

import argparse
import collections
import math
import random
import re
import time
from typing import Iterator

import jax
import jax.numpy as jnp
import numpy as np

import hybrid
from hybrid import autograd, init, loss as gloss, nn, rnn, Trainer

TEXT = """\
The time traveller sat by the fire and turned a small machine of brass and glass over in his hands.
His friends watched him and did not believe a word of what he said. Time, he told them, is only a
kind of space, and a man who can move up and down and left and right should be able to move along
time as well, forward into the future or back into the past.

The doctor laughed and the young man asked him where he would go if he could travel in time. The
traveller said that he would go forward, far forward, to see what the world would become when all
of us were dust. He wanted to see the cities of the future, the gardens and the great halls, and the
people who would live in them after many thousands of years.

A week later the friends came back to the house and found the traveller gone. They waited for him at
the long table and ate their dinner in silence. When he came in at last his clothes were torn and
dirty, his face was pale, and he walked with a limp. He drank a glass of wine, sat down at the table
and began to tell them the story of his journey into the future.

He had seen the sun race across the sky and the seasons pass like the shadow of a hand. He had seen
the trees grow and fall and the houses rise and crumble. When he stopped the machine he found himself
in a garden under a white sky, among small and gentle people who laughed and played in the sun and
feared the dark. They ate fruit, they slept together in the great halls, and they did not work.

At night he saw other creatures, pale and quick, that lived under the ground and came up to the
surface in the dark. The gentle people feared them. The traveller came to understand that the world
had divided into two kinds of people, those who lived in the light and those who lived below, and
that the old order of master and servant had turned over in the long years of time.
"""


def read_text(path: str | None = None) -> list[str]:
    """The lines of the text (``TEXT``, or the file at ``path``), with everything but letters replaced
    by spaces and lower-cased, as d2l's ``read_time_machine``."""
    if path is None:
        lines = TEXT.splitlines()
    else:
        with open(path, encoding="utf-8") as f:
            lines = f.readlines()
    return [re.sub("[^A-Za-z]+", " ", line).strip().lower() for line in lines]


def tokenize(lines: list[str], token: str = "char") -> list[list[str]]:
    """Split lines into word or character tokens."""
    if token == "word":
        return [line.split() for line in lines]
    if token == "char":
        return [list(line) for line in lines]
    raise ValueError(f"unknown token type: {token}")


def count_corpus(tokens: list) -> collections.Counter:
    """Token frequencies; ``tokens`` is a list of tokens or a list of lists of tokens."""
    if len(tokens) == 0 or isinstance(tokens[0], list):
        tokens = [token for line in tokens for token in line]
    return collections.Counter(tokens)


class Vocab:
    """Vocabulary for text: tokens sorted by frequency, index 0 the unknown token ``<unk>``."""

    def __init__(self, tokens: list | None = None, min_freq: int = 0, reserved_tokens: list | None = None):
        tokens = [] if tokens is None else tokens
        reserved_tokens = [] if reserved_tokens is None else reserved_tokens
        counter = count_corpus(tokens)
        self._token_freqs = sorted(counter.items(), key=lambda x: x[1], reverse=True)
        self.idx_to_token = ["<unk>"] + reserved_tokens
        self.token_to_idx = {token: idx for idx, token in enumerate(self.idx_to_token)}
        for token, freq in self._token_freqs:
            if freq < min_freq:
                break
            if token not in self.token_to_idx:
                self.idx_to_token.append(token)
                self.token_to_idx[token] = len(self.idx_to_token) - 1

    def __len__(self) -> int:
        return len(self.idx_to_token)

    def __getitem__(self, tokens):
        if not isinstance(tokens, (list, tuple)):
            return self.token_to_idx.get(tokens, self.unk)
        return [self.__getitem__(token) for token in tokens]

    def to_tokens(self, indices):
        if not isinstance(indices, (list, tuple)):
            return self.idx_to_token[indices]
        return [self.idx_to_token[index] for index in indices]

    @property
    def unk(self) -> int:
        return 0

    @property
    def token_freqs(self) -> list[tuple[str, int]]:
        return self._token_freqs


def load_corpus(path: str | None = None, max_tokens: int = -1) -> tuple[list[int], Vocab]:
    """Token indices and vocabulary of the character corpus (d2l's ``load_corpus_time_machine``)."""
    lines = read_text(path)
    tokens = tokenize(lines, "char")
    vocab = Vocab(tokens)
    # The text is flattened into one list of characters (lines are not joined by spaces, as in d2l)
    corpus = [vocab[token] for line in tokens for token in line]
    if max_tokens > 0:
        corpus = corpus[:max_tokens]
    return corpus, vocab


def seq_data_iter_random(corpus: list[int], batch_size: int, num_steps: int,
                         rng: random.Random) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """Minibatches of subsequences drawn by random sampling."""
    corpus = corpus[rng.randint(0, num_steps - 1):]  # start with a random offset
    num_subseqs = (len(corpus) - 1) // num_steps
    initial_indices = list(range(0, num_subseqs * num_steps, num_steps))
    rng.shuffle(initial_indices)
    num_batches = num_subseqs // batch_size
    for i in range(0, batch_size * num_batches, batch_size):
        initial_indices_per_batch = initial_indices[i:i + batch_size]
        X = [corpus[j:j + num_steps] for j in initial_indices_per_batch]
        Y = [corpus[j + 1:j + 1 + num_steps] for j in initial_indices_per_batch]
        yield np.array(X, np.int32), np.array(Y, np.int32)


def seq_data_iter_sequential(corpus: list[int], batch_size: int, num_steps: int,
                             rng: random.Random) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """Minibatches of subsequences by sequential partitioning: batch ``i + 1`` continues batch ``i``."""
    offset = rng.randint(0, num_steps)
    num_tokens = ((len(corpus) - offset - 1) // batch_size) * batch_size
    Xs = np.array(corpus[offset:offset + num_tokens], np.int32).reshape(batch_size, -1)
    Ys = np.array(corpus[offset + 1:offset + 1 + num_tokens], np.int32).reshape(batch_size, -1)
    num_batches = Xs.shape[1] // num_steps
    for i in range(0, num_steps * num_batches, num_steps):
        yield Xs[:, i:i + num_steps], Ys[:, i:i + num_steps]


class SeqDataLoader:
    """An iterator over language-model minibatches ``(X, Y)`` of shape ``(batch_size, num_steps)``."""

    def __init__(self, batch_size: int, num_steps: int, use_random_iter: bool, max_tokens: int,
                 path: str | None = None, seed: int = 0):
        self.data_iter_fn = seq_data_iter_random if use_random_iter else seq_data_iter_sequential
        self.corpus, self.vocab = load_corpus(path, max_tokens)
        self.batch_size, self.num_steps = batch_size, num_steps
        self.rng = random.Random(seed)

    def __iter__(self) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        return self.data_iter_fn(self.corpus, self.batch_size, self.num_steps, self.rng)


def load_data_time_machine(batch_size: int, num_steps: int, use_random_iter: bool = False,
                           max_tokens: int = 10000, path: str | None = None,
                           seed: int = 0) -> tuple[SeqDataLoader, Vocab]:
    """The iterator and the vocabulary of the built-in text, or of the text file at ``path``
    (e.g. The Time Machine, ``timemachine.txt``)."""
    data_iter = SeqDataLoader(batch_size, num_steps, use_random_iter, max_tokens, path, seed)
    return data_iter, data_iter.vocab


class RNNModel(nn.Block):
    """A recurrent layer with one-hot inputs and a dense output layer over the vocabulary."""

    def __init__(self, rnn_layer: rnn.GRU, vocab_size: int, **kwargs):
        super().__init__(**kwargs)
        self.rnn = rnn_layer
        self.vocab_size = vocab_size
        self.dense = nn.Dense(vocab_size)

    def forward(self, inputs, state):
        X = jax.nn.one_hot(inputs.T, self.vocab_size)  # (num_steps, batch_size, vocab_size): layout 'TNC'
        Y, state = self.rnn(X, state)
        # The dense layer first reshapes Y to (num_steps * batch_size, num_hiddens);
        # its output has shape (num_steps * batch_size, vocab_size)
        output = self.dense(Y.reshape(-1, Y.shape[-1]))
        return output, state

    def begin_state(self, *args, **kwargs) -> list:
        return self.rnn.begin_state(*args, **kwargs)


def predict_ch8(prefix: str, num_preds: int, net: RNNModel, vocab: Vocab) -> str:
    """Generate ``num_preds`` characters following ``prefix``."""
    state = net.begin_state(batch_size=1)
    outputs = [vocab[prefix[0]]]

    def get_input():
        return jnp.array([outputs[-1]]).reshape((1, 1))

    for y in prefix[1:]:  # warm-up period
        _, state = net(get_input(), state)
        outputs.append(vocab[y])
    for _ in range(num_preds):  # predict num_preds steps
        y, state = net(get_input(), state)
        outputs.append(int(y.argmax(axis=1).reshape(1)[0]))
    return "".join([vocab.idx_to_token[i] for i in outputs])


def grad_clipping(net: hybrid.Block, theta: float) -> float:
    """Clip the gradients to a global norm of at most ``theta``; returns the norm before clipping.

    MXNet's version rescales ``param.grad[:]`` in place; hybrid's gradients are immutable JAX arrays,
    and ``utils.clip_global_norm`` replaces the parameters' gradients with the rescaled ones.
    """
    return hybrid.utils.clip_global_norm(net.collect_params(), theta)


def train_epoch_ch8(net: RNNModel, train_iter, loss: gloss.Loss, trainer: Trainer,
                    use_random_iter: bool) -> tuple[float, float]:
    """Train for one epoch; returns the perplexity and the speed in tokens per second."""
    state, start = None, time.perf_counter()
    metric = [0.0, 0]  # sum of training loss, no. of tokens
    for X, Y in train_iter:
        if state is None or use_random_iter:
            # Initialise the state at the first iteration or with random sampling
            state = net.begin_state(batch_size=X.shape[0])
        else:
            state = [jax.lax.stop_gradient(s) for s in state]  # MXNet: s.detach()
        y = Y.T.reshape(-1)
        with autograd.record():
            y_hat, state = net(X, state)
            l = loss(y_hat, y).mean()
        autograd.backward(l)
        grad_clipping(net, 1)
        trainer.step(1)  # the loss is already a mean
        metric[0] += float(l) * y.size
        metric[1] += y.size
    return math.exp(metric[0] / metric[1]), metric[1] / (time.perf_counter() - start)


def train_ch8(net: RNNModel, train_iter, vocab: Vocab, lr: float, num_epochs: int,
              use_random_iter: bool = False, print_every: int = 10) -> dict:
    """Train the model (SGD with gradient clipping); returns the perplexity per epoch and samples."""
    loss = gloss.SoftmaxCrossEntropyLoss()
    net.initialize(force_reinit=True, init=init.Normal(0.01))
    trainer = Trainer(net.collect_params(), "sgd", {"learning_rate": lr})

    def predict(prefix):
        return predict_ch8(prefix, 50, net, vocab)

    perplexities = []
    for epoch in range(num_epochs):
        ppl, speed = train_epoch_ch8(net, train_iter, loss, trainer, use_random_iter)
        perplexities.append(ppl)
        if (epoch + 1) % print_every == 0:
            print(f"epoch {epoch + 1}, perplexity {ppl:.2f}: {predict('time traveller')}")
    print(f"perplexity {perplexities[-1]:.1f}, {speed:.1f} tokens/sec")
    samples = [predict("time traveller"), predict("traveller")]
    print(samples[0])
    print(samples[1])
    return {"perplexity": perplexities, "samples": samples}


def main(num_epochs: int = 500, lr: float = 1.0, batch_size: int = 32, num_steps: int = 35,
         num_hiddens: int = 256, path: str | None = None, max_tokens: int = 10000,
         use_random_iter: bool = False, print_every: int = 10, seed: int = 0) -> dict:
    """Train the GRU language model; returns the per-epoch perplexity, samples, the vocabulary and
    the corpus."""
    hybrid.random.seed(seed)
    train_iter, vocab = load_data_time_machine(batch_size, num_steps, use_random_iter, max_tokens, path, seed)
    gru_layer = rnn.GRU(num_hiddens)
    model = RNNModel(gru_layer, len(vocab))
    result = train_ch8(model, train_iter, vocab, lr, num_epochs, use_random_iter, print_every)
    result.update(vocab=vocab, corpus=train_iter.corpus, net=model)
    return result


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--epochs", type=int, default=500)
    parser.add_argument("--lr", type=float, default=1.0)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--num-steps", type=int, default=35)
    parser.add_argument("--num-hiddens", type=int, default=256)
    parser.add_argument("--random-iter", action="store_true", help="random sampling instead of sequential")
    parser.add_argument("--text", help="a text file to train on (default: the paragraphs in this script)")
    args = parser.parse_args()
    main(args.epochs, args.lr, args.batch_size, args.num_steps, args.num_hiddens, path=args.text,
         use_random_iter=args.random_iter)
