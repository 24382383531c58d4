#!/usr/bin/env bash
# Installs the benchmark suite's peer frameworks into two virtual environments under benchmarks/.venvs/:
#   peers/  Flax (NNX), Equinox, Optax, PyTorch (CPU build), matplotlib and psutil, on top of this
#           interpreter's site-packages, so hybrid, hand-written JAX, Flax and Equinox share ONE jax install;
#   mxnet/  MXNet 1.9.1 with numpy<1.24, on the oldest Python 3.8-3.11 found (pyenv, PATH).
# Every step is optional: a failure is reported and the suite marks that framework "not installed".
#
#   bash benchmarks/setup_peers.sh [--skip-peers] [--skip-mxnet]
# Environment: PYTHON (default python3) builds the peers venv; MXNET_PYTHON forces the MXNet interpreter.
set -uo pipefail
cd "$(dirname "$0")"
VENVS="$PWD/.venvs"
PYTHON="${PYTHON:-python3}"
skip_peers=0; skip_mxnet=0
for arg in "$@"; do
  case "$arg" in
    --skip-peers) skip_peers=1 ;;
    --skip-mxnet) skip_mxnet=1 ;;
    *) echo "unknown argument $arg" >&2; exit 2 ;;
  esac
done
mkdir -p "$VENVS"
status=0

setup_peers() {
  local jax_version
  jax_version=$("$PYTHON" -c 'import jax; print(jax.__version__)') || {
    echo "peers: $PYTHON cannot import jax; install the project first (pip install -e .)" >&2; return 1; }
  "$PYTHON" -m venv --system-site-packages "$VENVS/peers" || return 1
  local pip=("$VENVS/peers/bin/python" -m pip install --disable-pip-version-check -q)
  # Pinning jax keeps the venv on the interpreter's jax (flax or equinox must not pull another one).
  # torch==2.13.0 is the CPU build; an unpinned torch resolves to a multi-GB CUDA build.
  "${pip[@]}" "jax==$jax_version" "jaxlib==$jax_version" flax equinox optax matplotlib psutil || return 1
  "${pip[@]}" "jax==$jax_version" "jaxlib==$jax_version" "torch==2.13.0" \
    || echo "peers: torch==2.13.0 could not be installed; torch_eager/torch_compile will be 'not installed'" >&2
  "$VENVS/peers/bin/python" - <<'PY'
import importlib
for name in ("jax", "flax", "equinox", "optax", "torch", "matplotlib"):
    try:
        print(f"peers: {name} {importlib.import_module(name).__version__}")
    except Exception as exc:  # noqa: BLE001
        print(f"peers: {name} unavailable ({exc})")
PY
}

find_mxnet_python() {
  if [ -n "${MXNET_PYTHON:-}" ]; then echo "$MXNET_PYTHON"; return; fi
  local root candidates=()
  root=$(pyenv root 2>/dev/null || echo "$HOME/.pyenv")
  for minor in 3.8 3.9 3.10 3.11; do
    candidates+=("$root"/versions/"$minor".*/bin/python"$minor" "$(command -v python"$minor" 2>/dev/null)")
  done
  for candidate in "${candidates[@]}"; do
    if [ -n "$candidate" ] && [ -x "$candidate" ]; then echo "$candidate"; return; fi
  done
}

setup_mxnet() {
  local python
  python=$(find_mxnet_python)
  if [ -z "$python" ]; then echo "mxnet: no Python 3.8-3.11 interpreter found" >&2; return 1; fi
  echo "mxnet: using $python ($("$python" --version 2>&1))"
  "$python" -m venv "$VENVS/mxnet" || return 1
  # MXNet 1.9.1 uses numpy aliases (np.bool) that numpy 1.24 removed.
  "$VENVS/mxnet/bin/python" -m pip install --disable-pip-version-check -q "mxnet==1.9.1" "numpy<1.24" || return 1
  "$VENVS/mxnet/bin/python" -c 'import mxnet, numpy; print("mxnet:", mxnet.__version__, "numpy", numpy.__version__)'
}

if [ "$skip_peers" = 0 ]; then setup_peers || { echo "peers: set-up failed" >&2; status=1; }; fi
if [ "$skip_mxnet" = 0 ]; then setup_mxnet || { echo "mxnet: set-up failed" >&2; status=1; }; fi
exit "$status"
