#!/usr/bin/env python3
"""Times the PyTorch call a user would write instead of each ceiling kernel, for the same cases,
in the same run, on the same GPU, and merges the result into the `ceiling bench kernels` JSON:
every case gets `baseline_name`, `baseline_ms` and `speedup_vs_baseline` (= baseline / ceiling).

Method (the same as the C++ harness, src/bench/timing.h): inputs rotate over sets covering 4× the
L2; one call is estimated, then `per_rep` calls (a replay of ≥ 300 µs, so a replay's graph launch
stays ≤ 1 %; 30 µs before run r9) are captured in a CUDA graph per group of sets; 100 replays are
timed with CUDA events; the median per call is reported. Graph capture keeps Python and launch
overhead out, as for ceiling's own numbers.

usage: python3 bench/torch_baseline.py --merge RESULT.json [--reps 100] [--filter REGEX]
"""
import argparse
import json
import math
import re
import sys
import time

import torch
import torch.nn.functional as F

BF16 = torch.bfloat16


def rand(shape, lo=-1.0, hi=1.0, dtype=BF16):
    return (torch.rand(shape, device="cuda", dtype=torch.float32) * (hi - lo) + lo).to(dtype)


# Each builder returns (make_set, call): make_set() allocates one input set, call(set) runs the op.
def b_embedding(p):
    T, H, V = p["T"], p["H"], p["V"]
    table = rand((V, H))
    return (lambda: (torch.randint(0, V, (T,), device="cuda"),), lambda s: F.embedding(s[0], table)), "F.embedding"


def b_rms_norm(p):
    T, H, res = p["T"], p["H"], p.get("residual", False)
    w = rand((H,), 0.5, 1.5)

    def call(s):
        r = s[0] + s[1] if res else s[0]
        return F.rms_norm(r, (H,), w, 1e-5), r

    return (lambda: (rand((T, H), -2, 2), rand((T, H), -2, 2)), call), "x + r; F.rms_norm"


def b_rms_norm_heads(p):
    T, heads, D, stride = p["T"], p["heads"], p["D"], p["stride"]
    w = rand((D,), 0.5, 1.5)

    def call(s):
        q = s[0][:, : heads * D].view(T, heads, D)
        return F.rms_norm(q, (D,), w, 1e-6)

    return (lambda: (rand((T, stride), -2, 2),), call), "F.rms_norm on a strided view"


def b_silu_mul(p):
    T, I = p["T"], p["I"]

    def call(s):
        g, u = s[0].chunk(2, dim=-1)
        return F.silu(g) * u

    return (lambda: (rand((T, 2 * I), -4, 4),), call), "F.silu(g) * u"


def b_rope_kv(p):
    T, Hq, Hkv, D, bs, nb = p["T"], p["Hq"], p["Hkv"], p["D"], p["block_size"], p["num_blocks"]
    qk_norm = p.get("qk_norm", False)
    inv_freq = 1.0 / (500000.0 ** (torch.arange(0, D, 2, device="cuda", dtype=torch.float32) / D))
    kc = rand((nb, Hkv, bs, D))
    vc = rand((nb, Hkv, bs, D))
    qw, kw = rand((D,), 0.5, 1.5), rand((D,), 0.5, 1.5)

    def rot(x, cos, sin):
        x1, x2 = x.chunk(2, dim=-1)
        return x * cos + torch.cat((-x2, x1), dim=-1) * sin

    def make():
        qkv = rand((T, (Hq + 2 * Hkv) * D), -2, 2)
        pos = torch.randint(0, 8192, (T,), device="cuda")
        slots = torch.randperm(nb * bs, device="cuda")[:T]
        return qkv, pos, slots

    def call(s):
        qkv, pos, slots = s
        q, k, v = qkv.split([Hq * D, Hkv * D, Hkv * D], dim=-1)
        q, k, v = q.view(T, Hq, D), k.view(T, Hkv, D), v.view(T, Hkv, D)
        if qk_norm:
            q, k = F.rms_norm(q, (D,), qw, 1e-6), F.rms_norm(k, (D,), kw, 1e-6)
        f = pos.float()[:, None] * inv_freq[None, :]
        emb = torch.cat((f, f), dim=-1)
        cos, sin = emb.cos()[:, None, :].to(BF16), emb.sin()[:, None, :].to(BF16)
        qkv[:, : Hq * D].copy_(rot(q, cos, sin).view(T, Hq * D))
        blk, row = slots // bs, slots % bs
        kc[blk, :, row, :] = rot(k, cos, sin)
        vc[blk, :, row, :] = v

    return (make, call), "rotate-half + index_put into the paged cache (torch composite)"


def b_linear(p):
    M, N, K, bias = p["M"], p["N"], p["K"], p.get("bias", False)
    f32 = p.get("out_dtype") == "f32"

    def call(s):
        y = F.linear(s[0], s[1], s[2] if bias else None)
        return y.float() if f32 else y

    name = "F.linear" + (" + .float()" if f32 else "")
    return (lambda: (rand((M, K)), rand((N, K)), rand((N,))), call), name


def b_linear_rope(p):
    # RMSNorm (unless the input is plain), the QKV projection, then RoPE + the paged KV write
    # (b_rope_kv's torch composite).
    M, K, Hq, Hkv, D = p["M"], p["K"], p["Hq"], p["Hkv"], p["D"]
    norm = p.get("input", "rms_norm") == "rms_norm"
    g = rand((K,), 0.2, 1.5)
    W = rand(((Hq + 2 * Hkv) * D, K), -0.1, 0.1)
    (make_rope, call_rope), _ = b_rope_kv({"T": M, "Hq": Hq, "Hkv": Hkv, "D": D, "block_size": 16,
                                            "num_blocks": 7})

    def make():
        _, pos, slots = make_rope()
        return rand((M, K), -2, 2), pos, slots

    def call(s):
        qkv = F.linear(F.rms_norm(s[0], (K,), g, 1e-5) if norm else s[0], W)
        call_rope((qkv, s[1], s[2]))
        return qkv

    name = "F.linear; rotate-half + index_put (torch composite)"
    return (make, call), ("F.rms_norm; " if norm else "") + name


def _fused_linear(p, lin, make_w):
    # The unfused torch sequence a fused GEMV replaces around the projection lin(x, w, bias):
    # RMSNorm, the projection, then the residual add (in place) or SiLU(gate) * up.
    M, N, K, bias = p["M"], p["N"], p["K"], p.get("bias", False)
    inp, acc, pairs = p["input"], p["accumulate"], p.get("silu_pairs", False)
    g = rand((K,), 0.2, 1.5)

    def call(s):
        x = F.rms_norm(s[0], (K,), g, 1e-5) if inp == "rms_norm" else s[0]
        y = lin(x, s[1], s[2] if bias else None)
        if pairs:
            a, u = y.chunk(2, dim=-1)
            return F.silu(a) * u
        return s[3].add_(y) if acc else y

    def make():
        return rand((M, K), -2, 2), make_w(), rand((N,)), rand((M, N), -4, 4)

    name = ("F.rms_norm; " if inp == "rms_norm" else "") + "{}"
    name += "; F.silu(g) * u" if pairs else ("; residual.add_" if acc else "")
    return (make, call), name


def b_linear_fused(p):
    if p.get("rope"):
        return b_linear_rope(p)
    (make, call), name = _fused_linear(p, F.linear, lambda: rand((p["N"], p["K"]), -0.1, 0.1))
    return (make, call), name.format("F.linear")


def b_linear_fp8_w8a8(p):
    # The prefill-sized fp8 projection as torch runs W8A8: x quantized per token (dynamic, amax /
    # 448), torch._scaled_mm with row-wise scales (x's per row, W's per output channel), then the
    # residual add where the case has one. Accumulation as the case's: fast (ceiling's default,
    # use_fast_accum=True) unless the case is the precise comparison.
    M, N, K = p["M"], p["N"], p["K"]
    fast = bool(p.get("fast_accum", False))
    f8 = torch.float8_e4m3fn
    q = dict(p, input="plain", accumulate=p.get("residual", False))

    def make_w():
        return rand((N, K), -448, 448).to(f8), rand((1, N), 1e-4, 2e-4, torch.float32)

    def lin(x, w, b):
        xs = (x.abs().amax(dim=1, keepdim=True).float() / 448.0).clamp(min=1e-12)
        xq = (x.float() / xs).to(f8)
        y = torch._scaled_mm(xq, w[0].t(), scale_a=xs, scale_b=w[1], out_dtype=BF16,
                             use_fast_accum=fast)
        return y if b is None else y + b

    (make, call), name = _fused_linear(q, lin, make_w)
    what = "torch._scaled_mm (x fp8 per token, W per row{})".format(", fast accum" if fast else "")
    return (make, call), name.format(what)


def b_linear_quant(p):
    # b_linear_fused with the projection in fp8 or int4: the candidates a user has in torch
    # itself, the fastest reported. fp8: torch._scaled_mm with the activation quantized per tensor
    # (dynamic) and W's row scales (M padded to 16). int4: the tinygemm kernel
    # (torch._weight_int4pack_mm, what gpt-fast / torchao's int4 weight-only call), and
    # dequantize + F.linear.
    if p.get("rope"):
        raise RuntimeError("no torch baseline for the quantized RoPE epilogue")
    M, N, K = p["M"], p["N"], p["K"]
    fmt, G = p["weights"], p.get("group_size", 128)

    def fused(lin, make_w, name):
        def lin_bias(x, w, b):
            y = lin(x, w)
            return y if b is None else y + b
        built, _ = _fused_linear(p, lin_bias, make_w)
        return built, name

    if fmt == "fp8":
        Mp = (M + 15) // 16 * 16
        f8 = torch.float8_e4m3fn

        def make_w():
            return rand((N, K), -448, 448).to(f8), rand((1, N), 1e-4, 2e-4, torch.float32)

        def lin(x, w):
            xs = (x.abs().amax().float() / 448.0).clamp(min=1e-12)
            xq = (x.float() / xs).to(f8)
            if Mp != M:
                xq = F.pad(xq.float(), (0, 0, 0, Mp - M)).to(f8)
            y = torch._scaled_mm(xq, w[0].t(), scale_a=xs.view(1, 1).expand(Mp, 1).contiguous(),
                                 scale_b=w[1], out_dtype=BF16)
            return y[:M]
        return [fused(lin, make_w, "torch._scaled_mm (x fp8 dynamic, W per row)")]

    def make_q():  # [N, K] values 0..15
        return torch.randint(0, 16, (N, K), device="cuda", dtype=torch.uint8)

    def make_tiny():
        q = make_q()
        packed = (q[:, ::2] << 4 | q[:, 1::2]).contiguous()
        w = torch._convert_weight_to_int4pack(packed, 8)
        sz = torch.stack([rand((K // G, N), 2e-3, 2e-2), rand((K // G, N), -0.1, 0.1)], dim=2)
        return w, sz.contiguous()

    def lin_tiny(x, w):
        return torch._weight_int4pack_mm(x, w[0], G, w[1])

    def make_deq():
        return make_q(), rand((N, K // G, 1), 2e-3, 2e-2), rand((N, K // G, 1), 0, 15)

    def lin_deq(x, w):
        wd = ((w[0].view(N, K // G, G).to(BF16) - w[2]) * w[1]).view(N, K)
        return F.linear(x, wd)
    return [fused(lin_tiny, make_tiny, "torch._weight_int4pack_mm (tinygemm)"),
            fused(lin_deq, make_deq, "dequantize + F.linear")]


def b_argmax(p):
    S, V = p["S"], p["V"]
    return (lambda: (rand((S, V), -10, 10, torch.float32),), lambda s: torch.argmax(s[0], dim=-1)), "torch.argmax"


def b_sample(p):
    S, V = p["S"], p["V"]
    T, k, top_p, min_p = p["temperature"], p["top_k"], p["top_p"], p["min_p"]
    rep, pres, freq = p["repetition_penalty"], p["presence_penalty"], p["frequency_penalty"]

    def make():
        counts = torch.zeros((S, V), device="cuda", dtype=torch.int32)
        counts.scatter_(1, torch.randint(0, V, (S, 48), device="cuda"), 1)
        return rand((S, V), -8, 8, torch.float32), counts

    def call(s):
        l, c = s
        if rep != 1 or pres != 0 or freq != 0:  # neutral values: a user's code skips them
            seen = c > 0
            l = torch.where(seen, torch.where(l > 0, l / rep, l * rep), l) - pres * seen - freq * c
        l = l / T
        if k > 0:
            kth = torch.topk(l, k, dim=-1).values[:, -1:]
            l = l.masked_fill(l < kth, float("-inf"))
        probs = torch.softmax(l, dim=-1)
        if top_p < 1:
            sp, si = probs.sort(dim=-1, descending=True)
            drop = sp.cumsum(-1) - sp > top_p
            probs = probs.scatter(1, si, sp.masked_fill(drop, 0))
        if min_p > 0:
            probs = probs.masked_fill(probs < min_p * probs.amax(-1, keepdim=True), 0)
        q = torch.empty_like(probs).exponential_()
        return torch.argmax(probs / q, dim=-1)

    return (make, call), "torch composite (penalties, topk, softmax, sort+cumsum, exponential race)"


def _sdpa_variants(make, q_shape_call):
    """One (make, call) per SDPA backend; backends that cannot run the shape are dropped later."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    out = []
    for name, be in (("cudnn", SDPBackend.CUDNN_ATTENTION), ("flash", SDPBackend.FLASH_ATTENTION),
                     ("efficient", SDPBackend.EFFICIENT_ATTENTION)):
        def call(s, be=be):
            with sdpa_kernel([be]):
                return q_shape_call(s)
        out.append(((make, call), f"SDPA {name} (contiguous KV)"))
    return out


def b_attention_decode(p):
    # ceiling reads a paged cache; the user's baseline is SDPA over contiguous K/V, GQA via
    # enable_gqa (no repeat_interleave copy).
    B, ctx, Hq, Hkv, D = p["batch"], p["ctx"], p["Hq"], p["Hkv"], p["D"]
    if not p.get("uniform", True):
        raise ValueError("baseline needs equal context lengths")
    if p.get("kv_dtype", "bf16") == "fp8":
        # An fp8 cache: torch has no fp8 SDPA here, so K/V are dequantized (· scale, as ceiling's
        # kernel applies it) into bf16 and SDPA runs on them; both steps are timed.
        f8 = torch.float8_e4m3fn
        make = lambda: (rand((B, Hq, 1, D)), rand((B, Hkv, ctx, D), -64, 64).to(f8),
                        rand((B, Hkv, ctx, D), -64, 64).to(f8))
        return [((m, c), name.replace("(contiguous KV)", "on dequantized fp8 KV"))
                for (m, c), name in _sdpa_variants(make, lambda s: F.scaled_dot_product_attention(
                    s[0], s[1].to(BF16) * 0.02, s[2].to(BF16) * 0.02, enable_gqa=Hq != Hkv))]
    make = lambda: (rand((B, Hq, 1, D)), rand((B, Hkv, ctx, D)), rand((B, Hkv, ctx, D)))
    return _sdpa_variants(make, lambda s: F.scaled_dot_product_attention(
        s[0], s[1], s[2], enable_gqa=Hq != Hkv))


def b_attention_prefill(p):
    B, S, ctx, Hq, Hkv, D = p["batch"], p["q_len"], p["ctx"], p["Hq"], p["Hkv"], p["D"]
    if S != ctx or not p.get("uniform", True):
        raise ValueError("SDPA's is_causal is top-left aligned: baseline only for q_len == ctx")
    make = lambda: (rand((B, Hq, S, D)), rand((B, Hkv, S, D)), rand((B, Hkv, S, D)))
    return _sdpa_variants(make, lambda s: F.scaled_dot_product_attention(
        s[0], s[1], s[2], is_causal=True, enable_gqa=Hq != Hkv))


BUILDERS = {
    "attention_decode": b_attention_decode,
    "attention_prefill": b_attention_prefill,
    "embedding": b_embedding,
    "rms_norm_residual": b_rms_norm,
    "rms_norm": b_rms_norm,
    "rms_norm_heads": b_rms_norm_heads,
    "silu_mul": b_silu_mul,
    "rope_kv_write": b_rope_kv,
    "qk_norm_rope_kv_write": b_rope_kv,
    "linear": b_linear,
    "linear_gemv": b_linear,
    "linear_gemv_cfg": b_linear,
    "linear_cublaslt": b_linear,
    "linear_skinny": b_linear,
    "linear_skinny_cfg": b_linear,
    "linear_gemv_fused": b_linear_fused,
    "linear_gemv_quant": b_linear_quant,
    "linear_fp8_w8a8": b_linear_fp8_w8a8,
    "linear_int4": b_linear_quant,
    "argmax": b_argmax,
    "sample": b_sample,
}


def time_op(make_set, call, set_bytes, l2, reps, min_rep_us=300.0, max_per_rep=256):
    copies = max(1, min(4096, math.ceil(4 * l2 / max(set_bytes, 1))))
    sets = [make_set() for _ in range(copies)]
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for s in sets[:3]:
            call(s)  # warm-up outside the graph (cuBLAS handles, caches)
    torch.cuda.current_stream().wait_stream(stream)
    torch.cuda.synchronize()

    def capture(first, n):
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            for i in range(n):
                call(sets[(first + i) % copies])
        return g

    def replay(graphs, n):
        ev = [torch.cuda.Event(enable_timing=True) for _ in range(n + 1)]
        ev[0].record()
        for r in range(n):
            graphs[r % len(graphs)].replay()
            ev[r + 1].record()
        torch.cuda.synchronize()
        return [ev[r].elapsed_time(ev[r + 1]) for r in range(n)]

    single = [capture(i, 1) for i in range(min(copies, 4))]
    replay(single, 8)
    est = sorted(replay(single, 8))[4]
    per_rep = int(min(max_per_rep, max(1, math.ceil(min_rep_us * 1e-3 / max(est, 1e-6)))))
    graphs = [capture(g * per_rep, per_rep) for g in range(max(1, math.ceil(copies / per_rep)))]
    replay(graphs, max(5, len(graphs)))
    t = sorted(x / per_rep for x in replay(graphs, reps))
    del graphs, single, sets
    torch.cuda.empty_cache()
    return t[len(t) // 2]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--merge", required=True, help="ceiling bench kernels result JSON (updated in place)")
    ap.add_argument("--reps", type=int, default=100)
    ap.add_argument("--filter", default=".*")
    a = ap.parse_args()
    with open(a.merge) as f:
        run = json.load(f)
    props = torch.cuda.get_device_properties(0)
    l2 = getattr(props, "L2_cache_size", 50 << 20)
    if run.get("gpu") and run["gpu"] != props.name:
        sys.exit(f"{a.merge} was measured on {run['gpu']}, this is {props.name}: not the same GPU")
    torch.manual_seed(0)
    rx = re.compile(a.filter)
    n_ok = 0
    # Cases that differ only in params the PyTorch call ignores (which ceiling kernel ran, the
    # paged block size) share one measurement of the candidates, made once per run.
    ignored = {"kernel", "block_size"}
    multi_cache = {}
    for c in run["cases"]:
        b = BUILDERS.get(c.get("op"))
        if b is None or not rx.search(f"{c['op']} {c['shape']}"):
            continue
        try:
            built = b(c["params"])
            set_bytes = c.get("bytes", 0)
            if isinstance(built, list):  # several candidate calls (e.g. SDPA backends): keep all,
                key = (c["op"], json.dumps({k: v for k, v in c["params"].items() if k not in ignored},
                                           sort_keys=True))
                if key not in multi_cache:
                    timed, skipped = {}, {}  # report the fastest as the baseline
                    for (mk, cl), nm in built:
                        try:
                            timed[nm] = time_op(mk, cl, set_bytes, l2, a.reps)
                        except Exception as e:  # a backend that cannot run this shape
                            skipped[nm] = f"{type(e).__name__}: {e}"[:200]
                            torch.cuda.empty_cache()
                    multi_cache[key] = (timed, skipped)
                timed, skipped = multi_cache[key]
                if skipped:
                    c.setdefault("baseline_skipped", {}).update(skipped)
                if not timed:
                    raise RuntimeError("no candidate baseline ran")
                c["baselines_ms"] = timed
                name = min(timed, key=timed.get)
                ms = timed[name]
            else:
                (make, call), name = built
                ms = time_op(make, call, set_bytes, l2, a.reps)
            c["baseline_name"] = name
            c["baseline_ms"] = ms
            if c.get("time_ms_median"):
                c["speedup_vs_baseline"] = ms / c["time_ms_median"]
            n_ok += 1
            print(f"{c['op']:<22} {c['shape']:<34} torch {ms * 1e3:10.2f} us  speedup "
                  f"{c.get('speedup_vs_baseline') or float('nan'):.2f}", flush=True)
        except Exception as e:  # a baseline that fails is recorded, not fatal
            c["baseline_error"] = f"{type(e).__name__}: {e}"
            print(f"{c['op']:<22} {c['shape']:<34} baseline failed: {c['baseline_error']}", flush=True)
            torch.cuda.empty_cache()
    run["baseline"] = {"tool": "bench/torch_baseline.py", "torch": torch.__version__,
                       "cuda": torch.version.cuda, "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                       "method": "CUDA graphs over rotating input sets (4x L2), median of "
                                 f"{a.reps} replays, per call"}
    with open(a.merge, "w") as f:
        json.dump(run, f, indent=1)
        f.write("\n")
    print(f"merged {n_ok} baselines into {a.merge}")


if __name__ == "__main__":
    main()
