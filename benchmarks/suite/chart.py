"""Bar chart of a suite run: one panel per model and mode, median ms per framework on a log axis,
each bar labelled with its ratio to hand-written JAX.

    python -m benchmarks.suite.chart results.json chart.png
"""
from __future__ import annotations

import json
import sys
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from benchmarks.suite import FRAMEWORKS, LIMIT  # noqa: E402


def draw(results: dict, path: Any) -> None:
    """Draw ``results`` (a suite run's JSON) into ``path``, a file name or a binary file object, as PNG."""
    rows = [r for r in results["rows"] if "median_ms" in r]
    panels = list(dict.fromkeys((r["model"], r["mode"]) for r in rows))
    order = list(FRAMEWORKS)
    fig, axes = plt.subplots(len(panels), 1, figsize=(9, 2.6 * len(panels)), squeeze=False)
    for ax, (model, mode) in zip(axes[:, 0], panels):
        cases = sorted((r for r in rows if (r["model"], r["mode"]) == (model, mode)),
                       key=lambda r: order.index(r["framework"]))
        names = [r["framework"] for r in cases]
        values = [r["median_ms"] for r in cases]
        colors = ["tab:green" if n == LIMIT else "tab:blue" if n.startswith("hybrid") else "tab:gray"
                  for n in names]
        ax.barh(names, values, color=colors)
        ax.set_xscale("log")
        ax.invert_yaxis()
        ax.set_title("%s, %s (batch %s)" % (model, "train step" if mode == "train" else "inference",
                                            cases[0]["batch"]), fontsize=10)
        ax.set_xlabel("median ms per step (log)", fontsize=8)
        ax.tick_params(labelsize=8)
        for y, row in enumerate(cases):
            label = "%.3g ms" % row["median_ms"] + (" (%.2fx)" % row["ratio"] if "ratio" in row else "")
            ax.text(row["median_ms"], y, " " + label, va="center", fontsize=7)
        ax.set_xlim(min(values) / 2, max(values) * 8)  # every bar keeps a visible length on the log axis
    meta = results.get("meta", {})
    fig.suptitle("hybrid benchmark suite, %s, %s CPU(s) per worker of %s, load %s" % (
        meta.get("date", "?"), meta.get("cpus_per_worker", "?"), meta.get("cpus", "?"),
        " ".join("%.1f" % v for v in meta.get("loadavg_start", []))), fontsize=10)
    fig.tight_layout(rect=(0, 0, 1, 0.985))
    fig.savefig(path, dpi=90, format="png")
    plt.close(fig)


if __name__ == "__main__":
    with open(sys.argv[1]) as f:
        draw(json.load(f), sys.argv[2])
