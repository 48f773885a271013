#!/usr/bin/env python3
"""Hugging Face transformers' decode speed on a model directory: the baseline that
`ceiling bench latency` is compared with (bench/run_latency_on_gpu.sh runs both in one session).

Same model directory (the random-weight models of `ceiling make-test-model`), same GPU, bf16
weights, random prompts of --input-len tokens (batch 1 by default), greedy. Method: PyTorch eager
(no torch.compile, no CUDA graphs), `model.generate(do_sample=False, min_new_tokens=n,
max_new_tokens=n)` with transformers' default KV cache and attention (sdpa unless --attn). The
decode rate excludes the prefill: tokens/s = batch * (M - 1) / (t(M) - t(1)), where t(n) is the
median wall time (CUDA-synchronized) of generate() with n new tokens, after a warm-up.

Writes a JSON object (--out) and, with --merge FILE..., sets `baseline_tokens_per_s` and a
`baseline` object in ceiling result files of the same model, input and output lengths.
"""
import argparse
import json
import os
import statistics
import sys
import time

import torch
import transformers
from transformers import AutoModelForCausalLM


def load(model_dir, attn):
    kwargs = dict(attn_implementation=attn, device_map="cuda")
    try:
        model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.bfloat16, **kwargs)
    except TypeError:  # transformers < 4.56 names it torch_dtype
        model = AutoModelForCausalLM.from_pretrained(model_dir, torch_dtype=torch.bfloat16, **kwargs)
    return model.eval()


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model", required=True, help="Hugging Face model directory")
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--input-len", type=int, default=128)
    p.add_argument("--output-len", type=int, default=256)
    p.add_argument("--reps", type=int, default=3, help="timed generate() calls per length")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--attn", default="sdpa", help="attn_implementation (sdpa, eager, ...)")
    p.add_argument("--out", help="write the baseline JSON here")
    p.add_argument("--merge", nargs="*", default=[], help="ceiling result files to fill in")
    a = p.parse_args()
    if a.output_len < 2:
        sys.exit("hf_baseline: --output-len must be >= 2")

    t0 = time.perf_counter()
    model = load(a.model, a.attn)
    load_s = time.perf_counter() - t0
    gen_cpu = torch.Generator().manual_seed(a.seed)
    ids = torch.randint(0, model.config.vocab_size, (a.batch, a.input_len), generator=gen_cpu)
    ids = ids.to("cuda")
    mask = torch.ones_like(ids)

    def generate(n):
        torch.cuda.synchronize()
        t = time.perf_counter()
        with torch.inference_mode():
            out = model.generate(input_ids=ids, attention_mask=mask, do_sample=False,
                                 max_new_tokens=n, min_new_tokens=n, pad_token_id=0,
                                 num_beams=1)
        torch.cuda.synchronize()
        assert out.shape[1] == a.input_len + n, out.shape
        return time.perf_counter() - t

    generate(8)  # warm-up: kernels, allocator, cuBLAS handles
    t1 = statistics.median(generate(1) for _ in range(a.reps))
    tm = statistics.median(generate(a.output_len) for _ in range(a.reps))
    decode_s = tm - t1
    tps = a.batch * (a.output_len - 1) / decode_s
    result = {
        "baseline": "transformers",
        "model_dir": a.model,
        "gpu": torch.cuda.get_device_name(0),
        "batch": a.batch,
        "input_len": a.input_len,
        "output_len": a.output_len,
        "tokens_per_s": tps,
        "ms_per_token": 1000.0 * decode_s / (a.output_len - 1),
        "ttft_ms": 1000.0 * t1,
        "generate_s": tm,
        "load_s": load_s,
        "attn_implementation": a.attn,
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "method": "PyTorch eager, model.generate(do_sample=False, min_new_tokens=max_new_tokens=n); "
                  "tokens/s = batch*(M-1)/(t(M)-t(1)), medians of %d calls after a warm-up" % a.reps,
    }
    print(json.dumps(result, indent=2))
    if a.out:
        with open(a.out, "w") as f:
            json.dump(result, f, indent=2)
    for path in a.merge:
        with open(path) as f:
            r = json.load(f)
        same = (r.get("input_len"), r.get("output_len")) == (a.input_len, a.output_len)
        if not same or os.path.realpath(r.get("model_dir", "")) != os.path.realpath(a.model):
            print(f"hf_baseline: {path} is another model or shape; not merged", file=sys.stderr)
            continue
        r["baseline_tokens_per_s"] = tps
        r["baseline"] = result
        with open(path, "w") as f:
            json.dump(r, f, indent=2)
            f.write("\n")


if __name__ == "__main__":
    main()
