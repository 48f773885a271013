#!/usr/bin/env python3
"""Golden outputs of Hugging Face transformers for the tiny test models, for the CpuOps parity test
(tests/parity/parity_test.cpp).

    python3 tests/parity/make_golden.py --models DIR --out tests/parity/golden [--device cpu|cuda]

DIR holds one directory per preset, written by `ceiling make-test-model --preset P --out DIR/P
--seed S` (pass the same S as --seed; it is recorded for the C++ side). For each preset the
script runs transformers in fp32 (eager attention, TF32 off) on fixed prompts of token ids and
writes golden/<preset>.json:

  preset, seed, model_checksum64 (of model.safetensors, so the C++ side knows it regenerated the
  same weights), versions, and per prompt: ids, top-8 (ids, logits) at every position, greedy
  continuation of 32 tokens with the top-1/top-2 logit gap of every step;

plus golden/<preset>.last.f32 — the full last-position logits of prompt 0 (little-endian fp32).
"""
import argparse
import json
import os
import sys

import numpy as np

PRESETS = ["tiny-llama", "tiny-mistral", "tiny-qwen2", "tiny-qwen3"]
TOPK = 8
GREEDY_STEPS = 32


def checksum64(path):
    """Σ word_i · (2i + 1) mod 2^64 over the file as little-endian uint64 words (zero-padded); the
    C++ test computes the same to know it regenerated identical weights."""
    data = open(path, "rb").read()
    data += b"\0" * (-len(data) % 8)
    w = np.frombuffer(data, dtype="<u8")
    k = np.arange(w.size, dtype=np.uint64) * np.uint64(2) + np.uint64(1)
    with np.errstate(over="ignore"):
        return int(np.sum(w * k, dtype=np.uint64))


def prompts(bos):
    """Fixed prompts of token ids: a short one, one crossing 16-token KV blocks, and a long one.
    Ids are < 32000, valid in every preset's tokenizer (so the model dirs need no tokenizer here)."""
    rng = np.random.default_rng(20251121)
    out = []
    for n in (7, 33, 70):
        ids = rng.integers(3, 32000, size=n).tolist()
        if bos is not None:
            ids[0] = bos
        out.append([int(x) for x in ids])
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--models", required=True, help="directory with one model dir per preset")
    ap.add_argument("--out", required=True, help="golden output directory")
    ap.add_argument("--seed", type=int, default=1234, help="seed the models were written with")
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    ap.add_argument("--presets", nargs="*", default=PRESETS)
    args = ap.parse_args()

    import torch
    import transformers
    from transformers import AutoModelForCausalLM

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.set_grad_enabled(False)
    os.makedirs(args.out, exist_ok=True)
    for preset in args.presets:
        d = os.path.join(args.models, preset)
        if not os.path.isdir(d):
            sys.exit(f"{d}: missing (run ceiling make-test-model --preset {preset} --out {d})")
        kw = dict(attn_implementation="eager", output_loading_info=True)
        try:
            model, info = AutoModelForCausalLM.from_pretrained(d, dtype=torch.float32, **kw)
        except TypeError:
            model, info = AutoModelForCausalLM.from_pretrained(d, torch_dtype=torch.float32, **kw)
        bad = {k: v for k, v in info.items() if v and k in ("missing_keys", "unexpected_keys",
                                                            "mismatched_keys")}
        if bad:
            sys.exit(f"{d}: transformers did not load every weight: {bad}")
        model = model.to(args.device).eval()
        cfg = model.config
        golden = {
            "preset": preset,
            "seed": args.seed,
            "model_checksum64": f"{checksum64(os.path.join(d, 'model.safetensors')):016x}",
            "transformers": transformers.__version__,
            "torch": torch.__version__,
            "device": args.device,
            "vocab_size": cfg.vocab_size,
            "prompts": [],
        }
        for pi, ids in enumerate(prompts(cfg.bos_token_id)):
            x = torch.tensor([ids], device=args.device)
            logits = model(x).logits[0].float().cpu().numpy()  # [T, V]
            top = np.argsort(-logits, axis=1, kind="stable")[:, :TOPK]
            entry = {
                "ids": ids,
                "top_ids": top.tolist(),
                "top_logits": [[float(logits[t, i]) for i in row] for t, row in enumerate(top)],
            }
            if pi == 0:
                name = f"{preset}.last.f32"
                logits[-1].astype("<f4").tofile(os.path.join(args.out, name))
                entry["last_logits_file"] = name
            # Greedy continuation with the KV cache (eos ignored).
            seq, gaps = [], []
            out = model(x, use_cache=True)
            past = out.past_key_values
            last = out.logits[0, -1].float()
            for _ in range(GREEDY_STEPS):
                v, i = torch.topk(last, 2)
                seq.append(int(i[0]))
                gaps.append(float(v[0] - v[1]))
                nxt = torch.tensor([[seq[-1]]], device=args.device)
                out = model(nxt, past_key_values=past, use_cache=True)
                past = out.past_key_values
                last = out.logits[0, -1].float()
            entry["greedy"] = seq
            entry["greedy_gaps"] = gaps
            golden["prompts"].append(entry)
        with open(os.path.join(args.out, f"{preset}.json"), "w") as f:
            json.dump(golden, f, separators=(",", ":"))
        print(f"{preset}: {len(golden['prompts'])} prompts, greedy {golden['prompts'][0]['greedy'][:8]}...")


if __name__ == "__main__":
    main()
