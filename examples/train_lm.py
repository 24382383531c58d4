"""Train a small GPT-style character language model on this project's documentation.

    python examples/train_lm.py            # about two minutes on a laptop CPU
    python examples/train_lm.py --quick    # a few seconds: a tiny model and few steps
    python examples/train_lm.py --text my_book.txt --epochs 20 --units 256 --layers 4

The text is the Markdown files in docs/, or the files
given with --text, read as characters; 90% trains the model and the last 10% is held out. Each training
step -- forward, backward and the Adam update -- is one XLA program built by hybrid.compile. Prints the loss
and perplexity per epoch, the held-out perplexity, and at the end a sample generated from a prompt.
"""
from __future__ import annotations

import argparse
import glob
import math
import os
import time

import numpy as np

import hybrid
from hybrid import autograd, loss
from hybrid.model_zoo import GPTModel

DOCS = os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, "docs")


class CharVocabulary:
    """Characters <-> integer ids, over the characters of a text."""

    def __init__(self, text: str):
        self.chars = sorted(set(text))
        self._ids = {c: i for i, c in enumerate(self.chars)}

    def __len__(self) -> int:
        return len(self.chars)

    def encode(self, text: str) -> np.ndarray:
        """int32 ids; characters outside the vocabulary become spaces (or id 0)."""
        fallback = self._ids.get(" ", 0)
        return np.array([self._ids.get(c, fallback) for c in text], np.int32)

    def decode(self, ids: np.ndarray) -> str:
        return "".join(self.chars[i] for i in ids)


def read_text(paths: list[str]) -> str:
    if not paths:
        raise SystemExit("no text files found; pass some with --text")
    texts = []
    for path in sorted(paths):
        with open(path, encoding="utf-8") as f:
            texts.append(f.read())
    return "\n\n".join(texts)


def windows(ids: np.ndarray, length: int, batch_size: int, rng: np.random.Generator):
    """Random ``(inputs, targets)`` batches of ``length`` characters; targets are the inputs shifted by one."""
    starts = rng.integers(0, len(ids) - length - 1, batch_size)
    chunk = np.stack([ids[s:s + length + 1] for s in starts])
    return chunk[:, :-1], chunk[:, 1:]


def held_out_loss(net: GPTModel, loss_fn: loss.Loss, ids: np.ndarray, length: int, batch_size: int) -> float:
    """Mean next-character loss over consecutive windows of the held-out text."""
    count = (len(ids) - 1) // length
    inputs = ids[:count * length].reshape(count, length)
    targets = ids[1:count * length + 1].reshape(count, length)
    total = 0.0
    for start in range(0, count - batch_size + 1, batch_size):   # whole batches only: one compiled shape
        batch = slice(start, start + batch_size)
        total += float(np.asarray(loss_fn(net(inputs[batch]), targets[batch])).sum())
    return total / ((count // batch_size) * batch_size)


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--text", nargs="*", help="text files to train on (default: docs/*.md)")
    parser.add_argument("--epochs", type=int, default=15)
    parser.add_argument("--steps-per-epoch", type=int, default=0, help="0: one pass over the text per epoch")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--length", type=int, default=64, help="context length in characters")
    parser.add_argument("--units", type=int, default=128)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--dropout", type=float, default=0.1)
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--prompt", default="A HybridBlock ")
    parser.add_argument("--sample-length", type=int, default=300)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--quick", action="store_true",
                        help="a smoke run: a tiny model without dropout, 2 epochs of 15 steps")
    args = parser.parse_args(argv)
    if args.quick:
        args.epochs, args.steps_per_epoch, args.units, args.layers, args.heads = 2, 15, 32, 1, 2
        args.length, args.batch_size, args.sample_length, args.dropout = 32, 16, 60, 0.0

    hybrid.random.seed(args.seed)
    rng = np.random.default_rng(args.seed)
    default = glob.glob(os.path.join(DOCS, "*.md"))
    text = read_text(args.text if args.text is not None else default)
    vocab = CharVocabulary(text)
    ids = vocab.encode(text)
    split = int(0.9 * len(ids))
    train_ids, test_ids = ids[:split], ids[split:]
    steps = args.steps_per_epoch or max(1, len(train_ids) // (args.batch_size * args.length))

    net = GPTModel(len(vocab), units=args.units, num_layers=args.layers, num_heads=args.heads,
                   max_length=args.length, dropout=args.dropout)
    net.initialize(hybrid.init.Xavier())
    net.hybridize()   # held-out evaluation and generation; the training step below is compiled as a whole
    loss_fn = loss.SoftmaxCrossEntropyLoss()   # one value per sequence: the mean over its characters
    trainer = hybrid.Trainer(net.collect_params(), "adam", {"learning_rate": args.lr})

    @hybrid.compile
    def train_step(x, y):
        with autograd.record():
            batch_loss = loss_fn(net(x), y)
        autograd.backward(batch_loss)
        trainer.step(x.shape[0])
        return batch_loss

    print(f"{len(text):,} characters ({len(vocab)} distinct), {steps} steps of {args.batch_size} x {args.length} "
          f"characters per epoch")
    history: dict = {"loss": [], "test_loss": []}
    for epoch in range(1, args.epochs + 1):
        start, total = time.perf_counter(), 0.0
        for _ in range(steps):
            total += float(np.asarray(train_step(*windows(train_ids, args.length, args.batch_size, rng))).mean())
        history["loss"].append(total / steps)
        history["test_loss"].append(held_out_loss(net, loss_fn, test_ids, args.length, args.batch_size))
        print(f"  epoch {epoch:2d}  loss {history['loss'][-1]:.3f}  perplexity {math.exp(history['loss'][-1]):6.2f}"
              f"  held-out perplexity {math.exp(history['test_loss'][-1]):6.2f}  ({time.perf_counter() - start:.1f}s)")
    prompt = vocab.encode(args.prompt)
    sample = net.generate(prompt, args.sample_length, sample=True, temperature=0.8, top_k=10)
    history["sample"] = vocab.decode(sample)
    print(f"sample:\n{history['sample']}")
    return history


if __name__ == "__main__":
    main()
