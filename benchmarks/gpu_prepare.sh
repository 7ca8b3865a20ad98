#!/usr/bin/env bash
# Prepare a GPU session, HERE (a machine that reaches the package registries): put into
# .gpu-carry/ (git-ignored) what the GPU machine lacks to run benchmarks/bench_gpu.py offline:
#
#   .gpu-carry/wheels/     wheels for Python 3.12 on x86-64 Linux of mel_opt's base
#                          dependencies that machine does not have (it has numpy, scipy,
#                          scikit-learn, click, rich, threadpoolctl, psutil, pyyaml and
#                          cupy-cuda13x), and mel_opt's own wheel built from this tree;
#   .gpu-carry/requirements.txt   their names, for pip install --no-index;
#   .gpu-carry/datasets/fashion-mnist/   the four IDX files mel_opt reads (MELOPT_DATA_DIR).
#
# Then, on the GPU machine, with .gpu-carry carried along: bash benchmarks/gpu_run.sh
# (docs/howto/gpu.md: the exact command). Usage: bash benchmarks/gpu_prepare.sh
# (PYTHON=... to use another interpreter than .venv/bin/python, which `make install-test` makes).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-.venv/bin/python}
CARRY=.gpu-carry
# what the GPU machine already has (pip names, lower case)
HAS="click numpy scipy scikit-learn rich threadpoolctl psutil pyyaml absl-py cupy-cuda13x"

mkdir -p "$CARRY/wheels" "$CARRY/datasets/fashion-mnist"
rm -f "$CARRY"/wheels/mel_opt-*.whl

# mel_opt's base dependencies (pyproject.toml) less what that machine has
mapfile -t NEED < <(HAS="$HAS" "$PY" - <<'PY'
import os, re, tomllib
deps = tomllib.load(open("pyproject.toml", "rb"))["project"]["dependencies"]
has = set(os.environ["HAS"].split())
for d in deps:
    name = re.split(r"[<>=!~\[; ]", d, maxsplit=1)[0].strip().lower()
    if name not in has:
        print(d)
PY
)
echo "wheels for Python 3.12, x86-64: ${NEED[*]}"
"$PY" -m pip download --quiet --disable-pip-version-check --only-binary=:all: --no-deps \
    --python-version 3.12 --implementation cp --abi cp312 --abi abi3 --abi none \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 \
    --platform manylinux_2_24_x86_64 --platform manylinux_2_17_x86_64 \
    --platform manylinux2014_x86_64 --platform any \
    -d "$CARRY/wheels" "${NEED[@]}"
# their own dependencies must all be on that machine already: list any that are not
"$PY" - "$CARRY/wheels" "$HAS" <<'PY'
import re, sys, zipfile, pathlib
folder, has = pathlib.Path(sys.argv[1]), set(sys.argv[2].split())
carried = {re.split(r"-", w.name)[0].replace("_", "-").lower() for w in folder.glob("*.whl")}
missing = set()
for w in folder.glob("*.whl"):
    with zipfile.ZipFile(w) as z:
        meta = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
        for line in z.read(meta).decode().splitlines():
            if line.startswith("Requires-Dist:") and "extra ==" not in line \
                    and "python_version < \"3.1" not in line:
                name = re.split(r"[<>=!~\[; (]", line.split(":", 1)[1].strip(), maxsplit=1)[0]
                name = name.lower().replace("_", "-")
                if name not in has and name not in carried:
                    missing.add(name)
if missing:
    sys.exit(f"the carried wheels need {sorted(missing)}, which the GPU machine lacks: add them")
PY
"$PY" -m pip wheel --quiet --disable-pip-version-check --no-deps --no-build-isolation \
    -w "$CARRY/wheels" .
printf '%s\n' "${NEED[@]}" > "$CARRY/requirements.txt"

# Fashion-MNIST where mel_opt reads it (its cache, else Debian's folder); fetched if absent
SRC=$("$PY" -c "from mel_opt.training.data import dataset_dir; print(dataset_dir('fashion-mnist') or '')")
if [ -z "$SRC" ]; then
    "$PY" -m mel_opt.cli data fetch fashion-mnist
    SRC=$("$PY" -c "from mel_opt.training.data import dataset_dir; print(dataset_dir('fashion-mnist'))")
fi
for stem in train-images-idx3-ubyte train-labels-idx1-ubyte t10k-images-idx3-ubyte \
            t10k-labels-idx1-ubyte; do
    found=""
    for name in "$stem" "$stem.gz" "${stem/-idx/.idx}" "${stem/-idx/.idx}.gz"; do
        if [ -f "$SRC/$name" ]; then found="$SRC/$name"; break; fi
    done
    [ -n "$found" ] || { echo "no $stem in $SRC" >&2; exit 1; }
    cp -p "$found" "$CARRY/datasets/fashion-mnist/"
done
"$PY" -c "
from mel_opt.training.data import load_idx_dir
ds = load_idx_dir('$CARRY/datasets/fashion-mnist', 'fashion-mnist')
print(f'Fashion-MNIST: {ds.x_train.shape[0]:,} training and {ds.x_test.shape[0]:,} test images')"

ls -l "$CARRY/wheels"
SIZE=$(du -sm "$CARRY" | cut -f1)
echo "$CARRY: ${SIZE} MiB (a device run carries at most 64 MiB)"
[ "$SIZE" -le 64 ] || { echo "too large to carry" >&2; exit 1; }
