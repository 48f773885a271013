#!/usr/bin/env python3
"""`ceiling serve` end to end with the official `openai` client, over loopback, on the CPU with
SmolLM2-135M-Instruct: completions and chat (streamed and not), n, logprobs, stop strings, seeds,
include_usage, every refusal (status, type, param), auth, limits, /metrics, back-pressure,
disconnects, greedy parity with `ceiling generate`, and draining on SIGTERM.
Usage: test_openai_api.py CEILING (from the repository root). Exits 77 (skip) without `openai`
or the model."""
import http.client
import json
import os
import socket
import subprocess
import sys
import threading
import time
import unittest
import warnings

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from server_harness import API_KEY, Server, skip  # noqa: E402

try:
    import openai
except ImportError:
    skip("python package 'openai' not installed (scripts/install-deps.sh)")

BIN = sys.argv[1] if len(sys.argv) > 1 else "build/cpu/apps/ceiling"
MODEL = "models/SmolLM2-135M-Instruct"
NAME = "smol"
MAX_MODEL_LEN = 512
SERVER = None


def client(key=API_KEY):
    return openai.OpenAI(base_url=SERVER.base_url, api_key=key, max_retries=0, timeout=120)


def chat(msg, **kw):
    return client().chat.completions.create(
        model=NAME, messages=[{"role": "user", "content": msg}], **kw)


class Generation(unittest.TestCase):
    def test_chat_greedy_names_paris(self):
        r = chat("What is the capital of France?", temperature=0, max_tokens=30)
        self.assertEqual(r.object, "chat.completion")
        self.assertEqual(r.model, NAME)
        self.assertIn("Paris", r.choices[0].message.content)
        self.assertEqual(r.choices[0].message.role, "assistant")
        self.assertIn(r.choices[0].finish_reason, ("stop", "length"))
        self.assertEqual(r.usage.total_tokens, r.usage.prompt_tokens + r.usage.completion_tokens)

    def test_chat_stream_matches_non_stream(self):
        kw = dict(temperature=0, max_tokens=24)
        full = chat("Tell me about cats.", **kw)
        chunks = list(chat("Tell me about cats.", stream=True,
                           stream_options={"include_usage": True}, **kw))
        self.assertEqual(chunks[0].choices[0].delta.role, "assistant")
        self.assertEqual(chunks[-1].choices, [])
        self.assertEqual(chunks[-1].usage.completion_tokens, full.usage.completion_tokens)
        self.assertEqual(chunks[-1].usage.prompt_tokens, full.usage.prompt_tokens)
        for c in chunks[:-1]:
            self.assertIsNone(c.usage)
            self.assertEqual(c.object, "chat.completion.chunk")
        text = "".join(c.choices[0].delta.content or "" for c in chunks[:-1])
        self.assertEqual(text, full.choices[0].message.content)
        self.assertEqual(chunks[-2].choices[0].finish_reason, full.choices[0].finish_reason)
        self.assertTrue(all(c.choices[0].finish_reason is None for c in chunks[:-2]))

    def test_completions_stream_and_not(self):
        c = client()
        kw = dict(model=NAME, prompt="Once upon a time", temperature=0, max_tokens=16)
        full = c.completions.create(**kw)
        self.assertEqual(full.object, "text_completion")
        self.assertEqual(full.choices[0].finish_reason, "length")
        self.assertEqual(full.usage.completion_tokens, 16)
        text = "".join(ch.choices[0].text for ch in c.completions.create(stream=True, **kw))
        self.assertEqual(text, full.choices[0].text)

    def test_prompt_forms(self):
        c = client()
        tok = SERVER.post_json("/tokenize", {"prompt": "Once upon a time"})[1]["tokens"]
        by_text = c.completions.create(model=NAME, prompt="Once upon a time", temperature=0,
                                       max_tokens=8)
        by_ids = c.completions.create(model=NAME, prompt=tok, temperature=0, max_tokens=8)
        self.assertEqual(by_text.choices[0].text, by_ids.choices[0].text)
        many = c.completions.create(model=NAME, prompt=["Once upon a time", "The cat"],
                                    temperature=0, max_tokens=8)
        self.assertEqual([x.index for x in many.choices], [0, 1])
        self.assertEqual(many.choices[0].text, by_text.choices[0].text)
        lists = c.completions.create(model=NAME, prompt=[tok, tok], temperature=0, max_tokens=8)
        self.assertEqual(lists.choices[1].text, by_text.choices[0].text)
        echo = c.completions.create(model=NAME, prompt="Once upon a time", echo=True,
                                    temperature=0, max_tokens=8)
        self.assertEqual(echo.choices[0].text, "Once upon a time" + by_text.choices[0].text)
        self.assertEqual(SERVER.post_json("/detokenize", {"tokens": tok})[1]["prompt"],
                         "Once upon a time")

    def test_n_and_seed_reproducible(self):
        c = client()
        kw = dict(model=NAME, prompt="My favourite food is", max_tokens=12, temperature=1.0,
                  n=2, seed=1234)
        a, b = c.completions.create(**kw), c.completions.create(**kw)
        self.assertEqual([x.index for x in a.choices], [0, 1])
        self.assertEqual([x.text for x in a.choices], [x.text for x in b.choices])
        self.assertNotEqual(a.choices[0].text, a.choices[1].text)
        # Choice i uses seed + i: choice 1 of seed 1234 is choice 0 of seed 1235.
        one = c.completions.create(**{**kw, "n": 1, "seed": 1235})
        self.assertEqual(one.choices[0].text, a.choices[1].text)
        # Streaming n = 2: both choices arrive, each with a finish_reason.
        chunks = list(c.completions.create(stream=True, **kw))
        texts = ["", ""]
        for ch in chunks:
            texts[ch.choices[0].index] += ch.choices[0].text
        self.assertEqual(texts, [x.text for x in a.choices])

    def test_logprobs(self):
        r = client().completions.create(model=NAME, prompt="Once upon a time", temperature=0,
                                        max_tokens=6, logprobs=2)
        lp = r.choices[0].logprobs
        self.assertEqual(len(lp.tokens), 6)
        self.assertEqual("".join(lp.tokens), r.choices[0].text)
        for t, l, top in zip(lp.tokens, lp.token_logprobs, lp.top_logprobs):
            self.assertLessEqual(l, 0)
            self.assertIn(t, top)
            self.assertAlmostEqual(max(top.values()), l, places=4)  # greedy: the top token
        c = chat("Hi", temperature=0, max_tokens=5, logprobs=True, top_logprobs=3)
        content = c.choices[0].logprobs.content
        self.assertEqual(len(content), c.usage.completion_tokens)
        self.assertEqual(len(content[0].top_logprobs), 3)
        self.assertEqual(bytes(content[0].bytes).decode(), content[0].token)

    def test_stop_strings_never_leak(self):
        c = client()
        kw = dict(model=NAME, prompt="Once upon a time", temperature=0, max_tokens=40)
        full = c.completions.create(**kw).choices[0].text
        stop = full[len(full) // 2:len(full) // 2 + 4]
        want = full[:full.index(stop)]
        r = c.completions.create(stop=[stop, "zzzz"], **kw)
        self.assertEqual(r.choices[0].text, want)
        self.assertEqual(r.choices[0].finish_reason, "stop")
        streamed = "".join(ch.choices[0].text for ch in c.completions.create(stream=True, stop=stop, **kw))
        self.assertEqual(streamed, want)

    def test_min_tokens_and_logit_bias(self):
        q = "What is the capital of France?"
        r = chat(q, temperature=0, max_tokens=40)
        self.assertEqual(r.choices[0].finish_reason, "stop")
        n = r.usage.completion_tokens
        held = chat(q, temperature=0, max_tokens=40, extra_body={"min_tokens": n + 5})
        self.assertGreaterEqual(held.usage.completion_tokens, n + 5)
        tok = SERVER.post_json("/tokenize", {"prompt": " banana", "add_special_tokens": False})[1]
        t = tok["tokens"][0]
        biased = client().completions.create(model=NAME, prompt="Hello", max_tokens=4,
                                             temperature=0, logit_bias={str(t): 100})
        self.assertEqual(biased.usage.completion_tokens, 4)
        ids = SERVER.post_json("/tokenize", {"prompt": biased.choices[0].text,
                                             "add_special_tokens": False})[1]["tokens"]
        self.assertEqual(ids, [t] * 4)

    def test_greedy_equals_ceiling_generate(self):
        for prompt, chat_mode in (("Once upon a time", False), ("What is 2+2?", True)):
            args = [BIN, "generate", "--model", MODEL, "--prompt", prompt, "--temperature", "0",
                    "--max-tokens", "24"] + (["--chat"] if chat_mode else [])
            want = subprocess.run(args, capture_output=True, text=True, check=True).stdout
            if chat_mode:
                got = chat(prompt, temperature=0, max_tokens=24).choices[0].message.content
            else:
                got = client().completions.create(model=NAME, prompt=prompt, temperature=0,
                                                  max_tokens=24).choices[0].text
            self.assertEqual(got + "\n", want, prompt)


class Refusals(unittest.TestCase):
    def expect(self, exc, status, param, **kw):
        with self.assertRaises(exc) as cm:
            client().completions.create(model=kw.pop("model", NAME), prompt=kw.pop("prompt", "Hi"),
                                        **kw)
        self.assertEqual(cm.exception.status_code, status)
        err = cm.exception.body
        self.assertEqual(err.get("param"), param, err)
        self.assertIn("type", err)
        self.assertIn("message", err)
        return err

    def test_bad_parameters(self):
        B = openai.BadRequestError
        self.expect(B, 400, "temperature", temperature=-0.5)
        self.expect(B, 400, "top_p", top_p=0)
        self.expect(B, 400, "top_p", top_p=1.01)
        self.expect(B, 400, "n", n=0)
        self.expect(B, 400, "n", n=1000)
        self.expect(B, 400, "max_tokens", max_tokens=0)
        self.expect(B, 400, "logit_bias", logit_bias={"99999999": 1})
        self.expect(B, 400, "logit_bias", logit_bias={"5": 200})
        self.expect(B, 400, "prompt", prompt=[1, 2, 10 ** 8])
        self.expect(B, 400, "stop", extra_body={"stop": 5})
        self.expect(B, 400, "temperature", extra_body={"temperature": "hot"})
        self.expect(B, 400, "echo", echo=True, logprobs=1)
        err = self.expect(B, 400, "max_tokens", max_tokens=MAX_MODEL_LEN)
        p = SERVER.post_json("/tokenize", {"prompt": "Hi"})[1]["count"]
        self.assertIn(f"maximum context length is {MAX_MODEL_LEN} tokens", err["message"])
        self.assertIn(f"you requested {MAX_MODEL_LEN + p} tokens", err["message"])
        e = self.expect(openai.NotFoundError, 404, "model", model="gpt-4")
        self.assertEqual(e["code"], "model_not_found")
        with self.assertRaises(B) as cm:
            client().chat.completions.create(model=NAME, messages=[], max_tokens=3)
        self.assertEqual(cm.exception.body["param"], "messages")
        with self.assertRaises(B) as cm:
            client().chat.completions.create(
                model=NAME, messages=[{"role": "user", "content": "x"}], top_logprobs=3)
        self.assertEqual(cm.exception.body["param"], "top_logprobs")

    def test_raw_bodies(self):
        for body in (b'{"prompt": "a", ', b'{"prompt": "\xff\xfe"}', b"[1, 2]", b"NaN",
                     b'{"prompt": "a", "temperature": NaN}'):
            status, err = SERVER.post_json("/v1/completions", body)
            self.assertEqual(status, 400, body)
            self.assertEqual(err["error"]["type"], "invalid_request_error")
        status, err = SERVER.post_json("/v1/completions", b"x" * (80 << 10))
        self.assertEqual(status, 413)
        self.assertEqual(err["error"]["code"], "request_too_large")
        status, err = SERVER.post_json("/v1/completions", {"prompt": "a"},
                                       headers={"X-Big": "a" * 10000})
        self.assertEqual(status, 431)

    def test_auth(self):
        with self.assertRaises(openai.AuthenticationError) as cm:
            client(key="wrong").models.list()
        self.assertEqual(cm.exception.status_code, 401)
        for path in ("/v1/models", "/v1/completions", "/v1/chat/completions"):
            status, err = SERVER.request("POST" if "compl" in path else "GET", path,
                                         {"prompt": "x"}, auth=False)
            self.assertEqual(status, 401, path)
            self.assertEqual(json.loads(err)["error"]["type"], "authentication_error")
        self.assertEqual(SERVER.get("/health")[0], 200)
        self.assertEqual(SERVER.get("/metrics")[0], 200)
        self.assertEqual(json.loads(SERVER.get("/version")[1])["version"], "0.1.0")
        models = client().models.list().data
        self.assertEqual([m.id for m in models], [NAME])
        self.assertNotIn(API_KEY, SERVER.log_text())


class Metrics(unittest.TestCase):
    def test_counters_move_by_the_right_amounts(self):
        m0 = {k: SERVER.metric(k) for k in ("ceiling:prompt_tokens_total",
                                            "ceiling:generation_tokens_total",
                                            "ceiling:e2e_request_latency_seconds_count",
                                            "ceiling:time_to_first_token_seconds_count")}
        len0 = SERVER.metric("ceiling:request_success_total", finished_reason="length")
        r = client().completions.create(model=NAME, prompt="Once upon a time", max_tokens=7,
                                        temperature=0, n=2, extra_body={"ignore_eos": True})
        self.assertEqual(SERVER.metric("ceiling:prompt_tokens_total"),
                         m0["ceiling:prompt_tokens_total"] + 2 * r.usage.prompt_tokens)
        self.assertEqual(SERVER.metric("ceiling:generation_tokens_total"),
                         m0["ceiling:generation_tokens_total"] + 14)
        self.assertEqual(SERVER.metric("ceiling:request_success_total", finished_reason="length"),
                         len0 + 2)
        self.assertEqual(SERVER.metric("ceiling:e2e_request_latency_seconds_count"),
                         m0["ceiling:e2e_request_latency_seconds_count"] + 2)
        self.assertEqual(SERVER.metric("ceiling:time_to_first_token_seconds_count"),
                         m0["ceiling:time_to_first_token_seconds_count"] + 2)
        self.assertEqual(SERVER.metric("ceiling:num_requests_running"), 0)
        self.assertGreaterEqual(SERVER.metric("ceiling:prefix_cache_hits_total"), 1)


def open_stream(max_tokens=400):
    """A raw streaming request; returns the connection once its first chunk arrived."""
    c = http.client.HTTPConnection("127.0.0.1", SERVER.port, timeout=60)
    c.request("POST", "/v1/completions", json.dumps(
        {"prompt": "Once upon a time", "max_tokens": max_tokens, "stream": True,
         "ignore_eos": True, "temperature": 0}),
        {"Authorization": f"Bearer {API_KEY}", "Content-Type": "application/json"})
    return c


class BackPressure(unittest.TestCase):
    def wait_for(self, cond, timeout=30):
        deadline = time.time() + timeout
        while time.time() < deadline:
            if cond():
                return True
            time.sleep(0.05)
        return False

    def test_429_health_and_disconnects_free_blocks(self):
        total = SERVER.metric("ceiling:kv_cache_blocks")
        # --max-num-seqs 4 + --max-queued-requests 2: six requests in flight fill the server.
        streams = [open_stream() for _ in range(6)]
        responses = [s.getresponse() for s in streams]
        for r in responses:  # (two of them wait in the engine's queue: no tokens yet)
            self.assertEqual(r.status, 200)
        t0 = time.time()
        with self.assertRaises(openai.RateLimitError):
            client().completions.create(model=NAME, prompt="hi", max_tokens=2)
        self.assertLess(time.time() - t0, 5)
        self.assertEqual(SERVER.get("/health")[0], 200)
        self.assertTrue(self.wait_for(  # (gauges as of the engine's last step)
            lambda: SERVER.metric("ceiling:num_requests_running") == 4
            and SERVER.metric("ceiling:num_requests_waiting") == 2))
        self.assertLess(SERVER.metric("ceiling:kv_cache_free_blocks"), total)
        for s in streams:  # clients vanish mid-stream (and while queued)
            s.sock.shutdown(socket.SHUT_RDWR)
            s.close()
        self.assertTrue(self.wait_for(
            lambda: SERVER.metric("ceiling:kv_cache_free_blocks") == total
            and SERVER.metric("ceiling:num_requests_running") == 0
            and SERVER.metric("ceiling:num_requests_waiting") == 0))
        self.assertGreaterEqual(SERVER.metric("ceiling:request_success_total",
                                              finished_reason="abort"), 6)
        # A non-streaming request whose client leaves is aborted too.
        c = http.client.HTTPConnection("127.0.0.1", SERVER.port, timeout=60)
        c.request("POST", "/v1/completions", json.dumps(
            {"prompt": "Once upon a time", "max_tokens": 400, "ignore_eos": True}),
            {"Authorization": f"Bearer {API_KEY}", "Content-Type": "application/json"})
        self.assertTrue(self.wait_for(lambda: SERVER.metric("ceiling:num_requests_running") == 1))
        c.sock.shutdown(socket.SHUT_RDWR)
        c.close()
        self.assertTrue(self.wait_for(
            lambda: SERVER.metric("ceiling:num_requests_running") == 0
            and SERVER.metric("ceiling:kv_cache_free_blocks") == total, timeout=10))


def drain_test():
    """SIGTERM while a stream runs: /health turns 503, the stream finishes, exit code 0."""
    c = open_stream(max_tokens=150)
    r = c.getresponse()
    deadline = time.time() + 30
    while time.time() < deadline and SERVER.metric("ceiling:num_requests_running") != 1:
        time.sleep(0.05)
    SERVER.proc.send_signal(15)
    deadline = time.time() + 10
    while time.time() < deadline and SERVER.get("/health")[0] != 503:
        time.sleep(0.05)
    assert SERVER.get("/health")[0] == 503, "health did not turn 503 while draining"
    status, _ = SERVER.post_json("/v1/completions", {"prompt": "x", "max_tokens": 2})
    assert status == 503, status
    body = r.read().decode()
    assert body.rstrip().endswith("data: [DONE]"), body[-200:]
    assert '"finish_reason":"length"' in body, body[-400:]
    rc = SERVER.proc.wait(60)
    assert rc == 0, rc
    print("ok   SIGTERM drains: health 503, stream finished, exit 0")


def main():
    global SERVER
    warnings.simplefilter("ignore", ResourceWarning)  # the dropped clients' sockets
    SERVER = Server(BIN, MODEL, name=NAME, extra=[
        "--max-model-len", str(MAX_MODEL_LEN), "--num-kv-blocks", "256", "--max-num-seqs", "4",
        "--max-queued-requests", "2", "--max-request-bytes", str(64 << 10), "--max-n", "8",
        "--shutdown-timeout", "30"])
    try:
        result = unittest.main(argv=[sys.argv[0], "-v"], exit=False, warnings="ignore").result
        ok = result.wasSuccessful()
        if ok:
            drain_test()
    finally:
        rc = SERVER.stop()
        if rc not in (0, None):
            print(SERVER.log_text()[-3000:])
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
