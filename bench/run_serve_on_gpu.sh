#!/usr/bin/env bash
# On the GPU machine: the OpenAI-compatible server under load (issue: `ceiling serve`).
#  1. A random-weight Llama-3.1-8B-shaped model written there (make-test-model), served by
#     `ceiling serve --device cuda` on loopback.
#  2. `ceiling bench serve`: 1000 requests (SERVE_PROMPTS), random 1024 in / 128 out, at
#     10 requests/s (Poisson) and at rate inf (all at once), streaming /v1/completions.
#  3. `ceiling bench throughput` on the same workload in process (the server's cost = the gap).
# Result files: OUTDIR/<kind>-<gpu>-<date>-<what>.json (the bench/results/ format), and the
# server's log.
# Usage: bench/run_serve_on_gpu.sh OUTDIR [BUILD_DIR]   (from the repository root)
# Env: SKIP_RATE10=1, SKIP_INF=1, SKIP_THROUGHPUT=1, SERVE_PROMPTS=1000, PORT=8011,
#      MODELS_DIR=/tmp/ceiling-engine-models.
set -uo pipefail
out=${1:?usage: run_serve_on_gpu.sh OUTDIR [BUILD_DIR]}
build=${2:-build/engine-dev}
models=${MODELS_DIR:-/tmp/ceiling-engine-models}
# shellcheck source=bench/gpu_run_common.sh
source bench/gpu_run_common.sh
n=${SERVE_PROMPTS:-1000}
port=${PORT:-8011}
url=http://127.0.0.1:$port

m8=$models/llama-3.1-8b
[ -f "$m8/config.json" ] ||
  run "make-test-model llama-3.1-8b" 300 "$bin" make-test-model --preset llama-3.1-8b \
    --out "$m8" --tokenizer-dir "$tok"

if [ "${SKIP_RATE10:-0}" != 1 ] || [ "${SKIP_INF:-0}" != 1 ]; then
  echo "== serve: starting on $url"
  "$bin" serve --model "$m8" --device cuda --host 127.0.0.1 --port "$port" \
    --served-model-name llama-3.1-8b >"$out/serve-$gpu-$day-llama-3.1-8b.log" 2>&1 &
  server=$!
  up=0
  for _ in $(seq 1 240); do
    curl -sf "$url/health" >/dev/null 2>&1 && { up=1; break; }
    kill -0 $server 2>/dev/null || break
    sleep 0.5
  done
  if [ $up = 1 ]; then
    # The GPU sampler's logit_bias and min_tokens mask, through the server: token 1000 forced at
    # +100 (greedy), and min_tokens 8 with EOS biased up must still give 8 tokens.
    python3 - "$url" <<'PY' || { echo "FAILED: CUDA logit_bias / min_tokens smoke"; status=1; }
import json, sys, urllib.request
url = sys.argv[1]
def post(body):
    req = urllib.request.Request(url + "/v1/completions", json.dumps(body).encode(),
                                 {"Content-Type": "application/json"})
    return json.load(urllib.request.urlopen(req, timeout=60))
r = post({"model": "llama-3.1-8b", "prompt": [1, 2, 3], "max_tokens": 4, "temperature": 0,
          "logit_bias": {"1000": 100}, "logprobs": 1})
toks = r["choices"][0]["logprobs"]["tokens"]
print("logit_bias +100 on id 1000:", toks)
assert len(set(toks)) == 1, toks
eos = 128001
r = post({"model": "llama-3.1-8b", "prompt": [1, 2, 3], "max_tokens": 16, "temperature": 0,
          "min_tokens": 8, "logit_bias": {str(eos): 100}})
print("min_tokens 8, EOS biased up:", r["usage"], r["choices"][0]["finish_reason"])
assert r["usage"]["completion_tokens"] >= 8, r
PY
    for rate in 10 inf; do
      [ $rate = 10 ] && [ "${SKIP_RATE10:-0}" = 1 ] && continue
      [ $rate = inf ] && [ "${SKIP_INF:-0}" = 1 ] && continue
      run "bench serve rate $rate" 300 "$bin" bench serve --base-url "$url" \
        --endpoint /v1/completions --dataset random --random-input-len 1024 \
        --random-output-len 128 --num-prompts "$n" --request-rate $rate --seed 0 \
        --out "$out/serve-$gpu-$day-llama-3.1-8b-rate$rate.json"
    done
    curl -s "$url/metrics" >"$out/serve-$gpu-$day-llama-3.1-8b-metrics.txt" || true
  else
    echo "FAILED: the server did not come up"; status=1
  fi
  kill -TERM $server 2>/dev/null
  wait $server || { echo "FAILED: server exit status $?"; status=1; }
  tail -5 "$out/serve-$gpu-$day-llama-3.1-8b.log"
fi

if [ "${SKIP_THROUGHPUT:-0}" != 1 ]; then
  run "throughput 8b random 1024/128" 300 "$bin" bench throughput --model "$m8" --device cuda \
    --num-prompts "$n" --input-len 1024 --output-len 128 --quick-ceilings \
    --out "$out/throughput-$gpu-$day-llama-3.1-8b-random-1024-128.json"
fi
exit $status
