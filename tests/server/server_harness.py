"""Start `ceiling serve` on a free loopback port, wait for /health, talk raw HTTP, read /metrics,
and stop it with SIGTERM (checking it exits 0). Shared by the server tests; exits 77 (ctest SKIP)
when the model is missing."""
import http.client
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time

SKIP = 77
API_KEY = "sk-ceiling-test"


def skip(why):
    print(f"SKIP: {why}", flush=True)
    sys.exit(SKIP)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    def __init__(self, binary, model, extra=(), name="test-model", api_key=API_KEY):
        if not os.path.isfile(os.path.join(model, "config.json")):
            skip(f"{model} missing (scripts/fetch_smollm2.sh)")
        self.port = free_port()
        self.name = name
        self.api_key = api_key
        self.log = open(f"/tmp/ceiling_serve_{self.port}.log", "w+")
        args = [binary, "serve", "--model", model, "--port", str(self.port),
                "--served-model-name", name, "--threads", "2"] + list(extra)
        if api_key:
            args += ["--api-key", api_key]
        self.proc = subprocess.Popen(args, stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.time() + 120
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"server exited early:\n{self.log_text()}")
            try:
                if self.get("/health")[0] == 200:
                    break
            except OSError:
                pass
            time.sleep(0.1)
        else:
            raise RuntimeError(f"server not healthy in time:\n{self.log_text()}")
        self.base_url = f"http://127.0.0.1:{self.port}/v1"

    def log_text(self):
        self.log.flush()
        self.log.seek(0)
        return self.log.read()

    def request(self, method, path, body=None, headers=None, auth=True, timeout=120):
        h = dict(headers or {})
        if auth and self.api_key:
            h["Authorization"] = f"Bearer {self.api_key}"
        if isinstance(body, (dict, list)):
            body = json.dumps(body)
            h.setdefault("Content-Type", "application/json")
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        try:
            c.request(method, path, body=body, headers=h)
            r = c.getresponse()
            data = r.read()
            return r.status, data
        finally:
            c.close()

    def get(self, path, **kw):
        return self.request("GET", path, auth=False, **kw)

    def post_json(self, path, body, **kw):
        status, data = self.request("POST", path, body, **kw)
        try:
            return status, json.loads(data)
        except ValueError:
            return status, data

    def metrics(self):
        """{(name, frozenset(labels)): value} of /metrics, every line checked against the format."""
        status, data = self.get("/metrics")
        assert status == 200, status
        out = {}
        line_re = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})? (\S+)$')
        for line in data.decode().splitlines():
            if line.startswith("#"):
                assert re.match(r"^# (HELP|TYPE) [a-zA-Z_:][a-zA-Z0-9_:]* .+$", line), line
                continue
            m = line_re.match(line)
            assert m, line
            labels = frozenset(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', m.group(3) or ""))
            out[(m.group(1), labels)] = float(m.group(4))
        return out

    def metric(self, name, **labels):
        want = {("model_name", self.name)} | set(labels.items())
        for (n, ls), v in self.metrics().items():
            if n == name and set(ls) == want:
                return v
        raise KeyError(name)

    def rss_kb(self):
        with open(f"/proc/{self.proc.pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
        return 0

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        """Stops the server; shows its log when the test failed; a clean test fails when the
        server did not exit 0 after SIGTERM."""
        rc = self.stop()
        if exc_type is not None or rc != 0:
            print(self.log_text()[-3000:], flush=True)
        if exc_type is None:
            assert rc == 0, f"ceiling serve exited {rc} after SIGTERM"
        return False

    def stop(self, timeout=60):
        """SIGTERM; returns the exit code."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            return -9
