#!/usr/bin/env bash
# Regenerates the transformers goldens for the CpuOps parity test. Run on a machine with torch +
# transformers (the GPU machine), from the repository root:
#
#   tests/parity/run_on_gpu.sh OUT_DIR [CEILING_BIN]
#
# CEILING_BIN (default: the first of build/*/apps/ceiling) writes the tiny models with
# `ceiling make-test-model`; if no binary is usable there, write them here first with
#   for p in tiny-llama tiny-mistral tiny-qwen2 tiny-qwen3; do
#     build/engine/apps/ceiling make-test-model --preset $p --out OUT_DIR/models/$p --seed 1234
#   done
# and carry OUT_DIR/models: the script skips presets whose directory already exists.
# Then copy OUT_DIR/golden/* into tests/parity/golden/. Takes well under a minute (fp32 on CPU).
set -euo pipefail
out=${1:?usage: run_on_gpu.sh OUT_DIR [CEILING_BIN]}
bin=${2:-}
seed=1234
presets=(tiny-llama tiny-mistral tiny-qwen2 tiny-qwen3)
cd "$(dirname "$0")/../.."
mkdir -p "$out/models" "$out/golden"
for p in "${presets[@]}"; do
  [ -f "$out/models/$p/model.safetensors" ] && continue
  if [ -z "$bin" ]; then
    for c in build/*/apps/ceiling; do [ -x "$c" ] && bin=$c && break; done
  fi
  [ -n "$bin" ] || { echo "no ceiling binary: pass CEILING_BIN or pre-write $out/models" >&2; exit 1; }
  "$bin" make-test-model --preset "$p" --out "$out/models/$p" --seed "$seed"
done
PYTHONUNBUFFERED=1 python3 tests/parity/make_golden.py --models "$out/models" --out "$out/golden" \
  --seed "$seed" --device cpu
du -ch "$out"/golden/* | tail -1
echo "now: cp $out/golden/* tests/parity/golden/"
