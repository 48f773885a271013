#!/usr/bin/env bash
# On the GPU machine: the decode graphs' tuned cuBLASLt GEMMs (issue #13) and the W8A8 path of
# fp8 projections past the GEMV (issue #16). PHASE=1: the GPU tests of both, the W8A8 kernel
# cases with torch's _scaled_mm beside them, `ceiling bench latency` on a random-weight model —
# batched decode (512 in / 256 out) with the autotuner on and off, and the time to first token of
# an 8k prompt, bf16 against fp8. PHASE=2: `ceiling bench throughput` 1000 × 1024 / 1024, bf16,
# and fp8 weights with an fp8 KV cache.
#   OUTDIR/kernels-w8a8.json, OUTDIR/latency-<gpu>-<date>-<preset>-<tag>.json,
#   OUTDIR/throughput-<gpu>-<date>-<preset>-<tag>.json
# Usage: bench/run_gemm_on_gpu.sh OUTDIR [BUILD_DIR]   (from the repository root; BUILD_DIR a
#        stage of bench/stage_device_build.sh --engine, default build/engine-dev)
# Env: PHASE (1 or 2), PRESET (default llama-3.1-8b), SKIP_TESTS=1, SKIP_KERNELS=1, SKIP_LATENCY=1,
#      LATENCY ("tag:flags;..." overrides the latency runs), THROUGHPUT (the same for phase 2).
set -uo pipefail
out=${1:?usage: run_gemm_on_gpu.sh OUTDIR [BUILD_DIR]}
build=${2:-build/engine-dev}
# shellcheck disable=SC1091
source bench/gpu_run_common.sh
phase=${PHASE:-1}
preset=${PRESET:-llama-3.1-8b}

# "tag:flags" items separated by ';'; each runs `ceiling bench SUB --model DIR flags`.
bench_each() {
  local sub=$1 list=$2 item tag flags
  IFS=';' read -ra items <<<"$list"
  for item in "${items[@]}"; do
    tag=${item%%:*} flags=${item#*:}
    # shellcheck disable=SC2086
    run "bench $sub $preset $tag" 560 "$bin" bench "$sub" --model "$dir" $flags \
      --out "$out/$sub-$gpu-$day-$preset-$tag.json"
  done
}

if [ "$phase" = 1 ]; then
  [ "${SKIP_TESTS:-0}" = 1 ] ||
    run_gpu_tests "linear_fp8 linear engine_cuda_parity engine_cuda_ops engine_batch"
  [ "${SKIP_KERNELS:-0}" = 1 ] ||
    kernels_with_baselines W8A8 "$out/kernels-w8a8.json" '^linear_fp8' '^linear_fp8_w8a8 '
  [ "${SKIP_LATENCY:-0}" = 1 ] || make_model "$preset"
  [ "${SKIP_LATENCY:-0}" = 1 ] || bench_each latency "${LATENCY:-bf16-b64:--batch 64 --input-len 512 --output-len 256;\
bf16-b64-untuned:--batch 64 --input-len 512 --output-len 256 --no-gemm-autotune;\
fp8-b64:--batch 64 --input-len 512 --output-len 256 -q fp8;\
bf16-b1-i8192:--batch 1 --input-len 8192 --output-len 16;\
fp8-b1-i8192:--batch 1 --input-len 8192 --output-len 16 -q fp8}"
else
  make_model "$preset"
  bench_each throughput "${THROUGHPUT:-random-bf16:--device cuda --num-prompts 1000 --input-len 1024 --output-len 1024;\
random-fp8-kvfp8:--device cuda --num-prompts 1000 --input-len 1024 --output-len 1024 -q fp8 --kv-cache-dtype fp8}"
fi
python3 - "$out" <<'PY' || true
import glob, json, sys
for p in sorted(glob.glob(f"{sys.argv[1]}/latency-*.json")):
    r = json.load(open(p))
    tuned = sum(t["first_us"] - t["best_us"] for t in r.get("gemm_tuning", []))
    print(f"{p.split('/')[-1]}: {r['ms_per_token']:.3f} ms/token {r['pct_of_floor']:.1f}% of floor "
          f"ttft {r['ttft_ms']:.1f} ms; tuned shapes {len(r.get('gemm_tuning', []))}, "
          f"{tuned:.1f} us saved a set")
for p in sorted(glob.glob(f"{sys.argv[1]}/throughput-*.json")):
    r = json.load(open(p))
    print(f"{p.split('/')[-1]}: {r['output_tokens_per_s']:.0f} tok/s predicted "
          f"{r['predicted_output_tokens_per_s']:.0f}, preemptions {r['preemptions']}")
PY
exit $status
