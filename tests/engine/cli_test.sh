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
check "stop finish reason" bash -c "'$bin' generate --prompt '' --temperature 0 --stop park 2>&1 >/dev/null | grep -q 'finish: stop'"

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

# 7. Batch input: a JSON Lines file of mixed prompts -> one JSON line each, in order; the result
#    does not depend on batching, preemption (a tiny KV pool) or prefix caching.
python3 - "$work/prompts.jsonl" <<'PY'
import json, sys
starts = ["Once upon a time", "Lily and Tom", "The cat", "One day, a little bird", "Sam had a big red ball"]
with open(sys.argv[1], "w") as f:
    for i in range(32):
        text = starts[i % len(starts)] + (" and" * (i % 7))
        line = {"prompt": text, "max_tokens": 20 + i % 13}
        if i % 9 == 4:
            line["stop"] = ["."]
        f.write(json.dumps(line) + "\n")
PY
"$bin" generate --prompts-file "$work/prompts.jsonl" --temperature 0 --output "$work/batch.jsonl" 2>"$work/batch.err"
check "batch output: 32 lines" test "$(wc -l <"$work/batch.jsonl")" -eq 32
"$bin" generate --prompts-file "$work/prompts.jsonl" --temperature 0 --num-kv-blocks 40 --block-size 4 \
  --max-num-batched-tokens 48 --output "$work/batch_small.jsonl" 2>"$work/batch_small.err"
check "batch == batch with preemption" cmp "$work/batch.jsonl" "$work/batch_small.jsonl"
check "preemption happened" bash -c "grep -q 'preemptions [1-9]' '$work/batch_small.err'"
"$bin" generate --prompts-file "$work/prompts.jsonl" --temperature 0 --no-enable-prefix-caching \
  --max-num-seqs 1 --output "$work/batch_one.jsonl" 2>/dev/null
check "batch == one at a time, no prefix cache" cmp "$work/batch.jsonl" "$work/batch_one.jsonl"
python3 - "$work/batch.jsonl" "$bin" <<'PY' && echo "ok   batch line == single --prompt run" || { echo "FAIL batch line == single --prompt run"; exit 1; }
import json, subprocess, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
for i in (0, 13, 31):
    want = lines[i]
    starts = ["Once upon a time", "Lily and Tom", "The cat", "One day, a little bird", "Sam had a big red ball"]
    text = starts[i % 5] + (" and" * (i % 7))
    extra = ["--stop", "."] if i % 9 == 4 else []
    out = subprocess.run([sys.argv[2], "generate", "--prompt", text, "--temperature", "0",
                          "--max-tokens", str(20 + i % 13)] + extra,
                         capture_output=True, text=True, check=True)
    assert out.stdout == want["text"] + "\n", (i, out.stdout, want["text"])
    assert set(want) == {"text", "token_ids", "finish_reason", "prompt_tokens", "completion_tokens"}
    assert want["completion_tokens"] == len(want["token_ids"])
PY

# 8. Bad input: one line naming the problem, non-zero exit, nothing written.
bad() {  # bad NAME PATTERN ARGS...: the command fails with one stderr line matching PATTERN
  set +e
  "$bin" "${@:3}" >/dev/null 2>"$work/bad.err"
  local rc=$?
  set -e
  check "$1" bash -c "test $rc -ne 0 && test \$(wc -l <'$work/bad.err') -eq 1 && grep -q -- '$2' '$work/bad.err'"
}
printf '{"prompt": "a"}\n{"prompt": "b"}\n{"prompt": \n' >"$work/malformed.jsonl"
bad "malformed JSON line named" "malformed.jsonl:3" generate --prompts-file "$work/malformed.jsonl"
printf '{"prompt": ""}\n' >"$work/emptyprompt.jsonl"
bad "zero-length prompt named" "emptyprompt.jsonl:1" generate --prompts-file "$work/emptyprompt.jsonl"
printf '{"prompt": "a", "top_p": 7}\n' >"$work/badfield.jsonl"
bad "bad per-line field named" "top_p" generate --prompts-file "$work/badfield.jsonl"
: >"$work/empty.jsonl"
bad "empty prompts file" "no prompts" generate --prompts-file "$work/empty.jsonl"
bad "prompts file is a directory" "not a regular file" generate --prompts-file "$work"
bad "--block-size 0" "block-size" generate --prompt hi --block-size 0
bad "--max-tokens 0" "max-tokens" generate --prompt hi --max-tokens 0
bad "--max-num-seqs -1" "max-num-seqs" generate --prompt hi --max-num-seqs -1
bad "--max-model-len past the model" "max_position_embeddings" generate --prompt hi --max-model-len 4096
bad "request over --max-model-len" "max_model_len" generate --prompts-file "$work/prompts.jsonl" --max-model-len 16

# 9. bench throughput on the CPU: the JSON interface, and prefix caching's identical outputs.
"$bin" bench throughput --model models/stories260K --num-prompts 24 --input-len 40 --output-len 8 \
  --dataset prefix-shared --prefix-len 32 --max-num-seqs 4 --out "$work/tp_on.json" >/dev/null 2>&1
"$bin" bench throughput --model models/stories260K --num-prompts 24 --input-len 40 --output-len 8 \
  --dataset prefix-shared --prefix-len 32 --max-num-seqs 4 --no-enable-prefix-caching --out "$work/tp_off.json" >/dev/null 2>&1
python3 - "$work/tp_on.json" "$work/tp_off.json" <<'PY' && echo "ok   bench throughput JSON" || { echo "FAIL bench throughput JSON"; exit 1; }
import json, sys
on, off = (json.load(open(p)) for p in sys.argv[1:3])
for k in ["model", "gpu", "num_prompts", "input_len", "output_len", "elapsed_s", "requests_per_s",
          "output_tokens_per_s", "total_tokens_per_s", "mean_batch_size", "preemptions",
          "prefix_cache_hit_rate", "peak_kv_usage", "predicted_output_tokens_per_s"]:
    assert k in on, k
assert on["num_prompts"] == 24 and on["output_tokens_per_s"] > 0
assert on["weights"] == "bf16" and on["kv_cache_dtype"] == "bf16", (on["weights"], on["kv_cache_dtype"])
assert on["prefix_cache_hit_rate"] > 0.5, on["prefix_cache_hit_rate"]
assert off["prefix_cache_hit_rate"] == 0
assert on["outputs_hash"] == off["outputs_hash"]
PY

# 10. Tensor parallelism on the CPU (threads, one per rank): the same greedy text as one rank, the
# same bench throughput outputs, and a one-line error for a size the heads do not split by.
for n in 2 4; do
  "$bin" generate --prompt "" --temperature 0 --max-tokens 256 --tensor-parallel-size $n --threads 2 \
    >"$work/greedy_tp$n.txt" 2>/dev/null
  check "generate --tensor-parallel-size $n == TP 1" cmp "$work/greedy_tp$n.txt" "$work/greedy.txt"
done
"$bin" bench throughput --model models/stories260K --num-prompts 24 --input-len 40 --output-len 8 \
  --dataset prefix-shared --prefix-len 32 --max-num-seqs 4 --tp 2 --out "$work/tp2.json" >/dev/null 2>&1
check "bench throughput --tp 2 outputs == TP 1" python3 -c "import json,sys; a,b=(json.load(open(p)) for p in sys.argv[1:]); sys.exit(a['outputs_hash']!=b['outputs_hash'])" "$work/tp2.json" "$work/tp_on.json"
bad "--tensor-parallel-size 3" "does not divide num_attention_heads 8" generate --prompt hi --tensor-parallel-size 3

# 11. Low precision on the CPU: quantized on load, an fp8 KV cache, their accuracy, under tensor
# parallelism, and one-line refusals.
for q in "--quantization fp8" "--quantization int4" "--kv-cache-dtype fp8"; do
  check "generate $q" bash -c "'$bin' generate --prompt 'Once upon a time' --temperature 0 --max-tokens 16 $q | grep -q 'Lily'"
done
"$bin" bench accuracy --model models/stories260K --text data/eval/kjv-luke.txt --window 64 \
  --max-tokens 256 --chunk 24 --out "$work/acc.json" >/dev/null 2>&1
check "bench accuracy" python3 -c "import json,sys; j=json.load(open(sys.argv[1])); v=j['variants']; sys.exit(not (j['complete'] and len(v)==5 and v[0]['mean_kl']==0 and all(x['positions']==4*63 for x in v) and 0<v[2]['mean_kl']))" "$work/acc.json"
# Tensor parallelism shards quantized projections and keeps an fp8 cache per rank: the same greedy
# text as one rank; int4 groups (64 here) wider than a rank's o_proj inputs (32) are refused.
one=$("$bin" generate --prompt 'Once upon a time' --temperature 0 --max-tokens 16 --quantization fp8 --kv-cache-dtype fp8 2>/dev/null)
two=$("$bin" generate --prompt 'Once upon a time' --temperature 0 --max-tokens 16 --quantization fp8 --kv-cache-dtype fp8 --tensor-parallel-size 2 2>/dev/null)
check "fp8 weights + fp8 KV: TP 2 text == TP 1" test -n "$one" -a "$one" = "$two"
bad "int4 groups straddling ranks" "int4 groups of 64 inputs, which do not divide the 32 inputs of each rank" generate --prompt hi --quantization int4 --tensor-parallel-size 2
bad "awq on a dense checkpoint" "needs a checkpoint quantized with it" generate --prompt hi --quantization awq

if [ $fails -ne 0 ]; then echo "$fails check(s) failed"; exit 1; fi
echo "all CLI checks passed"
