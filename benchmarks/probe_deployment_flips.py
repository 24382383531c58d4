"""Every one-bit flip of a forged deployment file is refused or loaded in bounded time, leaving no process.

A small MLP is exported with ``export_deployment``; for ``--flips`` bit positions drawn with a fixed
seed, the flipped file is written beside a checksum file that matches it (a forgery, so the checksum
cannot refuse it) and loaded with ``load_deployment`` in ``--workers`` threads. Printed: how many were
refused, loaded, or raised something other than ``FormatError``; the slowest loads; and whether any
checking process outlived its load. Target (issue 31): every load within 30 s, none left behind.

    python3 benchmarks/probe_deployment_flips.py [--flips 300] [--workers 2] [--out FILE]
"""
from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from hybrid import nn  # noqa: E402
from hybrid.export import FormatError, export_deployment, load_deployment  # noqa: E402
from hybrid.formats.jsonfile import sha256_hex  # noqa: E402


def _children() -> list[int]:
    """Live child processes of this process (Linux /proc)."""
    me, found = os.getpid(), []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as handle:
                    fields = handle.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == me and fields[0] != "Z":
                found.append(int(entry))
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--flips", type=int, default=300)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default=None, help="also write the report to this file")
    args = parser.parse_args()

    directory = tempfile.mkdtemp(prefix="deploy-flips-")
    net = nn.HybridSequential()
    net.add(nn.Dense(16, activation="relu", in_units=8), nn.Dense(4, in_units=16))
    net.initialize()
    original = open(export_deployment(net, os.path.join(directory, "mlp.jaxexport"), np.ones((2, 8), np.float32)),
                    "rb").read()
    bits = random.Random(args.seed).sample(range(len(original) * 8), min(args.flips, len(original) * 8))

    def load(index: int, bit: int) -> tuple[int, str, float]:
        data = bytearray(original)
        data[bit // 8] ^= 1 << (bit % 8)
        path = os.path.join(directory, f"flip{index}.jaxexport")
        with open(path, "wb") as handle:
            handle.write(data)
        with open(path + ".sha256", "w") as handle:
            handle.write(f"{sha256_hex(bytes(data))}  {os.path.basename(path)}\n")
        start = time.monotonic()
        try:
            load_deployment(path)
            outcome = "loaded"
        except FormatError:
            outcome = "refused"
        except Exception as exc:  # noqa: BLE001 - counted and reported: a load must raise FormatError only
            outcome = f"other: {type(exc).__name__}"
        return bit, outcome, time.monotonic() - start

    with ThreadPoolExecutor(args.workers) as pool:
        results = list(pool.map(load, range(len(bits)), bits))
    time.sleep(1.0)
    left = _children()
    outcomes: dict[str, int] = {}
    for _, outcome, _ in results:
        outcomes[outcome] = outcomes.get(outcome, 0) + 1
    times = sorted(seconds for _, _, seconds in results)
    slowest = sorted(results, key=lambda r: -r[2])[:3]
    lines = [f"deployment flips: {len(bits)} single-bit flips of a {len(original)}-byte MLP module, "
             f"checksums forged to match, {args.workers} loads at a time",
             "outcomes: " + ", ".join(f"{name} {count}" for name, count in sorted(outcomes.items())),
             f"load time: median {statistics.median(times):.2f} s, max {times[-1]:.2f} s (target: every load ≤30 s)",
             "slowest: " + ", ".join(f"bit {bit} {outcome} {seconds:.1f} s" for bit, outcome, seconds in slowest),
             f"checking processes left behind: {len(left)} (target: 0)"]
    report = "\n".join(lines)
    print(report)
    if args.out:
        with open(args.out, "w") as handle:
            handle.write(report + "\n")


if __name__ == "__main__":
    main()
