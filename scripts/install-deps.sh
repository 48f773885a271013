#!/usr/bin/env bash
# Installs what ceiling needs on a fresh Debian/Ubuntu machine (the CUDA toolkit is assumed to be
# installed already; without it the CPU backend builds alone). Idempotent and quiet when done.
set -euo pipefail
pkgs=(cmake ninja-build ccache g++ clang libclang-rt-dev pkg-config nlohmann-json3-dev libcli11-dev
      libfmt-dev libpcre2-dev libutf8proc-dev libgtest-dev libgmock-dev libbenchmark-dev libcpp-httplib-dev
      python3 python3-pip)
missing=()
for p in "${pkgs[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if ((${#missing[@]})); then
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO=sudo
  echo "installing: ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi
# Python tooling for parity tests, plots and the server tests (openai) (PyPI).
py=$(command -v python3)
need_py=()
for m in numpy tokenizers matplotlib jinja2 openai; do "$py" -c "import $m" 2>/dev/null || need_py+=("$m"); done
if ((${#need_py[@]})); then
  echo "installing python packages: ${need_py[*]}"
  "$py" -m pip install -q --disable-pip-version-check -r "$(dirname "$0")/requirements.txt" 2>/dev/null \
    || "$py" -m pip install -q --disable-pip-version-check --break-system-packages \
         -r "$(dirname "$0")/requirements.txt"
fi
