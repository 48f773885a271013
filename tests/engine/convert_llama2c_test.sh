#!/usr/bin/env bash
# The committed models/stories260K is exactly what scripts/convert_llama2c.py writes from the
# llama2.c originals, and the converter's own checks pass (layout, 256-step greedy text,
# tokenizer encode/decode parity with a Python llama2.c encode() when `tokenizers` is installed).
# Usage: convert_llama2c_test.sh WORKDIR (from the repository root). Exit 77 = skipped.
set -euo pipefail
work=$1
src=tests/data/stories260K
if ! python3 -c "import numpy" 2>/dev/null; then echo "SKIP: numpy missing"; exit 77; fi
if [ ! -f "$src/stories260K.bin" ]; then echo "SKIP: $src missing"; exit 77; fi
rm -rf "$work"
python3 scripts/convert_llama2c.py --model "$src/stories260K.bin" --tokenizer "$src/tok512.bin" \
  --license "$src/LICENSE-llama2.c-MIT" --expected "$src/expected_greedy_t0_256steps.txt" \
  --out "$work"
for f in config.json generation_config.json tokenizer.json tokenizer_config.json \
         model.safetensors LICENSE-llama2.c-MIT; do
  cmp "$work/$f" "models/stories260K/$f" || { echo "models/stories260K/$f differs from a fresh conversion"; exit 1; }
done
echo "models/stories260K matches a fresh conversion"
