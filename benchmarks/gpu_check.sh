#!/bin/bash
# The GPU checks, as one run on a machine with a GPU (jax with its GPU plugin, flax, optax,
# msgpack, pytest, hypothesis installed; the package is read from this clone):
#   bash benchmarks/gpu_check.sh OUTDIR
# 1. benchmarks/bench_gpu_adam.py (ours against hand-written optax and the HBM bound);
# 2. the step tests on the GPU: tests/test_generic.py, test_optax_state.py, test_compiled_step.py,
#    test_donation.py, test_dynamic_scale.py.
set -u
out=${1:?OUTDIR}
mkdir -p "$out"
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
python3 -c 'import jax, optax, flax; print(jax.__version__, optax.__version__, flax.__version__, jax.devices())' \
  2>&1 | tee "$out/versions.txt"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader >>"$out/versions.txt" 2>&1
timeout 300 python3 benchmarks/bench_gpu_adam.py --out "$out/gpu_adam.json" 2>&1 | tee "$out/bench.log"
echo "bench rc=${PIPESTATUS[0]}"
timeout 240 python3 -m pytest -q -n 0 -p no:cacheprovider -o addopts='' \
  tests/test_generic.py tests/test_optax_state.py tests/test_compiled_step.py \
  tests/test_donation.py tests/test_dynamic_scale.py 2>&1 | tail -40 | tee "$out/tests.log"
echo "tests rc=${PIPESTATUS[0]}"
