#!/usr/bin/env bash
# Configures and builds the release preset (CUDA sm_90a when nvcc is found).
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/local/cuda/bin"
# ccache (when installed) lets the clean-clone check of scripts/test.sh reuse these objects.
launcher=()
if command -v ccache >/dev/null; then
  # Paths under the source tree hash as relative ones, so a tree at another place (the clean-clone
  # check) hits the same entries; system headers stay absolute.
  export CCACHE_BASEDIR="$PWD" CCACHE_NOHASHDIR=1
  launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
fi
cmake --preset release "${launcher[@]}" >/dev/null
cmake --build --preset release -j "$(nproc)"
