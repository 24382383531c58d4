"""Write the corpus table of docs/mxnet-alias.md: each case, its cells and backward() calls, and whether it
gives MXNet 1.9.1's numbers under hybrid.mxnet (each case replayed in a fresh interpreter).

    python tests/mxnet_corpus/report.py
"""
import glob
import json
import os
import subprocess
import sys

import numpy as onp

HERE = os.path.dirname(os.path.abspath(__file__))
DOC = os.path.join(HERE, "..", "..", "docs", "mxnet-alias.md")
BEGIN, END = "<!-- corpus table: written by tests/mxnet_corpus/report.py -->", "<!-- end of corpus table -->"


def cases():
    with open(os.path.join(HERE, "scripts", "arguments.json")) as f:
        scripts = sorted("scripts/" + name for name in json.load(f))
    return sorted(os.path.relpath(p, HERE)[:-3] for p in glob.glob(os.path.join(HERE, "d2l", "*", "*.py"))) + scripts


def reference_of(case):
    return os.path.join(HERE, "references", case.split("/", 1)[1].replace("/", "__") + ".npz")


def row(case):
    sys.path.insert(0, HERE)
    import harness
    reference = harness.load_reference(reference_of(case))
    run = subprocess.run([sys.executable, os.path.join(HERE, "harness.py"), "replay", case + ".py",
                          reference_of(case)], capture_output=True, text=True, cwd=HERE,
                         env=dict(os.environ, MPLBACKEND="Agg"))
    lines = run.stdout.splitlines()
    starts = [i for i, line in enumerate(lines) if line.startswith("[")]
    problems = json.loads("\n".join(lines[starts[-1]:])) if run.returncode == 0 and starts else ["did not run"]
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
