#!/usr/bin/env bash
# On a machine with >= 2 GPUs: tensor parallelism (issue #17). The TP tests (CPU and GPU), a
# generate smoke (stories260K, TP 1 vs the largest TP), `ceiling bench allreduce` per TP size
# (NCCL beside the one-shot P2P kernel, eager and in a CUDA graph), then `ceiling bench latency`
# batch 1 on a random-weight model of PRESET at TP 1 (BASE_TP) and each size in TPS, with NCCL
# and with the custom all-reduce up to the measured crossover, and optionally the largest TP as
# two processes of half the GPUs each (RANK / WORLD_SIZE / MASTER_ADDR / MASTER_PORT).
#   OUTDIR/allreduce-<gpu>x<N>-<date>.json, OUTDIR/latency-<gpu>-<date>-<preset>-tp<N>[-tag].json
# Usage: bench/run_tp_on_gpu.sh OUTDIR [BUILD_DIR]   (from the repository root)
# Env: PRESET (llama-3.1-8b), TPS ("2"), BASE_TP (1; 0 skips the one-GPU baseline, e.g. for a
#      model that does not fit one GPU), MODELS_DIR (default /dev/shm/ceiling-models when it has
#      room for the model, else /tmp/ceiling-models), SKIP_TESTS=1, SKIP_ALLREDUCE=1,
#      SKIP_DIST=1 (the CPU dist_test), SKIP_CUSTOM=1, MULTIPROC=1,
#      CUSTOM_BYTES (the custom all-reduce's limit when SKIP_ALLREDUCE=1; else bench
#      allreduce's crossover).
set -uo pipefail
out=${1:?usage: run_tp_on_gpu.sh OUTDIR [BUILD_DIR]}
build=${2:-build/release}
# shellcheck disable=SC1091
source bench/gpu_run_common.sh
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
tps=${TPS:-2}
base=${BASE_TP:-1}
preset=${PRESET:-llama-3.1-8b}
maxtp=$(echo "$tps" | tr ' ' '\n' | sort -n | tail -1)
nvidia-smi topo -m

if [ "${SKIP_TESTS:-0}" != 1 ]; then
  run gpu_engine_tp 600 "$build/tests/gpu/gpu_engine_tp"
  [ "${SKIP_DIST:-0}" = 1 ] || run dist_test 600 "$build/tests/dist/dist_test"
  for n in 1 "$maxtp"; do
    echo "== generate smoke tp $n"
    timeout 120 "$bin" generate --model models/stories260K --prompt "Once upon a time" \
      --max-tokens 64 --temperature 0 --device cuda --tensor-parallel-size "$n" \
      >"$out/smoke-tp$n.txt" || { echo "FAILED: generate smoke tp $n"; status=1; }
  done
  cmp "$out/smoke-tp1.txt" "$out/smoke-tp$maxtp.txt" && echo "same text" ||
    echo "texts differ (allowed only at a bf16 near-tie): see $out/smoke-tp*.txt"
fi

# The measured ceilings with the all-reduce latency of the smallest TP size in TPS written in
# (OUTDIR/ceilings-<gpu>.json, for data/ceilings/ after review).
ceil="$out/ceilings-$gpu.json"
src_ceil=data/ceilings/$gpu.json
[ -f "$src_ceil" ] || src_ceil=data/ceilings/$gpu-sxm.json
[ -f "$src_ceil" ] && cp "$src_ceil" "$ceil"
mintp=$(echo "$tps" | tr ' ' '\n' | sort -n | head -1)
declare -A cross
for n in $tps; do
  cross[$n]=${CUSTOM_BYTES:-0}
  [ "${SKIP_ALLREDUCE:-0}" = 1 ] && continue
  ar="$out/allreduce-${gpu}x$n-$day.json"
  upd=()
  [ "$n" = "$mintp" ] && [ -f "$ceil" ] && upd=(--update-ceilings "$ceil")
  run "bench allreduce tp $n" 300 "$bin" bench allreduce --tensor-parallel-size "$n" \
    --sizes 4K,8K,16K,32K,64K,128K,256K,512K,1M --out "$ar" "${upd[@]}"
  cross[$n]=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['suggested_custom_all_reduce_max_bytes'])" "$ar" 2>/dev/null || echo 0)
done

# A model in RAM-backed /dev/shm when it fits (no disk write for a 141 GB 70B), else /tmp.
need_gb=$(python3 -c "print({'llama-3.1-70b': 150}.get('$preset', 20))")
shm_gb=$(df -BG --output=avail /dev/shm 2>/dev/null | tail -1 | tr -dc 0-9)
models=${MODELS_DIR:-$([ "${shm_gb:-0}" -gt "$need_gb" ] && echo /dev/shm/ceiling-models || echo /tmp/ceiling-models)}
dir="$models/$preset"
if [ ! -f "$dir/config.json" ]; then
  run "make-test-model $preset in $models" 600 "$bin" make-test-model --preset "$preset" \
    --out "$dir" --tokenizer-dir "$tok"
fi
latency() {  # latency TAG N [extra flags]
  local tag=$1 n=$2
  shift 2
  run "bench latency $preset tp $n $tag" 600 "$bin" bench latency --model "$dir" --batch 1 \
    --input-len 128 --output-len 256 --tensor-parallel-size "$n" "$@" \
    --out "$out/latency-$gpu-$day-$preset-tp$n$tag.json"
}
[ "$base" = 1 ] && latency "" 1
for n in $tps; do
  latency "" "$n" --custom-all-reduce-max-bytes 0  # NCCL alone
  if [ "${SKIP_CUSTOM:-0}" != 1 ] && [ "${cross[$n]}" != 0 ]; then
    latency -custom "$n" --custom-all-reduce-max-bytes "${cross[$n]}"
  fi
done

if [ "${MULTIPROC:-0}" = 1 ]; then
  # The largest TP as two processes on this host, half the GPUs each: process 1 is a worker
  # that runs the steps process 0 sends (the multi-host path, over loopback).
  half=$((maxtp / 2))
  gpus0=$(seq -s, 0 $((half - 1)))
  gpus1=$(seq -s, "$half" $((maxtp - 1)))
  echo "== bench latency $preset tp $maxtp as 2 processes (GPUs $gpus0 | $gpus1)"
  export MASTER_ADDR=127.0.0.1 MASTER_PORT=29631 WORLD_SIZE=2
  CUDA_VISIBLE_DEVICES=$gpus1 RANK=1 timeout 600 "$bin" bench latency --model "$dir" --batch 1 \
    --input-len 128 --output-len 256 --tensor-parallel-size "$maxtp" >"$out/worker1.log" 2>&1 &
  wpid=$!
  CUDA_VISIBLE_DEVICES=$gpus0 RANK=0 timeout 600 "$bin" bench latency --model "$dir" --batch 1 \
    --input-len 128 --output-len 256 --tensor-parallel-size "$maxtp" \
    --out "$out/latency-$gpu-$day-$preset-tp$maxtp-2proc.json" || { echo "FAILED: 2proc driver"; status=1; }
  wait $wpid || { echo "FAILED: 2proc worker (exit $?)"; status=1; }
  cat "$out/worker1.log"
  unset MASTER_ADDR MASTER_PORT WORLD_SIZE
fi

python3 - "$out" "$gpu" "$day" "$preset" <<'PY' || true
import glob, json, sys
out, gpu, day, preset = sys.argv[1:]
runs = {p: json.load(open(p)) for p in sorted(glob.glob(f"{out}/latency-{gpu}-{day}-{preset}-tp*.json"))}
base = next((r for p, r in runs.items() if p.endswith("-tp1.json")), None)
for p, r in runs.items():
    s = r["tokens_per_s"] / base["tokens_per_s"] if base else float("nan")
    print(f"{p}: {r['tokens_per_s']:.1f} tok/s, {r['ms_per_token']:.3f} ms/token, "
          f"predicted {r['predicted_ms_per_token']:.3f} ms, {s:.2f}x TP 1, "
          f"{r.get('pct_of_floor_with_allreduce', float('nan')):.1f}% of floor+allreduce")
PY
exit $status
