#!/usr/bin/env bash
# Stages what a device run needs into a small carry-able folder (the full build tree is far over
# the 64 MiB a device call may carry): the `ceiling` binary, gpu test binaries, the shared
# libraries the GPU machine lacks and the commit SHA (scripts/device/bundle.sh).
#   bench/stage_device_build.sh [BUILD_DIR=build/cuda] [STAGE_DIR=build/kernels-dev] [--engine]
# Default: the kernel-library tests (bench/run_kernels_on_gpu.sh). --engine: the engine tests and
# the llama3 tokenizer for make-test-model instead (bench/run_latency_on_gpu.sh STAGE_DIR).
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build/cuda}
stage=${2:-build/kernels-dev}
engine=0
[ "${3:-}" = --engine ] && engine=1
rm -rf "$stage"
mkdir -p "$stage/apps" "$stage/tests/gpu"
cp "$build/apps/ceiling" "$stage/apps/"
if [ $engine = 1 ]; then
  tests="engine_cuda_ops engine_cuda_parity engine_batch engine_tp gemv_quant gemv_fused gemm_skinny
         attention_decode attention_prefill rope_kv linear linear_fp8"
  tok=data/tokenizers/llama3
  mkdir -p "$stage/devdata/llama3"
  cp "$tok"/tokenizer.json "$tok"/tokenizer_config.json "$stage/devdata/llama3/"
else
  tests="elementwise rope_kv linear linear_fp8 gemv_fused gemv_quant gemm_skinny sampling attention_decode
         attention_prefill"
fi
for t in $tests; do
  cp "$build/tests/gpu/gpu_$t" "$stage/tests/gpu/"
done
if [ $engine = 1 ] && [ -f "$build/tests/dist/dist_test" ]; then  # the TP tests (CPU ranks too)
  mkdir -p "$stage/tests/dist"
  cp "$build/tests/dist/dist_test" "$stage/tests/dist/"
fi
strip --strip-debug "$stage/apps/ceiling" "$stage"/tests/*/* 2>/dev/null || true
scripts/device/bundle.sh "$stage"
du -sh "$stage"
