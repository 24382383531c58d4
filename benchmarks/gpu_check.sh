#!/usr/bin/env bash
# The GPU-side checks of the open issues, as one short run on a lent device machine (no network there:
# it uses the machine's own jax): ResNet-50 v1 at batch 128 in bfloat16 with and without remat, images/s,
# the device's peak and the largest batch that fits (docs/memory.md). About 8 minutes on an H100.
# Writes benchmarks/results/memory-gpu-<device>.txt, and copies it to $OUT when set.
set -euo pipefail
cd "$(dirname "$0")/.."
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
device=$(python3 -c "import jax; print(jax.devices()[0].device_kind.replace(' ', '-'))")
mkdir -p benchmarks/results
out="benchmarks/results/memory-gpu-${device}.txt"
timeout 560 python3 benchmarks/bench_memory.py --gpu --repeats 5 | tee "$out"
if [ -n "${OUT:-}" ]; then cp "$out" "$OUT/"; fi
