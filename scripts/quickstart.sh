#!/usr/bin/env bash
# The README's first command: installs what is missing, builds, and runs ceiling's main job on the
# embedded defaults — the roofline of Llama-3.1-8B decode on this machine's GPU (or an H100 SXM),
# then generation from the bundled stories260K model (on the GPU when there is one).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh >/dev/null
bin=build/release/apps/ceiling
echo "== ceiling roofline --model llama-3.1-8b --phase decode --batch 1 --context 1024"
"$bin" roofline --model llama-3.1-8b --phase decode --batch 1 --context 1024
if [ -d models/stories260K ]; then
  device=cpu
  if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then device=cuda; fi
  echo "== ceiling generate --model models/stories260K --device $device"
  "$bin" generate --model models/stories260K --prompt "Once upon a time" --max-tokens 200 \
    --temperature 0 --device "$device"
fi
