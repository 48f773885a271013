#!/usr/bin/env bash
# On the GPU machine: the batch-first engine (issue: scheduler, block manager, model runner).
#  1. GPU tests: gpu_engine_batch (batched == alone up to near ties), gpu_engine_cuda_parity,
#     gpu_engine_cuda_ops.
#  2. Random-weight Llama-3.2-1B- and Llama-3.1-8B-shaped models written there (make-test-model).
#  3. bench latency through the engine: 1B and 8B at batch 1 (input 128, output 256), and the
#     8B batch sweep (BATCHES, input 512, output 256: context 512–768).
#  4. bench throughput, 8B: random 1000 × 1024 in / 1024 out (TP_PROMPTS, TP_OUT), and
#     prefix-shared 1000 × (2048 shared + 128 unique) in / 128 out with prefix caching on and off.
# Result files: OUTDIR/<kind>-<gpu>-<date>-<what>.json (the bench/results/ format).
# Usage: bench/run_engine_on_gpu.sh OUTDIR [BUILD_DIR]   (from the repository root)
#  5. PROFILE=1: ncu, GPU time per kernel of one pure decode step of the 8B at PROFILE_BATCHES.
# Env: SKIP_TESTS=1, SKIP_LATENCY=1, SKIP_THROUGHPUT=1, SKIP_PREFIX=1, BATCHES="64 256",
#      TP_PROMPTS=1000, TP_OUT=1024, MODELS_DIR=/tmp/ceiling-engine-models.
set -uo pipefail
out=${1:?usage: run_engine_on_gpu.sh OUTDIR [BUILD_DIR]}
build=${2:-build/engine-dev}
models=${MODELS_DIR:-/tmp/ceiling-engine-models}
# shellcheck source=bench/gpu_run_common.sh
source bench/gpu_run_common.sh

if [ "${SKIP_TESTS:-0}" != 1 ]; then
  for t in gpu_engine_batch gpu_engine_cuda_ops gpu_engine_cuda_parity; do
    run "$t" 300 "$build/tests/gpu/$t" --gtest_brief=0
  done
  run "generate stories260K cuda" 60 "$bin" generate --model models/stories260K \
    --prompt "Once upon a time" --max-tokens 32 --temperature 0 --device cuda
fi

for preset in llama-3.2-1b llama-3.1-8b; do
  [ -f "$models/$preset/config.json" ] ||
    run "make-test-model $preset" 300 "$bin" make-test-model --preset "$preset" \
      --out "$models/$preset" --tokenizer-dir "$tok"
done
m8=$models/llama-3.1-8b

if [ "${SKIP_LATENCY:-0}" != 1 ]; then
  for preset in llama-3.2-1b llama-3.1-8b; do
    run "latency $preset b1" 200 "$bin" bench latency --model "$models/$preset" --batch 1 \
      --input-len 128 --output-len 256 --quick-ceilings \
      --out "$out/latency-$gpu-$day-$preset.json"
  done
  for b in ${BATCHES:-64 256}; do
    run "latency 8b b$b" 200 "$bin" bench latency --model "$m8" --batch "$b" --input-len 512 \
      --output-len 256 --quick-ceilings --out "$out/latency-$gpu-$day-llama-3.1-8b-b$b.json"
  done
fi

if [ "${PROFILE:-0}" = 1 ]; then
  for b in ${PROFILE_BATCHES:-64 256}; do
    echo "== ncu: one decode step of the 8B at batch $b (context ~520)"
    timeout 240 ncu --clock-control none --cache-control none --profile-from-start off \
      --metrics gpu__time_duration.sum --csv --log-file "$out/ncu-8b-b$b.csv" \
      "$bin" bench latency --model "$m8" --batch "$b" --input-len 512 --output-len 16 \
      --profile-step 4 --quick-ceilings >/dev/null || { echo "FAILED: ncu b$b"; status=1; }
    python3 bench/ncu_kernel_summary.py "$out/ncu-8b-b$b.csv" | tee "$out/ncu-8b-b$b.txt" || true
  done
fi

if [ "${SKIP_THROUGHPUT:-0}" != 1 ]; then
  run "throughput 8b random" 420 "$bin" bench throughput --model "$m8" --device cuda \
    --num-prompts "${TP_PROMPTS:-1000}" --input-len 1024 --output-len "${TP_OUT:-1024}" \
    --quick-ceilings --out "$out/throughput-$gpu-$day-llama-3.1-8b-random.json"
fi
if [ "${SKIP_PREFIX:-0}" != 1 ]; then
  for pc in on off; do
    flag=$([ $pc = off ] && echo --no-enable-prefix-caching)
    # shellcheck disable=SC2086
    run "throughput 8b prefix-shared caching $pc" 300 "$bin" bench throughput --model "$m8" \
      --device cuda --num-prompts "${TP_PROMPTS:-1000}" --input-len 2176 --prefix-len 2048 \
      --output-len 128 --dataset prefix-shared $flag --quick-ceilings \
      --out "$out/throughput-$gpu-$day-llama-3.1-8b-prefix-$pc.json"
  done
fi
exit $status
