#!/usr/bin/env bash
# `ceiling generate` and `ceiling make-test-model` end to end. Usage: cli_test.sh CEILING WORKDIR
# (run from the repository root).
set -euo pipefail
bin=$1
work=$2
rm -rf "$work"
mkdir -p "$work"
expected=tests/data/stories260K/expected_greedy_t0_256steps.txt
fails=0
check() {  # check NAME COMMAND...: runs the command, counts a failure
  if "${@:2}"; then echo "ok   $1"; else echo "FAIL $1"; fails=$((fails + 1)); fi
}

# 1. The bundled model (the default --model), greedy from BOS: llama2.c's sample byte for byte.
"$bin" generate --prompt "" --temperature 0 --max-tokens 256 >"$work/greedy.txt" 2>"$work/greedy.err"
if [ -f "$expected" ]; then check "stories260K greedy == llama2.c" cmp "$work/greedy.txt" "$expected"; fi
check "summary on stderr" grep -q "tok/s" "$work/greedy.err"

# 2. A stop string: output ends before it, and no part of it is printed.
"$bin" generate --prompt "" --temperature 0 --max-tokens 256 --stop "park" >"$work/stop.txt" 2>/dev/null
check "stop string cut" bash -c "! grep -q park '$work/stop.txt' && grep -q 'play outside in the' '$work/stop.txt'"
check "stop finish reason" bash -c "'$bin' generate --prompt '' --temperature 0 --stop park 2>&1 >/dev/null | grep -q 'finish: stop_string'"

# 3. Seeded sampling is reproducible.
"$bin" generate --prompt "Once upon a time" --seed 5 --max-tokens 30 >"$work/s1.txt" 2>/dev/null
"$bin" generate --prompt "Once upon a time" --seed 5 --max-tokens 30 >"$work/s2.txt" 2>/dev/null
check "seeded sampling reproducible" cmp "$work/s1.txt" "$work/s2.txt"

# 4. --device cuda: works (a CUDA build on a GPU) or fails with one clear line.
set +e
"$bin" generate --prompt "" --max-tokens 4 --device cuda >"$work/cuda.out" 2>"$work/cuda.err"
rc=$?
set -e
if [ $rc -ne 0 ]; then
  check "cuda error is one line" test "$(wc -l <"$work/cuda.err")" -eq 1
  check "cuda error names CUDA" grep -qi "cuda" "$work/cuda.err"
fi

# 5. Bad input: one line, exit 1.
set +e
"$bin" generate --model "$work/nope" --prompt hi >/dev/null 2>"$work/bad.err"
rc=$?
set -e
check "missing model exits 1" test $rc -eq 1
check "missing model one line" test "$(wc -l <"$work/bad.err")" -eq 1

# 6. make-test-model writes a loadable model; generate runs on it (chat template included).
"$bin" make-test-model --preset tiny-llama --out "$work/tiny" --seed 3 2>/dev/null
check "tiny model files" test -f "$work/tiny/model.safetensors" -a -f "$work/tiny/tokenizer.json"
check "tiny generate --chat" bash -c "'$bin' generate --model '$work/tiny' --prompt hello --chat --system \"be brief\" --max-tokens 8 --temperature 0 >/dev/null 2>&1"
"$bin" make-test-model --preset tiny-llama --out "$work/tiny2" --seed 3 2>/dev/null
check "make-test-model deterministic" cmp "$work/tiny/model.safetensors" "$work/tiny2/model.safetensors"
# From any directory: the tokenizer is found beside the binary, not the working directory.
mkdir -p "$work/elsewhere"
(cd "$work/elsewhere" && "$bin" make-test-model --preset tiny-mistral --out here --seed 1 2>/dev/null)
check "make-test-model from another directory" test -f "$work/elsewhere/here/tokenizer.json"

# 7. The real chat model (scripts/fetch_smollm2.sh; skipped when it was not fetched): a greedy
# chat answer names the capital.
smol=models/SmolLM2-135M-Instruct
if [ -f "$smol/model.safetensors" ]; then
  "$bin" generate --model "$smol" --chat --prompt "What is the capital of France?" --temperature 0 \
    --max-tokens 48 >"$work/smol.txt" 2>"$work/smol.err" || true
  echo "SmolLM2: $(cat "$work/smol.txt")"
  check "SmolLM2 chat answer contains Paris" grep -q "Paris" "$work/smol.txt"
else
  echo "skip SmolLM2 chat check: $smol missing (scripts/fetch_smollm2.sh)"
fi

if [ $fails -ne 0 ]; then echo "$fails check(s) failed"; exit 1; fi
echo "all CLI checks passed"
