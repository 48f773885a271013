#!/usr/bin/env bash
# Configures and builds the release preset (CUDA sm_90a when nvcc is found).
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/local/cuda/bin"
cmake --preset release >/dev/null
cmake --build --preset release -j "$(nproc)"
