#!/usr/bin/env bash
# Stages what a device run of the kernel library needs into a small carry-able folder (the full
# build tree is far over the 64 MiB a device call may carry): the `ceiling` binary, the kernel
# gpu tests, and the shared libraries the GPU machine lacks (scripts/device/bundle.sh).
#   bench/stage_device_build.sh [BUILD_DIR=build/cuda] [STAGE_DIR=build/kernels-dev]
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build/cuda}
stage=${2:-build/kernels-dev}
rm -rf "$stage"
mkdir -p "$stage/apps" "$stage/tests/gpu"
cp "$build/apps/ceiling" "$stage/apps/"
for t in elementwise rope_kv linear sampling; do
  cp "$build/tests/gpu/gpu_$t" "$stage/tests/gpu/"
done
strip --strip-debug "$stage/apps/ceiling" "$stage"/tests/gpu/* 2>/dev/null || true
scripts/device/bundle.sh "$stage"
du -sh "$stage"
