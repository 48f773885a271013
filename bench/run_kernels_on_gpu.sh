#!/usr/bin/env bash
# One device run of the kernel library: GPU tests, optional compute-sanitizer, the kernel
# benchmark, the PyTorch baselines merged into its JSON — all in one call, logs under OUT.
# Build here first (cmake --build build/cuda --target ceiling <gpu tests>; scripts/device/bundle.sh
# build/cuda), carry build/cuda, and on the GPU machine run from the repo root:
#
#   bench/run_kernels_on_gpu.sh build/cuda "$OUT" [--sanitize] [--no-tests] [--filter REGEX] [--reps N]
#
# Writes OUT/gpu_tests.log, OUT/sanitizer.log (with --sanitize), OUT/kernels.json (the result,
# baselines merged: copy it to bench/results/), OUT/bench.log.
set -uo pipefail
build=${1:?usage: run_kernels_on_gpu.sh BUILD_DIR OUT_DIR [options]}
out=${2:?usage: run_kernels_on_gpu.sh BUILD_DIR OUT_DIR [options]}
shift 2
sanitize=0 tests=1 filter=".*" reps=100
while [ $# -gt 0 ]; do
  case $1 in
    --sanitize) sanitize=1 ;;
    --no-tests) tests=0 ;;
    --filter) filter=$2; shift ;;
    --reps) reps=$2; shift ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
  shift
done
mkdir -p "$out"
# shellcheck disable=SC1091
source scripts/device/env.sh "$build"
export PYTHONUNBUFFERED=1
status=0
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv

if [ $tests = 1 ]; then
  for t in "$build"/tests/gpu/gpu_*; do
    [ -x "$t" ] || continue
    echo "== $t"
    "$t" --gtest_brief=1 || status=1
  done 2>&1 | tee "$out/gpu_tests.log"
  grep -q "FAILED" "$out/gpu_tests.log" && status=1
fi

if [ $sanitize = 1 ]; then
  # memcheck over every gpu test binary, racecheck over the kernels with shared memory.
  for t in "$build"/tests/gpu/gpu_*; do
    [ -x "$t" ] || continue
    echo "== memcheck $t"
    timeout 300 compute-sanitizer --tool memcheck --error-exitcode 9 "$t" --gtest_brief=1 || status=1
  done 2>&1 | tee "$out/sanitizer.log"
  for t in "$build"/tests/gpu/gpu_*; do
    [ -x "$t" ] || continue
    echo "== racecheck $t"
    timeout 300 compute-sanitizer --tool racecheck --error-exitcode 9 "$t" --gtest_brief=1 || status=1
  done 2>&1 | tee -a "$out/sanitizer.log"
fi

"$build/apps/ceiling" bench kernels --filter "$filter" --reps "$reps" --out "$out/kernels.json" 2>&1 |
  tee "$out/bench.log" || status=1
if [ -f "$out/kernels.json" ]; then
  python3 bench/torch_baseline.py --merge "$out/kernels.json" --filter "$filter" 2>&1 | tee -a "$out/bench.log" || status=1
fi
exit $status
