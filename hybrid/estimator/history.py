"""``History``: the metric values ``Estimator.fit`` saw, per epoch and per batch."""
from __future__ import annotations

from typing import Any, Sequence

__all__ = ["History"]


class History:
    """``epoch[name]`` lists a metric's value at the end of each epoch (training and validation
    metrics); ``batch[name]`` lists the running training values after each batch."""

    def __init__(self) -> None:
        self.epoch: dict[str, list[float]] = {}
        self.batch: dict[str, list[float]] = {}

    def _add(self, table: dict, metrics: Sequence[Any]) -> None:
        for metric in metrics:
            for name, value in metric.get_name_value():
                table.setdefault(name, []).append(float(value))

    def __repr__(self) -> str:
        last = {name: values[-1] for name, values in self.epoch.items() if values}
        return f"History({len(next(iter(self.epoch.values()), []))} epochs, last: {last})"

    def plot(self, path: str | None = None, metrics: Sequence[str] | None = None) -> Any:
        """Draw each metric (all by default) against the epoch, training and validation values of one
        quantity on the same axes; save a PNG to ``path`` when given. Returns the matplotlib Figure.
        Raises ImportError without matplotlib (``pip install hybrid[plot]``), ValueError for a metric
        that was not recorded."""
        try:
            import matplotlib
            if path is not None:
                matplotlib.use("Agg", force=False)
            import matplotlib.pyplot as plt
        except ImportError as exc:
            raise ImportError("History.plot needs matplotlib: pip install 'hybrid[plot]'") from exc
        names = list(metrics) if metrics is not None else list(self.epoch)
        unknown = [n for n in names if n not in self.epoch]
        if unknown:
            raise ValueError(f"History.plot: no epoch values of {unknown}; recorded: {sorted(self.epoch)}")
        quantities: dict[str, list[str]] = {}
        for name in names:
            quantity = name.split(" ", 1)[1] if name.startswith(("training ", "validation ")) else name
            quantities.setdefault(quantity, []).append(name)
        figure, axes = plt.subplots(1, max(1, len(quantities)), figsize=(4.5 * max(1, len(quantities)), 3.5),
                                    squeeze=False)
        for ax, (quantity, members) in zip(axes[0], quantities.items()):
            for name in members:
                values = self.epoch[name]
                ax.plot(range(1, len(values) + 1), values, marker="o", label=name)
            ax.set_xlabel("epoch")
            ax.set_title(quantity)
            ax.legend()
        figure.tight_layout()
        if path is not None:
            figure.savefig(path, dpi=100)
        return figure
