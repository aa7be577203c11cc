#!/usr/bin/env bash
# The checks that need an NVIDIA GPU, in one go: the CUDA tests (tests/dpfl/test_device.py), a
# `dpfl run` of the ISRL MNIST spec on each device, then benchmarks/devices.py. Results go to $OUT
# (default /tmp/gpu-check). Run from the repository root with the machine's own PyTorch (CUDA build).
#
# Where that Python lacks our dependencies and has no package index, bring them as wheels in .whl
# (pydantic, pydantic-core, annotated-types, typing-inspection, dp-accounting, gmpy2, phe, opacus:
# `pip download --no-deps --only-binary=:all: --python-version 3.12 ... -d .whl`) and MNIST in
# .gpudata/mnist; both are installed or read from there when present.
set -uo pipefail
OUT=${OUT:-/tmp/gpu-check}
mkdir -p "$OUT"
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 DPFL_HOME=/tmp/dpfl-home
if [ -d .whl ]; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
        || exit 1
    export PYTHONPATH=/tmp/site:$PWD
fi
[ -d .gpudata ] && export DPFL_DATA_DIR=$PWD/.gpudata

nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv | tee "$OUT/gpu.txt"
python3 -c "import torch; print('torch', torch.__version__, torch.cuda.get_device_name(0))" | tee -a "$OUT/gpu.txt"

timeout 300 python3 -m pytest -q -p no:cacheprovider -o addopts= tests/dpfl/test_device.py 2>&1 | tee "$OUT/tests.log"

for device in cpu cuda; do
    began=$SECONDS
    timeout 120 python3 -m dpfl run configs/isrl_mnist.yaml --device $device --out "$OUT/run-$device.json" 2>&1 \
        | tail -3 | tee -a "$OUT/runs.log"
    echo "$device: $((SECONDS - began)) s, the whole process" | tee -a "$OUT/runs.log"
done

timeout 300 python3 -m benchmarks.devices --repeats 5 --no-write 2>&1 | tee "$OUT/bench.log"
