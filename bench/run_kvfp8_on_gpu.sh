#!/usr/bin/env bash
# On the GPU machine: the fp8 (E4M3) KV cache of issue #16. GPU tests of the kernels that read or
# write it (decode / prefill attention, RoPE + KV write) and of the engine (CudaOps against CpuOps'
# E4M3 rounding; the dense and quantized tests for regressions), the attention kernels' benchmark
# with the torch baselines merged (SDPA on dequantized K/V for the fp8 cases), then `ceiling bench
# latency` bf16 against fp8 KV on a random-weight model generated here, and (THROUGHPUT=1)
# `ceiling bench throughput` 1000 × 1024 / 1024 with each cache:
#   OUTDIR/kernels-attention.json, OUTDIR/latency-<gpu>-<date>-<preset>-kv<dtype>-b<B>-i<I>.json,
#   OUTDIR/throughput-<gpu>-<date>-<preset>-random-kv<dtype>.json
# Usage: bench/run_kvfp8_on_gpu.sh OUTDIR [BUILD_DIR]   (from the repository root; BUILD_DIR a
#        stage of bench/stage_device_build.sh --engine, default build/engine-dev)
# Env: TESTS (names of tests/gpu/gpu_* to run), SKIP_TESTS=1, SKIP_KERNELS=1, SKIP_LATENCY=1,
#      THROUGHPUT=1, PRESET (default llama-3.1-8b),
#      RUNS (default "bf16:1:128 fp8:1:128 bf16:32:1024 fp8:32:1024": kv:batch:input triples,
#      256 tokens out), TP_KV (default "fp8 bf16": the throughput runs' caches), COPY_TO (a
#      folder each throughput result is also copied to as soon as it exists).
set -uo pipefail
out=${1:?usage: run_kvfp8_on_gpu.sh OUTDIR [BUILD_DIR]}
build=${2:-build/engine-dev}
# shellcheck disable=SC1091
source bench/gpu_run_common.sh

[ "${SKIP_TESTS:-0}" = 1 ] ||
  run_gpu_tests "${TESTS:-attention_decode attention_prefill rope_kv gemv_quant engine_cuda_parity \
    engine_cuda_ops engine_batch}"

if [ "${SKIP_KERNELS:-0}" != 1 ]; then
  kernels_with_baselines attention "$out/kernels-attention.json" '^attention_decode' \
    '^attention_decode '
  run "bench kernels: prefill over an fp8 cache" 300 "$bin" bench kernels \
    --filter '^attention_prefill .*Hkv=8 D=128 BS=16( kv=fp8| mma_sync|$)' \
    --out "$out/kernels-attention-prefill.json"
fi

preset=${PRESET:-llama-3.1-8b}
if [ "${SKIP_LATENCY:-0}" != 1 ] || [ "${THROUGHPUT:-0}" = 1 ]; then
  make_model "$preset"
fi

if [ "${SKIP_LATENCY:-0}" != 1 ]; then
  for r in ${RUNS:-bf16:1:128 fp8:1:128 bf16:32:1024 fp8:32:1024}; do
    IFS=: read -r kv b in <<<"$r"
    flag=()
    [ "$kv" != bf16 ] && flag=(--kv-cache-dtype "$kv")
    run "bench latency $preset kv $kv batch $b input $in" 400 "$bin" bench latency --model "$dir" \
      --batch "$b" --input-len "$in" --output-len 256 "${flag[@]}" \
      --out "$out/latency-$gpu-$day-$preset-kv$kv-b$b-i$in.json"
  done
  python3 - "$out" <<'PY' || true
import glob, json, sys
runs = {}
for p in sorted(glob.glob(f"{sys.argv[1]}/latency-*-kv*.json")):
    r = json.load(open(p))
    runs[(r["kv_cache_dtype"], r["batch"], r["input_len"])] = r
for (kv, b, i), r in sorted(runs.items(), key=lambda kv: (kv[0][1], kv[0][2], kv[0][0])):
    base = runs.get(("bf16", b, i))
    x = r["tokens_per_s"] / base["tokens_per_s"] if base else float("nan")
    print(f"kv {kv:>4} b{b:<3} in {i:<5} {r['tokens_per_s']:8.1f} tok/s {r['ms_per_token']:7.3f} "
          f"ms/token {x:5.2f}x bf16  {r['pct_of_floor']:5.1f}% of floor "
          f"{r['floor_ms_per_token']:.3f} ms  predicted {r['predicted_ms_per_token']:.3f} ms")
PY
fi

if [ "${THROUGHPUT:-0}" = 1 ]; then
  for kv in ${TP_KV:-fp8 bf16}; do
    flag=()
    [ "$kv" != bf16 ] && flag=(--kv-cache-dtype "$kv")
    run "bench throughput $preset kv $kv" 300 "$bin" bench throughput --model "$dir" --device cuda \
      --num-prompts 1000 --input-len 1024 --output-len 1024 --quick-ceilings "${flag[@]}" \
      --out "$out/throughput-$gpu-$day-$preset-random-kv$kv.json"
    [ -n "${COPY_TO:-}" ] && cp "$out"/throughput-*.json "$COPY_TO"/ 2>/dev/null
  done
fi
exit $status
