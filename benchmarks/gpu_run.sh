#!/usr/bin/env bash
# On the GPU machine (no network), with .gpu-carry/ from benchmarks/gpu_prepare.sh carried
# along: install the carried wheels offline, mel_opt without its dependencies, and run the
# GPU check (benchmarks/bench_gpu.py; its arguments pass through, e.g. --budget-s 420).
# Its files go to $OUT when set (the device machine's folder that comes back).
set -euo pipefail
cd "$(dirname "$0")/.."
CARRY=.gpu-carry
export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_BREAK_SYSTEM_PACKAGES=1
python3 -m pip install --quiet --no-index --find-links "$CARRY/wheels" -r "$CARRY/requirements.txt"
python3 -m pip install --quiet --no-index --no-deps --find-links "$CARRY/wheels" mel_opt
export MELOPT_DATA_DIR="$PWD/$CARRY/datasets"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || true
python3 -c "import cupy, numpy; print('cupy', cupy.__version__, 'numpy', numpy.__version__)"
exec python3 benchmarks/bench_gpu.py --out "${OUT:-/tmp/melopt-bench-gpu}" "$@"
