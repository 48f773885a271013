#!/usr/bin/env bash
# Makes a build directory runnable on the GPU machine (which lacks Debian's -dev libraries):
# copies the shared libraries its executables need — except glibc, libstdc++/libgcc and the CUDA
# libraries, which the GPU machine has — into BUILD_DIR/devlibs. Run here after building; carry
# BUILD_DIR to the device and `source scripts/device/env.sh BUILD_DIR` there.
set -euo pipefail
build=${1:?usage: bundle.sh BUILD_DIR}
mkdir -p "$build/devlibs"
find "$build" -type f -perm -u+x ! -path '*/devlibs/*' ! -path '*/CMakeFiles/*' -print0 |
  xargs -0 -r ldd 2>/dev/null | awk '/=> \//{print $3}' | sort -u |
  grep -v -E '/(libc|libm|libdl|librt|libpthread|libstdc\+\+|libgcc_s|libcuda|libcudart|libcublas|libcublasLt|libnccl|libnvidia)[.-]' |
  while read -r lib; do cp -Lu "$lib" "$build/devlibs/"; done
du -sh "$build/devlibs" | awk '{print "bundled libs: " $1}'
# The commit this build comes from, for the result files' git_sha (scripts/device/env.sh).
sha=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
[ -n "$(git status --porcelain --untracked-files=no 2>/dev/null)" ] && sha="$sha-dirty"
echo "$sha" >"$build/GIT_SHA"
