# Sourced by the bench/run_*_on_gpu.sh scripts after they set `out` and `build`: makes OUTDIR,
# puts the staged build's libraries on the path, and defines
#   bin     the ceiling binary;        tok     a tokenizer for make-test-model (llama3 if staged)
#   gpu     e.g. "h100" (file names);  day     UTC date, YYYYMMDD
#   status  0 until a run fails;       run NAME TIMEOUT CMD...  logs, times, records a failure
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
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,memory.total --format=csv
