#!/usr/bin/env python3
"""Independent reference for SmolLM2-135M-Instruct (the ctest fixture of engine_smollm2_test).

A NumPy forward written here from the Llama equations (fp32 math on the bf16 weights read
straight from model.safetensors), with the prompt built by jinja2 (the model's chat template)
and Hugging Face `tokenizers` -- no ceiling code. For each prompt it greedy-decodes STEPS tokens
and writes, into OUT/smollm2_reference.json, the prompt ids, the greedy ids and the logits of
each step, for the C++ test to compare with CpuOps.
Usage: smollm2_reference.py MODEL_DIR OUT_DIR. Exit 77 (skipped) when the model is not there
(scripts/fetch_smollm2.sh writes it).
"""
import json
import os
import struct
import sys

STEPS = 3
QUESTIONS = ["What is the capital of France?", "Name a colour."]


def load_safetensors_bf16(path):
    import numpy as np
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        base = 8 + n
    raw = np.memmap(path, dtype=np.uint8, mode="r")
    out = {}
    for name, h in header.items():
        if name == "__metadata__":
            continue
        assert h["dtype"] == "BF16", name
        a, b = h["data_offsets"]
        bits = np.frombuffer(raw[base + a:base + b], dtype="<u2").astype(np.uint32) << 16
        out[name] = bits.view(np.float32).reshape(h["shape"])
    return out


class Llama:
    def __init__(self, cfg, w):
        self.c, self.w = cfg, w
        self.hd = cfg["head_dim"]

    def rms(self, x, g):
        import numpy as np
        return g * (x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + self.c["rms_norm_eps"]))

    def rope(self, x, n_heads):  # x [T, n_heads*hd], rotate-half (Hugging Face layout)
        import numpy as np
        T, hd = x.shape[0], self.hd
        inv = 1.0 / (self.c["rope_theta"] ** (np.arange(0, hd, 2, dtype=np.float64) / hd))
        ang = np.arange(T, dtype=np.float64)[:, None] * inv[None, :]
        cos = np.concatenate([np.cos(ang)] * 2, axis=1).astype(np.float32)[:, None, :]
        sin = np.concatenate([np.sin(ang)] * 2, axis=1).astype(np.float32)[:, None, :]
        x = x.reshape(T, n_heads, hd)
        rot = np.concatenate([-x[..., hd // 2:], x[..., :hd // 2]], axis=-1)
        return (x * cos + rot * sin).reshape(T, n_heads * hd)

    def logits(self, ids):  # logits of the last position, full causal recompute
        import numpy as np
        c, w, hd = self.c, self.w, self.hd
        H, K = c["num_attention_heads"], c["num_key_value_heads"]
        T = len(ids)
        x = w["model.embed_tokens.weight"][ids]
        mask = np.triu(np.full((T, T), -np.inf, dtype=np.float32), 1)
        for i in range(c["num_hidden_layers"]):
            p = f"model.layers.{i}."
            h = self.rms(x, w[p + "input_layernorm.weight"])
            q = self.rope(h @ w[p + "self_attn.q_proj.weight"].T, H).reshape(T, H, hd)
            k = self.rope(h @ w[p + "self_attn.k_proj.weight"].T, K).reshape(T, K, hd)
            v = (h @ w[p + "self_attn.v_proj.weight"].T).reshape(T, K, hd)
            att = np.empty((T, H, hd), dtype=np.float32)
            for j in range(H):
                kv = j // (H // K)
                s = q[:, j] @ k[:, kv].T / np.sqrt(np.float32(hd)) + mask
                s = np.exp(s - s.max(axis=1, keepdims=True))
                att[:, j] = (s / s.sum(axis=1, keepdims=True)) @ v[:, kv]
            x = x + att.reshape(T, H * hd) @ w[p + "self_attn.o_proj.weight"].T
            h = self.rms(x, w[p + "post_attention_layernorm.weight"])
            g = h @ w[p + "mlp.gate_proj.weight"].T
            x = x + ((g / (1 + np.exp(-g))) * (h @ w[p + "mlp.up_proj.weight"].T)) @ w[p + "mlp.down_proj.weight"].T
        x = self.rms(x[-1], w["model.norm.weight"])
        return w["model.embed_tokens.weight"] @ x  # tied LM head


def main():
    model, out = sys.argv[1], sys.argv[2]
    if not os.path.exists(os.path.join(model, "model.safetensors")):
        print(f"SKIP: {model} missing (run scripts/fetch_smollm2.sh)")
        return 77
    import jinja2
    import numpy as np
    from tokenizers import Tokenizer
    cfg = json.load(open(os.path.join(model, "config.json")))
    tcfg = json.load(open(os.path.join(model, "tokenizer_config.json")))
    tok = Tokenizer.from_file(os.path.join(model, "tokenizer.json"))
    net = Llama(cfg, load_safetensors_bf16(os.path.join(model, "model.safetensors")))
    template = jinja2.Environment().from_string(tcfg["chat_template"])
    cases = []
    for question in QUESTIONS:
        text = template.render(messages=[{"role": "user", "content": question}], add_generation_prompt=True)
        prompt = tok.encode(text, add_special_tokens=False).ids
        ids, steps = list(prompt), []
        for _ in range(STEPS):
            lg = net.logits(ids).astype(np.float32)
            steps.append([float(v) for v in lg])
            ids.append(int(np.argmax(lg)))
        cases.append({"question": question, "prompt_ids": prompt, "greedy_ids": ids[len(prompt):],
                      "logits": steps})
        print(f"  {question!r}: greedy {tok.decode(ids[len(prompt):])!r}")
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "smollm2_reference.json"), "w") as f:
        json.dump({"model": model, "cases": cases}, f)
    return 0


if __name__ == "__main__":
    sys.exit(main())
