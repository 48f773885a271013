#!/usr/bin/env bash
# On the GPU machine: issue #16's device run. The quantized GEMV's GPU tests and the engine's
# (CudaOps against CpuOps with fp8 / int4 weights, and the dense tests for regressions), the
# quantized kernels' benchmark with the torch baselines merged, then `ceiling bench latency`
# (128 in / 256 out, graphs on) on a random-weight model generated here, bf16 against fp8 and
# int4 quantized on load:
#   OUTDIR/kernels-lowprec.json, OUTDIR/latency-<gpu>-<date>-<preset>-<weights>-b<batch>.json
# Usage: bench/run_lowprec_on_gpu.sh OUTDIR [BUILD_DIR]   (from the repository root; BUILD_DIR a
#        stage of bench/stage_device_build.sh --engine, default build/engine-dev)
# Env: SKIP_TESTS=1, SKIP_KERNELS=1, SKIP_LATENCY=1, PRESET (default llama-3.1-8b),
#      RUNS (default "bf16:1 fp8:1 int4:1": weights:batch pairs).
set -uo pipefail
out=${1:?usage: run_lowprec_on_gpu.sh OUTDIR [BUILD_DIR]}
build=${2:-build/engine-dev}
# shellcheck disable=SC1091
source bench/gpu_run_common.sh

[ "${SKIP_TESTS:-0}" = 1 ] ||
  run_gpu_tests "gemv_quant gemv_fused engine_cuda_parity engine_cuda_ops engine_batch"
[ "${SKIP_KERNELS:-0}" = 1 ] ||
  kernels_with_baselines "quantized GEMV" "$out/kernels-lowprec.json" '^linear_gemv_quant' \
    '^linear_gemv_quant '

if [ "${SKIP_LATENCY:-0}" != 1 ]; then
  preset=${PRESET:-llama-3.1-8b}
  make_model "$preset"
  for r in ${RUNS:-bf16:1 fp8:1 int4:1}; do
    w=${r%%:*} b=${r#*:}
    flag=()
    [ "$w" != bf16 ] && flag=(--quantization "$w")
    run "bench latency $preset $w batch $b" 400 "$bin" bench latency --model "$dir" --batch "$b" \
      --input-len 128 --output-len 256 "${flag[@]}" \
      --out "$out/latency-$gpu-$day-$preset-$w-b$b.json"
  done
  python3 - "$out" <<'PY' || true
import glob, json, sys
runs = {}
for p in sorted(glob.glob(f"{sys.argv[1]}/latency-*.json")):
    r = json.load(open(p))
    runs[(r["weights"], r["batch"])] = r
for (w, b), r in sorted(runs.items(), key=lambda kv: (kv[0][1], kv[0][0])):
    base = runs.get(("bf16", b))
    x = r["tokens_per_s"] / base["tokens_per_s"] if base else float("nan")
    print(f"{w:>5} b{b:<3} {r['tokens_per_s']:8.1f} tok/s {r['ms_per_token']:7.3f} ms/token "
          f"{x:5.2f}x bf16  {r['pct_of_floor']:5.1f}% of floor {r['floor_ms_per_token']:.3f} ms  "
          f"predicted {r['predicted_ms_per_token']:.3f} ms  ttft {r['ttft_ms']:.1f} ms")
PY
fi
exit $status
