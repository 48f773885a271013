#!/usr/bin/env bash
# The server's own cost, on the CPU backend with a tiny model (stories260K), where the model's
# time is small and the HTTP / JSON / queue path shows:
#  1. requests/s of 1-token completions (16 token ids in) from 64 concurrent streaming clients;
#  2. the latency one request adds over the in-process engine: `bench serve` at concurrency 1
#     (mean E2EL) beside `bench throughput` of the same requests one at a time (--max-num-seqs 1:
#     duration / requests), both 16 ids in, 1 token out.
# Result files: OUTDIR/serve-cpu-<date>-overhead-{c64,c1}.json and throughput-cpu-<date>-overhead-c1.json.
# Usage: bench/run_serve_overhead_cpu.sh OUTDIR [BUILD_DIR=build/release]   (repository root)
set -euo pipefail
out=${1:?usage: run_serve_overhead_cpu.sh OUTDIR [BUILD_DIR]}
bin=${2:-build/release}/apps/ceiling
mkdir -p "$out"
day=$(date -u +%Y%m%d)
port=${PORT:-8019}
url=http://127.0.0.1:$port
model=models/stories260K
"$bin" serve --model "$model" --port "$port" --served-model-name tiny --max-num-seqs 64 \
  >"/tmp/ceiling-overhead-serve.log" 2>&1 &
server=$!
trap 'kill $server 2>/dev/null || true' EXIT
for _ in $(seq 1 200); do curl -sf "$url/health" >/dev/null && break; sleep 0.1; done
"$bin" bench serve --base-url "$url" --random-input-len 16 --random-output-len 1 \
  --num-prompts 6400 --max-concurrency 64 --request-rate inf --num-warmups 64 --seed 0 \
  --out "$out/serve-cpu-$day-overhead-c64.json"
"$bin" bench serve --base-url "$url" --random-input-len 16 --random-output-len 1 \
  --num-prompts 400 --max-concurrency 1 --request-rate inf --num-warmups 8 --seed 1 \
  --out "$out/serve-cpu-$day-overhead-c1.json"
kill -TERM $server
wait $server || true
"$bin" bench throughput --model "$model" --device cpu --num-prompts 400 --input-len 16 \
  --output-len 1 --max-num-seqs 1 --out "$out/throughput-cpu-$day-overhead-c1.json"
python3 - "$out" "$day" <<'PY'
import json, sys
out, day = sys.argv[1:]
c64 = json.load(open(f"{out}/serve-cpu-{day}-overhead-c64.json"))
c1 = json.load(open(f"{out}/serve-cpu-{day}-overhead-c1.json"))
tp = json.load(open(f"{out}/throughput-cpu-{day}-overhead-c1.json"))
per_req_ms = 1000.0 * tp["elapsed_s"] / tp["num_prompts"]
print(f"64 clients, 1-token completions: {c64['request_throughput']:.0f} req/s "
      f"({c64['completed']} ok, {c64['failed']} failed)")
print(f"one client: mean E2EL {c1['mean_e2el_ms']:.3f} ms over HTTP, in-process engine "
      f"{per_req_ms:.3f} ms per request: the server adds {c1['mean_e2el_ms'] - per_req_ms:.3f} ms")
PY
