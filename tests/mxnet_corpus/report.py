"""Write the corpus table of docs/mxnet-alias.md: each case, its cells and backward() calls, and whether it
gives MXNet 1.9.1's numbers under hybrid.mxnet (each case replayed in a fresh interpreter).

    python tests/mxnet_corpus/report.py
"""
import os
import sys
import tempfile

import numpy as onp

HERE = os.path.dirname(os.path.abspath(__file__))
DOC = os.path.join(HERE, "..", "..", "docs", "mxnet-alias.md")
sys.path.insert(0, HERE)
import catalogue  # noqa: E402
from catalogue import reference_of  # noqa: E402

BEGIN, END = "<!-- corpus table: written by tests/mxnet_corpus/report.py -->", "<!-- end of corpus table -->"


def cases():
    return catalogue.CASES


def row(case):
    import harness
    reference = harness.load_reference(reference_of(case))
    with tempfile.TemporaryDirectory() as folder:  # the files a case writes land there
        status, _, problems = catalogue.replay(case, folder)
    if status != 0:
        problems = ["did not run"]
    arrays = sum(isinstance(v, onp.ndarray) for v in reference["observed"])
    status = "agrees" if not problems else f"differs ({len(problems)} problems)"
    if case.startswith("scripts/"):  # a whole script: its command line instead of cells
        command = " ".join([case.split("/", 2)[2] + ".py"] + harness.script_arguments(case + ".py"))
        return (f"| MXNet 1.9.1 `example/gluon` | `{command}` | whole script | {arrays} | "
                f"{len(reference['losses'])} | {status} |")
    chapter, section = case.split("/")[1:]
    return (f"| d2l-en | `{chapter}/{section}` | {len(reference['observed'])} | {arrays} | "
            f"{len(reference['losses'])} | {status} |")


def main():
    rows = ["| source | case | cells | values compared | losses compared | under `hybrid.mxnet` |",
            "|---|---|---|---|---|---|"] + [row(c) for c in cases()]
    with open(DOC) as f:
        text = f.read()
    start, stop = text.index(BEGIN) + len(BEGIN), text.index(END)
    text = text[:start] + "\n" + "\n".join(rows) + "\n" + text[stop:]
    with open(DOC, "w") as f:
        f.write(text)


if __name__ == "__main__":
    main()
