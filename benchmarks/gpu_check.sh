#!/usr/bin/env bash
# The GPU-side checks of the open issues, as short runs on a lent device machine (no network there: it uses
# the machine's own jax), through benchmarks/run.py:
#   recorded-step  the mlp33 Gluon loop and hybrid.compile against the one-program JAX step (issue 29)
#   memory         ResNet-50 v1 at batch 128 in bfloat16 with and without remat, images/s, the device's
#                  peak and the largest batch that fits (docs/memory.md); about 8 minutes on an H100
#     bash benchmarks/gpu_check.sh [recorded-step] [memory]     # default: both
# Each writes benchmarks/results/<benchmark>-gpu-<model>.txt (gpu-h100 on an H100), copied to $OUT when set.
set -euo pipefail
cd "$(dirname "$0")/.."
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
machine=$(python3 -c "import sys; sys.path.insert(0, 'benchmarks'); import run; print(run.machine_name())")
for name in "${@:-recorded-step memory}"; do
  for bench in $name; do
    timeout 560 python3 benchmarks/run.py "$bench" --machine "$machine"
    if [ -n "${OUT:-}" ]; then cp "benchmarks/results/${bench}-${machine}.txt" "$OUT/"; fi
  done
done
