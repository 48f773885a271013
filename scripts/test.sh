#!/usr/bin/env bash
# The whole test suite: builds, runs every ctest test (GPU tests skip visibly without a GPU),
# then builds the libFuzzer targets with clang and runs each for a bounded time.
#   CEILING_FUZZ_SECONDS (default 30) bounds each fuzzer; CEILING_SKIP_FUZZ=1 skips that stage.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
status=0
ctest --preset release -j "$(nproc)" || status=1
if [ "${CEILING_SKIP_FUZZ:-0}" != 1 ] && [ -n "$(ls fuzz/*.cmake 2>/dev/null)" ]; then
  cmake --preset fuzz -DCEILING_FUZZ_SECONDS="${CEILING_FUZZ_SECONDS:-30}" >/dev/null
  # Only the fuzzers (and the libraries they test): the rest is covered by the release build.
  targets=$(for f in fuzz/*.cmake; do n=$(basename "$f" .cmake); printf 'fuzz_%s ' "$n"; done)
  # shellcheck disable=SC2086
  cmake --build --preset fuzz -j "$(nproc)" --target $targets
  ctest --test-dir build/fuzz --output-on-failure || status=1
fi
exit $status
