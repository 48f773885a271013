# Sourced by the bench/run_*_on_gpu.sh scripts after they set `out` and `build`: makes OUTDIR,
# puts the staged build's libraries on the path, and defines
#   bin     the ceiling binary;        tok     a tokenizer for make-test-model (llama3 if staged)
#   gpu     e.g. "h100" (file names);  day     UTC date, YYYYMMDD
#   status  0 until a run fails;       run NAME TIMEOUT CMD...  logs, times, records a failure
#   run_gpu_tests "NAME ..."           each staged tests/gpu/gpu_NAME, brief output
#   kernels_with_baselines LABEL OUT FILTER BASELINE_FILTER
#                                      `bench kernels` of FILTER into OUT, torch's times merged
#   make_model PRESET                  a random-weight model of PRESET in $dir (made once; /dev/shm
#                                      when it has room, else /tmp; MODELS_DIR overrides)
# and prints the GPU, driver and clocks.
mkdir -p "$out"
# shellcheck disable=SC1091
source scripts/device/env.sh "$build"
bin="$build/apps/ceiling"
tok=$build/devdata/llama3
[ -f "$tok/tokenizer.json" ] || tok=models/stories260K
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | sed 's/NVIDIA //; s/ .*//' |
      tr 'A-Z' 'a-z')
day=$(date -u +%Y%m%d)
status=0
run() {
  echo "== $1"
  local t0=$SECONDS
  timeout "$2" "${@:3}" || { echo "FAILED: $1"; status=1; }
  echo "   ($1: $((SECONDS - t0)) s)"
}
run_gpu_tests() {
  local t
  for t in $1; do
    [ -x "$build/tests/gpu/gpu_$t" ] || continue
    run "gpu_$t" 420 "$build/tests/gpu/gpu_$t" --gtest_brief=1
  done
}
kernels_with_baselines() {
  run "bench kernels: $1" 400 "$bin" bench kernels --filter "$3" --out "$2"
  [ -f "$2" ] && run "torch baselines: $1" 400 python3 bench/torch_baseline.py --merge "$2" \
    --filter "$4"
}
make_model() {
  local shm_gb models
  shm_gb=$(df -BG --output=avail /dev/shm 2>/dev/null | tail -1 | tr -dc 0-9)
  models=${MODELS_DIR:-$([ "${shm_gb:-0}" -gt 24 ] && echo /dev/shm/ceiling-models || echo /tmp/ceiling-models)}
  dir="$models/$1"
  [ -f "$dir/config.json" ] ||
    run "make-test-model $1 in $models" 600 "$bin" make-test-model --preset "$1" --out "$dir" \
      --tokenizer-dir "$tok"
}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,memory.total --format=csv
