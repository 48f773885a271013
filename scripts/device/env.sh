# Source on the GPU machine: `source scripts/device/env.sh BUILD_DIR`. Puts the bundled libraries
# and the machine's CUDA libraries (toolkit or the PyTorch wheels' copies) on LD_LIBRARY_PATH.
_b=${1:-build/release}
_p="$PWD/$_b/devlibs"
for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib; do [ -d "$d" ] && _p="$_p:$d"; done
_site=$(python3 -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])' 2>/dev/null || true)
for d in "$_site"/nvidia/*/lib; do [ -d "$d" ] && _p="$_p:$d"; done
export LD_LIBRARY_PATH="$_p${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export PATH="$PATH:/usr/local/cuda/bin"
# The commit the build was staged from (bundle.sh writes BUILD_DIR/GIT_SHA); the GPU machine has
# no repository, so result files take their git_sha from here.
[ -f "$_b/GIT_SHA" ] && export CEILING_GIT_SHA="$(cat "$_b/GIT_SHA")"
unset _b _p _site
