#!/usr/bin/env python3
"""Invalid and split UTF-8 from the model through `ceiling serve`: a random tiny-llama (byte
fallback tokens) is pushed by logit_bias onto the byte tokens of "你" (E4 BD A0) and a word, so
it emits runs of byte tokens: some exactly one code point (E4 + two of BD/A0, split over three tokens), most
invalid (each byte of such a run decodes to U+FFFD, as Hugging Face's ByteFallback). Every body and SSE chunk must be valid
JSON (invalid bytes as U+FFFD), and the streamed text must equal the whole text (a code point
split across chunks would turn into two U+FFFD). Usage: utf8_stream_test.py CEILING."""
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from server_harness import Server  # noqa: E402

BIN = sys.argv[1] if len(sys.argv) > 1 else "build/cpu/apps/ceiling"


def main():
    with tempfile.TemporaryDirectory() as tmp:
        model = os.path.join(tmp, "tiny")
        subprocess.run([BIN, "make-test-model", "--preset", "tiny-llama", "--out", model,
                        "--seed", "3"], check=True, capture_output=True)
        vocab = json.load(open(os.path.join(model, "tokenizer.json")))["model"]["vocab"]
        ids = [vocab[f"<0x{b}>"] for b in ("E4", "BD", "A0")] + [vocab["▁the"]]
        with Server(BIN, model, name="tiny", api_key=None, extra=["--max-model-len", "512"]) as server:
            seen_valid = False
            for seed in range(6):
                body = {"prompt": "hello", "max_tokens": 150, "temperature": 1.0, "seed": seed,
                        "ignore_eos": True, "logit_bias": {str(i): 100 for i in ids}}
                status, full = server.post_json("/v1/completions", body)
                assert status == 200, (status, full)
                text = full["choices"][0]["text"]
                # E4 + two of BD/A0 is a valid code point in U+4000..U+4FFF (你 = E4 BD A0).
                cjk = [c for c in text if 0x4000 <= ord(c) < 0x5000]
                assert all(c in "\ufffd the" for c in text if c not in cjk), text
                seen_valid = seen_valid or bool(cjk)
                status, raw = server.request("POST", "/v1/completions", {**body, "stream": True})
                assert status == 200
                parts = []
                for line in raw.decode("utf-8").split("\n"):  # strict: valid UTF-8 throughout
                    if line.startswith("data: {"):
                        parts.append(json.loads(line[6:])["choices"][0]["text"])
                assert "".join(parts) == text, (seed, parts, text)
            assert seen_valid, "no valid code point was ever formed (pick other seeds)"
    print("utf8 stream test passed")


if __name__ == "__main__":
    main()
