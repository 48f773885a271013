#!/usr/bin/env python3
"""`ceiling bench serve` against the real `ceiling serve` (CPU, stories260K) over loopback:
streamed /v1/completions with token-id prompts longer than the per-request prompt cap (300 ids),
then chat (with a Llama-3.1-style template file). Every request must succeed, and the token totals must be what was asked for
(input from the server's usage, output = max_tokens with ignore_eos), and the server must end
with every KV block free.
Usage: bench_serve_test.py CEILING (from the repository root). Exits 77 (skip) without the model."""
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from server_harness import API_KEY, Server  # noqa: E402

BIN = sys.argv[1] if len(sys.argv) > 1 else "build/cpu/apps/ceiling"
N, IN, OUT = 24, 300, 6


def bench(server, out, *extra):
    args = [BIN, "bench", "serve", "--base-url", f"http://127.0.0.1:{server.port}",
            "--api-key", API_KEY, "--num-prompts", str(N), "--random-input-len", str(IN),
            "--random-output-len", str(OUT), "--request-rate", "inf", "--max-concurrency", "8",
            "--seed", "3", "--out", out] + list(extra)
    r = subprocess.run(args, capture_output=True, text=True, timeout=240)
    print(r.stdout[-1500:], r.stderr[-1500:], flush=True)
    assert r.returncode == 0, r.returncode
    with open(out) as f:
        return json.load(f)


def main():
    with Server(BIN, "models/stories260K", name="tiny", extra=[
        "--max-model-len", "512", "--max-num-seqs", "8",
        "--chat-template", "tests/chat_template/llama31_style.jinja"]) as server:
        free0 = server.metric("ceiling:kv_cache_free_blocks")
        with tempfile.TemporaryDirectory() as d:
            r = bench(server, os.path.join(d, "completions.json"))
            assert r["completed"] == N and r["failed"] == 0, (r["completed"], r["failed"])
            assert r["total_input_tokens"] == N * IN, r["total_input_tokens"]
            assert r["total_output_tokens"] == N * OUT, r["total_output_tokens"]
            assert 0 < r["median_ttft_ms"] <= r["median_e2el_ms"], r
            assert r["max_concurrent_requests"] <= 8, r["max_concurrent_requests"]
            c = bench(server, os.path.join(d, "chat.json"), "--endpoint", "/v1/chat/completions",
                      "--tokenizer", "models/stories260K")
            assert c["completed"] == N and c["failed"] == 0, (c["completed"], c["failed"])
            assert c["total_output_tokens"] == N * OUT, c["total_output_tokens"]
        assert server.metric("ceiling:kv_cache_free_blocks") == free0
        assert server.metric("ceiling:num_requests_running") == 0
    print("bench serve against ceiling serve: ok")


if __name__ == "__main__":
    main()
