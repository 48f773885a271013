#!/usr/bin/env python3
"""`ceiling serve --tensor-parallel-size 2` on the CPU (two ranks, the host communicator) with
stories260K: greedy completions, streamed and not, equal `ceiling generate` at TP 1, and the
server ends with every KV block free.
Usage: tp_serve_test.py CEILING (from the repository root). Exits 77 (skip) without the model."""
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from server_harness import Server  # noqa: E402

BIN = sys.argv[1] if len(sys.argv) > 1 else "build/cpu/apps/ceiling"
MODEL = "models/stories260K"
PROMPTS = ["Once upon a time", "The cat", "Lily and Tom went"]


def main():
    with Server(BIN, MODEL, name="tiny",
                extra=["--max-model-len", "256", "--tensor-parallel-size", "2"]) as server:
        free0 = server.metric("ceiling:kv_cache_free_blocks")
        for prompt in PROMPTS:
            want = subprocess.run([BIN, "generate", "--model", MODEL, "--prompt", prompt,
                                   "--temperature", "0", "--max-tokens", "40"],
                                  capture_output=True, text=True, check=True).stdout
            status, r = server.post_json("/v1/completions", {
                "model": "tiny", "prompt": prompt, "max_tokens": 40, "temperature": 0})
            assert status == 200, (status, r)
            assert r["choices"][0]["text"] + "\n" == want, (prompt, r["choices"][0]["text"], want)
            status, data = server.request("POST", "/v1/completions", {
                "model": "tiny", "prompt": prompt, "max_tokens": 40, "temperature": 0,
                "stream": True})
            assert status == 200, status
            text = ""
            for line in data.decode().splitlines():
                if line.startswith("data: ") and line != "data: [DONE]":
                    text += json.loads(line[6:])["choices"][0]["text"]
            assert text + "\n" == want, (prompt, text, want)
        assert server.metric("ceiling:kv_cache_free_blocks") == free0
    print("serve at TP 2 == generate at TP 1: ok")


if __name__ == "__main__":
    main()
