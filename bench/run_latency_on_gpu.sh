#!/usr/bin/env bash
# On the GPU machine: the engine's GPU tests, then `ceiling bench latency` (batch 1, bf16,
# input 128, output 256) on random-weight Llama-3.2-1B- and Llama-3.1-8B-shaped models generated
# there, graphs on (and 1B with --no-graphs for the record), and the transformers baseline of
# the same model directories in the same session, merged into the result files:
#   OUTDIR/latency-<gpu>-<date>-<model>[-eager].json   (the bench/results/ format)
#   OUTDIR/hf-<gpu>-<date>-<model>.json
# Usage: bench/run_latency_on_gpu.sh OUTDIR [BUILD_DIR]   (from the repository root)
# Env: MODELS_DIR (default /tmp/ceiling-latency-models: models are written on the device's disk),
#      TOKENIZER_DIR (llama3 tokenizer for make-test-model; default BUILD_DIR/devdata/llama3),
#      SKIP_TESTS=1, SKIP_HF=1, PRESETS="llama-3.2-1b llama-3.1-8b", SANITIZE=1 (memcheck the
#      ops test), PROFILE=1 (ncu: GPU time per kernel of one decode step, summarized),
#      SWEEP_BATCHES="32" (also these batch sizes, into OUTDIR/sweep/).
set -uo pipefail
out=${1:?usage: run_latency_on_gpu.sh OUTDIR [BUILD_DIR]}
build=${2:-build/enginecuda}
mkdir -p "$out"
# shellcheck disable=SC1091
source scripts/device/env.sh "$build"
bin="$build/apps/ceiling"
models=${MODELS_DIR:-/tmp/ceiling-latency-models}
tok=${TOKENIZER_DIR:-$build/devdata/llama3}
[ -f "$tok/tokenizer.json" ] || tok=models/stories260K  # any tokenizer: only logits matter here
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | sed 's/NVIDIA //; s/ .*//' |
      tr 'A-Z' 'a-z')
day=$(date -u +%Y%m%d)
status=0
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,clocks.max.sm,clocks.max.mem \
  --format=csv

if [ "${SKIP_TESTS:-0}" != 1 ]; then
  for t in gpu_engine_cuda_ops gpu_engine_cuda_parity; do
    echo "== $t"
    timeout 300 "$build/tests/gpu/$t" --gtest_brief=0 || { echo "FAILED: $t"; status=1; }
  done
fi

if [ "${SANITIZE:-0}" = 1 ]; then
  echo "== compute-sanitizer memcheck: gpu_engine_cuda_ops"
  timeout 150 compute-sanitizer --tool memcheck --leak-check no --error-exitcode 3 \
    "$build/tests/gpu/gpu_engine_cuda_ops" --gtest_filter=-*Latency* 2>&1 | tail -25 ||
    { echo "FAILED: memcheck"; status=1; }
fi

if [ "${SKIP_TESTS:-0}" != 1 ]; then
  echo "== generate smoke: stories260K greedy, cpu vs cuda (graphs) vs cuda --no-graphs"
  for dev in "cpu" "cuda" "cuda --no-graphs"; do
    # shellcheck disable=SC2086
    timeout 120 "$bin" generate --model models/stories260K --prompt "Once upon a time" \
      --max-tokens 64 --temperature 0 --device $dev || { echo "FAILED: generate $dev"; status=1; }
  done
fi

for preset in ${PRESETS:-llama-3.2-1b llama-3.1-8b}; do
  dir="$models/$preset"
  if [ ! -f "$dir/config.json" ]; then
    echo "== make-test-model $preset"
    "$bin" make-test-model --preset "$preset" --out "$dir" --tokenizer-dir "$tok" ||
      { echo "FAILED: make-test-model $preset"; status=1; continue; }
  fi
  echo "== generate smoke: $preset on cuda"
  timeout 120 "$bin" generate --model "$dir" --prompt "The capital of France is" --max-tokens 8 \
    --temperature 0 --device cuda || { echo "FAILED: generate $preset"; status=1; }
  runs=("graphs:")
  [ "$preset" = llama-3.2-1b ] && runs+=("eager:--no-graphs")
  files=()
  for r in "${runs[@]}"; do
    tag=${r%%:*} flag=${r#*:}
    f="$out/latency-$gpu-$day-$preset$([ "$tag" = eager ] && echo -eager).json"
    echo "== bench latency $preset $tag"
    # shellcheck disable=SC2086
    timeout 300 "$bin" bench latency --model "$dir" --batch 1 --input-len 128 --output-len 256 \
      $flag --out "$f" || { echo "FAILED: bench latency $preset $tag"; status=1; continue; }
    files+=("$f")
  done
  for b in ${SWEEP_BATCHES:-}; do  # larger batches, graphs on (padded buckets, cuBLASLt at M > 16)
    mkdir -p "$out/sweep"
    echo "== bench latency $preset batch $b"
    timeout 300 "$bin" bench latency --model "$dir" --batch "$b" --input-len 128 --output-len 256 \
      --out "$out/sweep/latency-$gpu-$day-$preset-b$b.json" ||
      { echo "FAILED: bench latency $preset batch $b"; status=1; }
  done
  if [ "${SKIP_HF:-0}" != 1 ]; then
    echo "== transformers baseline $preset"
    PYTHONUNBUFFERED=1 timeout 300 python3 bench/hf_baseline.py --model "$dir" --batch 1 \
      --input-len 128 --output-len 256 --out "$out/hf-$gpu-$day-$preset.json" \
      --merge "${files[@]}" >/dev/null || { echo "FAILED: hf baseline $preset"; status=1; }
  fi
done

if [ "${PROFILE:-0}" = 1 ]; then
  # Per-kernel GPU time of one replayed decode step (ncu, kernels serialized, clocks and caches
  # left alone); graph gaps are the step's time minus this sum.
  for preset in ${PRESETS:-llama-3.2-1b llama-3.1-8b}; do
    echo "== ncu: one decode step of $preset"
    timeout 120 ncu --clock-control none --cache-control none --profile-from-start off \
      --metrics gpu__time_duration.sum --csv --log-file "/tmp/ncu-$preset.csv" \
      "$bin" bench latency --model "$models/$preset" --batch 1 --input-len 128 --output-len 8 \
      --profile-step 4 --quick-ceilings >/dev/null || { echo "FAILED: ncu $preset"; status=1; }
    python3 bench/ncu_kernel_summary.py "/tmp/ncu-$preset.csv" || true
  done
fi

echo "== summary ($gpu)"
python3 - "$out" <<'PY'
import glob, json, os, sys
for f in sorted(glob.glob(os.path.join(sys.argv[1], "latency-*.json")) +
               glob.glob(os.path.join(sys.argv[1], "sweep", "latency-*.json"))):
    r = json.load(open(f))
    b = r.get("baseline_tokens_per_s")
    print(f"{os.path.basename(f):52s} {r['tokens_per_s']:8.1f} tok/s  {r['ms_per_token']:.3f} ms/tok"
          f"  floor {r['floor_ms_per_token']:.3f} ms ({r['pct_of_floor']:.1f}%)  ttft {r['ttft_ms']:.1f} ms"
          f"  hf {b if b is None else round(b, 1)}")
PY
exit $status
