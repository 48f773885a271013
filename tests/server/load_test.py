#!/usr/bin/env python3
"""A bounded load test of `ceiling serve` on the CPU with stories260K: 200 completions requests,
32 at a time, a tenth of them streamed and dropped by the client mid-stream. Every completed
request must equal its prompt's greedy output alone; afterwards every KV block is free again,
nothing is running or waiting, RSS stayed flat and /health is 200.
Usage: load_test.py CEILING (from the repository root). Exits 77 (skip) without the model."""
import http.client
import json
import os
import random
import socket
import sys
import time
from concurrent.futures import ThreadPoolExecutor

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from server_harness import API_KEY, Server  # noqa: E402

BIN = sys.argv[1] if len(sys.argv) > 1 else "build/cpu/apps/ceiling"
REQUESTS, CONCURRENCY = 200, 32
PROMPTS = ["Once upon a time", "Lily and Tom", "The cat", "One day, a little bird",
           "Sam had a big red ball", "The sun was", "Mom said", "A dog ran"]
HEADERS = {"Authorization": f"Bearer {API_KEY}", "Content-Type": "application/json"}


def body(i, stream):
    return json.dumps({"model": "tiny", "prompt": PROMPTS[i % len(PROMPTS)],
                       "max_tokens": 24 + i % 9, "temperature": 0, "stream": stream})


def complete(port, i):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    c.request("POST", "/v1/completions", body(i, False), HEADERS)
    r = c.getresponse()
    data = json.loads(r.read())
    c.close()
    assert r.status == 200, (r.status, data)
    return data["choices"][0]["text"], data["choices"][0]["finish_reason"]


def stream_and_drop(port, i):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    c.request("POST", "/v1/completions", body(i, True), HEADERS)
    r = c.getresponse()
    assert r.status == 200, r.status
    r.fp.readline()  # the first chunk has started
    c.sock.shutdown(socket.SHUT_RDWR)
    c.close()


def main():
    with Server(BIN, "models/stories260K", name="tiny", extra=[
        "--max-model-len", "128", "--max-num-seqs", "16", "--max-queued-requests", "256",
        "--num-kv-blocks", "160", "--block-size", "8"]) as server:
        port = server.port
        # The reference: each (prompt, max_tokens) alone, before the load.
        want = {}
        for i in range(len(PROMPTS) * 9):
            key = (i % len(PROMPTS), 24 + i % 9)
            if key not in want:
                want[key] = complete(port, i)
        total = server.metric("ceiling:kv_cache_blocks")
        rss0 = server.rss_kb()
        rng = random.Random(5)
        drops = set(rng.sample(range(REQUESTS), REQUESTS // 10))
        t0 = time.time()

        def one(i):
            if i in drops:
                stream_and_drop(port, i)
                return None
            return i, complete(port, i)

        with ThreadPoolExecutor(CONCURRENCY) as pool:
            results = [r for r in pool.map(one, range(REQUESTS)) if r]
        elapsed = time.time() - t0
        for i, got in results:
            assert got == want[(i % len(PROMPTS), 24 + i % 9)], (i, got)
        deadline = time.time() + 20
        while time.time() < deadline:
            if (server.metric("ceiling:kv_cache_free_blocks") == total
                    and server.metric("ceiling:num_requests_running") == 0
                    and server.metric("ceiling:num_requests_waiting") == 0):
                break
            time.sleep(0.1)
        free = server.metric("ceiling:kv_cache_free_blocks")
        assert free == total, f"{total - free} KV blocks leaked"
        assert server.metric("ceiling:num_requests_running") == 0
        assert server.get("/health")[0] == 200
        rss1 = server.rss_kb()
        aborted = server.metric("ceiling:request_success_total", finished_reason="abort")
        print(f"{len(results)} completed + {len(drops)} dropped in {elapsed:.1f} s; "
              f"aborted {aborted:.0f}; RSS {rss0} -> {rss1} kB; KV blocks free {free:.0f}/{total:.0f}")
        assert rss1 < rss0 * 1.25 + 20_000, f"RSS grew {rss0} -> {rss1} kB"
    print("load test passed")


if __name__ == "__main__":
    main()
