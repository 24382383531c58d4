"""Write the MXNet cells of chapters of *Dive into Deep Learning* (d2l-en) as corpus cases.

    python extract_d2l.py /path/to/d2l-en

For each section of SECTIONS, the code cells whose ``%%tab`` line (or, in older chapters, first ``#@tab``
line) names ``mxnet`` or ``all`` (or that have no such line) are written, unchanged, to
``d2l/<chapter>/<section>.py`` with ``# %%`` between cells; IPython magics (lines starting with ``%``) are left out. The cells are run notebook-style by harness.py
(which gives them d2lbook's ``tab``, whose ``tab.selected(...)`` is true for MXNet).
"""
import os
import re
import sys

SECTIONS = [
    "chapter_preliminaries/ndarray",
    "chapter_preliminaries/linear-algebra",
    "chapter_preliminaries/calculus",
    "chapter_preliminaries/autograd",
    "chapter_linear-regression/linear-regression-scratch",
    "chapter_linear-regression/linear-regression-concise",
    "chapter_linear-regression/weight-decay",
    "chapter_linear-classification/image-classification-dataset",
    "chapter_linear-classification/softmax-regression-scratch",
    "chapter_linear-classification/softmax-regression-concise",
    "chapter_multilayer-perceptrons/mlp-implementation",
    "chapter_builders-guide/model-construction",
    "chapter_builders-guide/parameters",
    "chapter_builders-guide/init-param",
    "chapter_builders-guide/lazy-init",
    "chapter_builders-guide/custom-layer",
    "chapter_builders-guide/read-write",
    "chapter_convolutional-neural-networks/conv-layer",
    "chapter_convolutional-neural-networks/padding-and-strides",
    "chapter_convolutional-neural-networks/channels",
    "chapter_convolutional-neural-networks/pooling",
    "chapter_convolutional-neural-networks/lenet",
    "chapter_recurrent-neural-networks/text-sequence",
    "chapter_recurrent-neural-networks/language-model",
    "chapter_recurrent-neural-networks/rnn-scratch",
    "chapter_recurrent-neural-networks/rnn-concise",
    "chapter_recurrent-modern/gru",
    "chapter_recurrent-modern/bi-rnn",
    "chapter_recurrent-modern/machine-translation-and-dataset",
    "chapter_recurrent-modern/encoder-decoder",
    "chapter_attention-mechanisms-and-transformers/queries-keys-values",
    "chapter_attention-mechanisms-and-transformers/attention-pooling",
    "chapter_attention-mechanisms-and-transformers/attention-scoring-functions",
    "chapter_attention-mechanisms-and-transformers/multihead-attention",
    "chapter_attention-mechanisms-and-transformers/self-attention-and-positional-encoding",
    "chapter_optimization/optimization-intro",
    "chapter_optimization/convexity",
    "chapter_optimization/gd",
    "chapter_optimization/minibatch-sgd",
    "chapter_optimization/momentum",
    "chapter_optimization/adagrad",
    "chapter_optimization/rmsprop",
    "chapter_optimization/adadelta",
    "chapter_optimization/adam",
    "chapter_computational-performance/hybridize",
    "chapter_computational-performance/async-computation",
    "chapter_convolutional-modern/batch-norm",
]
HERE = os.path.dirname(os.path.abspath(__file__))
CELL = re.compile(r"^```\{\.python \.input[^}]*\}\n(.*?)^```", re.S | re.M)


def mxnet_cells(markdown):
    cells = []
    for body in CELL.findall(markdown):
        lines = body.splitlines()
        if lines and lines[0].startswith("%%tab"):
            tabs = {t.strip() for t in lines[0][len("%%tab"):].split(",")}
            if not tabs & {"mxnet", "all"}:
                continue
            lines = lines[1:]
        elif lines and lines[0].startswith("#@tab"):  # the older chapters' mark, a comment that stays in
            tabs = {t.strip() for t in lines[0][len("#@tab"):].split(",")}
            if not tabs & {"mxnet", "all"}:
                continue
        code = "\n".join(line for line in lines if not line.startswith("%"))
        if code.strip() and "tab.interact_select" not in code:
            cells.append(code.rstrip() + "\n")
    return cells


def main(root):
    for section in SECTIONS:
        with open(os.path.join(root, section + ".md")) as f:
            cells = mxnet_cells(f.read())
        target = os.path.join(HERE, "d2l", section + ".py")
        os.makedirs(os.path.dirname(target), exist_ok=True)
        with open(target, "w") as f:
            f.write(f"# The MXNet cells of d2l-en's {section}.md (https://github.com/d2l-ai/d2l-en), unchanged.\n")
            for cell in cells:
                f.write("# %%\n" + cell)


if __name__ == "__main__":
    main(sys.argv[1])
