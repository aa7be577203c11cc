#!/usr/bin/env bash
# The GPU checks of the dense per-sample pass for convolutional models (dpfl/engine/convclip.py), in
# one short go: the CUDA tests (tests/dpfl/engine/test_convclip.py, then those of
# tests/dpfl/test_device.py), the CIFAR-10 round's dense pass against the vmap path it replaces,
# then benchmarks/devices.py's CIFAR-10 ISRL-DP round. Results go to $OUT (default
# /tmp/gpu-check-conv). Run from the repository root with the machine's own PyTorch (CUDA build).
#
# Wheels and data as for scripts/gpu-check.sh: .whl and .gpudata, installed or read from there when
# present. Here pip picks from .whl by name, so it may hold each binary wheel for several Pythons:
#   for v in 3.11 3.12 3.13; do pip download --no-deps --only-binary=:all: --python-version $v \
#     --platform manylinux_2_28_x86_64 --platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64 \
#     pydantic pydantic-core annotated-types typing-inspection typing-extensions dp-accounting gmpy2 phe \
#     opacus opt-einsum absl-py attrs mpmath dm-tree pyyaml -d .whl; done   (the versions of .venv)
# Remove .whl afterwards: scripts/gpu-check.sh installs every wheel in it and fails on the others.
set -uo pipefail
OUT=${OUT:-/tmp/gpu-check-conv}
mkdir -p "$OUT"
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 DPFL_HOME=/tmp/dpfl-home
if [ -d .whl ]; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
        --find-links .whl pydantic pydantic-core annotated-types typing-inspection typing-extensions \
        dp-accounting gmpy2 phe opacus opt-einsum absl-py attrs mpmath dm-tree pyyaml 2>&1 | tail -3 \
        | tee "$OUT/install.log"
    export PYTHONPATH=$PWD:/tmp/site  # ours first: the opacus wheel ships a top-level `benchmarks`
fi
[ -d .gpudata ] && export DPFL_DATA_DIR=$PWD/.gpudata

nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv | tee "$OUT/gpu.txt"
python3 -c "import sys, torch; print(sys.version.split()[0], 'torch', torch.__version__, torch.cuda.get_device_name(0))" \
    | tee -a "$OUT/gpu.txt"

PYTEST="python3 -m pytest -q -p no:cacheprovider -o addopts="
timeout 60 $PYTEST tests/dpfl/engine/test_convclip.py 2>&1 | tail -15 | tee "$OUT/tests-convclip.log"

# The dense pass against the vmap path at the benchmark's shape, the clipped sum alone, on the GPU.
timeout 60 python3 - <<'PY' 2>&1 | tee "$OUT/dense-vs-vmap.log"
import statistics, time, torch
from dpfl.engine import ParamLayout, SiloBatch, clipped_grad_sum
from dpfl.models import build_model
model = build_model("cifar_cnn", input_shape=(3, 32, 32), num_classes=10, seed=0)
layout = ParamLayout.of(model)
flat = layout.flatten_module(model).cuda()
gen = torch.Generator().manual_seed(0)
batch = SiloBatch.full(torch.randn(10, 346, 3, 32, 32, generator=gen).cuda(), torch.randint(0, 10, (10, 346), generator=gen).cuda())
times = {"dense": [], "vmap": []}
with torch.device("cuda"):
    for i in range(12):
        for name, method in (("dense", "auto"), ("vmap", "per_sample")):
            torch.cuda.synchronize(); began = time.perf_counter()
            clipped_grad_sum(model, layout, flat, batch, clip=1.0, method=method)
            torch.cuda.synchronize()
            if i >= 2:
                times[name].append(time.perf_counter() - began)
    peak = torch.cuda.max_memory_allocated() / 2**30
print({k: f"{statistics.median(v) * 1e3:.2f} ms" for k, v in times.items()}, f"peak {peak:.2f} GiB")
PY

# Where the dense pass spends its GPU time: the CUDA kernels of three clipped sums, by total time.
timeout 60 python3 - <<'PY' 2>&1 | tee "$OUT/profile.log"
import torch
from torch.profiler import ProfilerActivity, profile
from dpfl.engine import ParamLayout, SiloBatch, clipped_grad_sum
from dpfl.models import build_model
model = build_model("cifar_cnn", input_shape=(3, 32, 32), num_classes=10, seed=0)
layout = ParamLayout.of(model)
flat = layout.flatten_module(model).cuda()
gen = torch.Generator().manual_seed(0)
batch = SiloBatch.full(torch.randn(10, 346, 3, 32, 32, generator=gen).cuda(), torch.randint(0, 10, (10, 346), generator=gen).cuda())
with torch.device("cuda"):
    for method in ("auto", "per_sample"):
        clipped_grad_sum(model, layout, flat, batch, clip=1.0, method=method)
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            for _ in range(3):
                clipped_grad_sum(model, layout, flat, batch, clip=1.0, method=method)
            torch.cuda.synchronize()
        print(f"== {method}")
        print(prof.key_averages().table(sort_by="cuda_time_total", row_limit=15, max_name_column_width=60))
PY

timeout 100 python3 -m benchmarks.devices --repeats 7 --round cifar_isrl --no-write 2>&1 | tee "$OUT/bench.log"

timeout 150 $PYTEST tests/dpfl/test_device.py 2>&1 | tail -15 | tee "$OUT/tests-device.log"
