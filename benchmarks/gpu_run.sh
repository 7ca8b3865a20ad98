#!/usr/bin/env bash
# On the GPU machine (no network), with .gpu-carry/ from benchmarks/gpu_prepare.sh carried
# along: install the carried wheels offline, mel_opt without its dependencies, and run the
# GPU check (benchmarks/bench_gpu.py; its arguments pass through, e.g. --budget-s 420).
# Its files go to $OUT when set (the device machine's folder that comes back). Where pip
# cannot install (no pip, a locked system Python), the wheels are unpacked into
# .gpu-carry/site and put on PYTHONPATH instead.
set -euo pipefail
cd "$(dirname "$0")/.."
CARRY=.gpu-carry
export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_BREAK_SYSTEM_PACKAGES=1
if ! { python3 -m pip install --quiet --no-index --find-links "$CARRY/wheels" \
           -r "$CARRY/requirements.txt" &&
       python3 -m pip install --quiet --no-index --no-deps --find-links "$CARRY/wheels" \
           mel_opt; }; then
    echo "pip could not install the carried wheels: unpacking them onto PYTHONPATH instead"
    mkdir -p "$CARRY/site"
    for w in "$CARRY"/wheels/*.whl; do python3 -m zipfile -e "$w" "$CARRY/site"; done
    export PYTHONPATH="$PWD/$CARRY/site${PYTHONPATH:+:$PYTHONPATH}"
fi
export MELOPT_DATA_DIR="$PWD/$CARRY/datasets"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || true
python3 -c "import cupy, numpy, pyomo, highspy; print('cupy', cupy.__version__, 'numpy', numpy.__version__)"
exec python3 benchmarks/bench_gpu.py --out "${OUT:-/tmp/melopt-bench-gpu}" "$@"
