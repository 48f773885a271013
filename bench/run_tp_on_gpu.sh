#!/usr/bin/env bash
# On a machine with >= 2 GPUs: tensor parallelism (issue #17). The TP tests (CPU and GPU), a
# generate smoke (stories260K, TP 1 vs 2 on cuda), `ceiling bench allreduce` (NCCL beside the
# one-shot P2P kernel at decode sizes, written into a copy of the measured ceilings), then
# `ceiling bench latency` batch 1 on a random-weight Llama-3.1-8B-shaped model at TP 1, TP 2 (NCCL)
# and TP 2 with the custom all-reduce up to the measured crossover, and the speedup (target 1.6x).
#   OUTDIR/allreduce-<gpu>x<N>-<date>.json, OUTDIR/latency-<gpu>-<date>-<preset>-tp<N>[-custom].json
# Usage: bench/run_tp_on_gpu.sh OUTDIR [BUILD_DIR]   (from the repository root)
# Env: MODELS_DIR (default /tmp/ceiling-latency-models), PRESET (default llama-3.1-8b),
#      TP (default 2), SKIP_TESTS=1.
set -uo pipefail
out=${1:?usage: run_tp_on_gpu.sh OUTDIR [BUILD_DIR]}
build=${2:-build/release}
mkdir -p "$out"
# shellcheck disable=SC1091
[ -f scripts/device/env.sh ] && source scripts/device/env.sh "$build"
bin="$build/apps/ceiling"
tp=${TP:-2}
preset=${PRESET:-llama-3.1-8b}
models=${MODELS_DIR:-/tmp/ceiling-latency-models}
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | sed 's/NVIDIA //; s/ .*//' |
      tr 'A-Z' 'a-z')
day=$(date -u +%Y%m%d)
status=0
nvidia-smi topo -m

if [ "${SKIP_TESTS:-0}" != 1 ]; then
  for t in tests/gpu/gpu_engine_tp tests/dist/dist_test; do
    echo "== $t"
    timeout 600 "$build/$t" || { echo "FAILED: $t"; status=1; }
  done
  echo "== generate smoke: stories260K greedy on cuda, TP 1 vs TP $tp"
  for n in 1 "$tp"; do
    timeout 120 "$bin" generate --model models/stories260K --prompt "Once upon a time" \
      --max-tokens 64 --temperature 0 --device cuda --tensor-parallel-size "$n" \
      >"$out/smoke-tp$n.txt" || { echo "FAILED: generate tp $n"; status=1; }
  done
  cmp "$out/smoke-tp1.txt" "$out/smoke-tp$tp.txt" && echo "same text" ||
    echo "texts differ (allowed only at a bf16 near-tie): see $out/smoke-tp*.txt"
fi

echo "== bench allreduce, $tp GPUs"
ceil="$out/ceilings-$gpu.json"
[ -f "data/ceilings/$gpu.json" ] && cp "data/ceilings/$gpu.json" "$ceil"
ar="$out/allreduce-${gpu}x$tp-$day.json"
timeout 300 "$bin" bench allreduce --tensor-parallel-size "$tp" \
  --sizes 4K,8K,16K,32K,64K,128K,256K,512K,1M --out "$ar" \
  $([ -f "$ceil" ] && echo --update-ceilings "$ceil") || { echo "FAILED: bench allreduce"; status=1; }
cross=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['suggested_custom_all_reduce_max_bytes'])" "$ar" 2>/dev/null || echo 0)

dir="$models/$preset"
if [ ! -f "$dir/config.json" ]; then
  echo "== make-test-model $preset"
  "$bin" make-test-model --preset "$preset" --out "$dir" || { echo "FAILED: make-test-model"; exit 1; }
fi
for run in "1:" "$tp:" "$tp:custom"; do
  n=${run%%:*} tag=${run#*:}
  [ "$tag" = custom ] && [ "$cross" = 0 ] && continue
  f="$out/latency-$gpu-$day-$preset-tp$n$([ -n "$tag" ] && echo "-$tag").json"
  echo "== bench latency $preset tp $n $tag"
  timeout 600 "$bin" bench latency --model "$dir" --batch 1 --input-len 128 --output-len 256 \
    --tensor-parallel-size "$n" $([ "$tag" = custom ] && echo --custom-all-reduce-max-bytes "$cross") \
    --out "$f" || { echo "FAILED: bench latency tp $n $tag"; status=1; }
done
python3 - "$out" "$gpu" "$day" "$preset" "$tp" <<'PY' || true
import glob, json, sys
out, gpu, day, preset, tp = sys.argv[1:]
runs = {p: json.load(open(p)) for p in sorted(glob.glob(f"{out}/latency-{gpu}-{day}-{preset}-tp*.json"))}
base = next((r for p, r in runs.items() if p.endswith("-tp1.json")), None)
for p, r in runs.items():
    s = r["tokens_per_s"] / base["tokens_per_s"] if base else float("nan")
    print(f"{p}: {r['tokens_per_s']:.1f} tok/s, {r['ms_per_token']:.3f} ms/token, "
          f"predicted {r['predicted_ms_per_token']:.3f} ms, {s:.2f}x TP 1 (target 1.6x at TP 2)")
PY
exit $status
