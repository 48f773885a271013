#!/usr/bin/env bash
# The repository stands alone: a clean clone of HEAD in a fresh temporary directory (no shared data
# folder and no fetched models beside it) configures, builds the cpu preset and passes its ctest suite.
# Bounded by CEILING_CLONE_CHECK_SECONDS (default 3600). Reuses ccache when it is installed
# (CCACHE_BASEDIR = the tree's root, as scripts/build.sh sets it, so the clone's other path still
# hits the main build's entries, except for the few files that expand a path macro).
# Usage: scripts/check_clean_clone.sh [JOBS]
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
jobs=${1:-$(nproc)}
limit=${CEILING_CLONE_CHECK_SECONDS:-3600}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/ceiling-clone.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
start=$(date +%s)
git clone -q --no-local "$src" "$tmp/ceiling"
cd "$tmp/ceiling"
[ ! -e "$tmp/shared" ] || { echo "clean clone: $tmp/shared exists"; exit 1; }
launcher=()
if command -v ccache >/dev/null; then
  export CCACHE_BASEDIR="$tmp/ceiling" CCACHE_NOHASHDIR=1
  launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
fi
echo "clean clone: $tmp/ceiling ($(git rev-parse --short HEAD)), cpu preset, -j$jobs, limit ${limit}s"
timeout "$limit" bash -c "cmake --preset cpu ${launcher[*]} >/dev/null &&
  cmake --build --preset cpu -j $jobs >build.log 2>&1 || { tail -40 build.log; exit 1; }
  ctest --preset cpu -j $jobs"
echo "clean clone: passed in $(( $(date +%s) - start )) s"
