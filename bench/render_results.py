#!/usr/bin/env python3
"""Renders docs/results.md, docs/results-history.md (and docs/img/*.png) from bench/results/*.json.
Nothing in the output is typed by hand: every number comes from a result file, which names its GPU,
driver, clocks, git SHA and the ceilings measured in the same run.

docs/results.md is the first page: per GPU, the latest plain run of each benchmark (decode at batch
1 and the batch sweep against the floor, kernels at their roofline), each number linked to its JSON,
with the plots that tell the story (bench/results_headline.py says which files count as latest).
docs/results-history.md holds every run:

Kernel runs (`"tool": "ceiling bench kernels"`) get a table per run — kernel, shape, time, GB/s,
% of the measured read bandwidth and matrix rate, roofline prediction vs measurement and the gap,
the PyTorch baseline and the speedup, the correctness check — plus two charts: the kernels on the
roofline of the measured ceilings, and predicted vs measured time. Decode-latency runs
(`ceiling bench latency`) share one table, with the Hugging Face transformers baseline of the same
run. Accuracy runs (`ceiling bench accuracy`) get a table of their low-precision variants. Other
result files are listed.

usage: python3 bench/render_results.py [--results bench/results] [--out docs/results.md]
       (the history goes beside --out, as results-history.md)
"""
import argparse
import glob
import json
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import results_headline  # noqa: E402

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))


def fmt_us(ms):
    return "" if ms is None else f"{ms * 1e3:.2f}"


def fmt(v, spec):
    return "" if v is None or isinstance(v, str) else format(v, spec)


def roofline_png(run, path):
    mc = run["measured_ceilings"]
    bw, peak = mc["read_gbps"] * 1e9, mc["bf16_gemm_tflops"] * 1e12
    fig, ax = plt.subplots(figsize=(7.5, 5))
    xs = [c["flops"] / c["bytes"] for c in run["cases"] if c.get("bytes") and c.get("flops")]
    lo, hi = min(xs + [0.1]) / 2, max(xs + [1e3]) * 2
    grid = [lo * (hi / lo) ** (i / 200) for i in range(201)]
    ax.plot(grid, [min(peak, bw * x) / 1e12 for x in grid], "k-", lw=1.5,
            label=f"measured roof: {mc['read_gbps']:.0f} GB/s, {mc['bf16_gemm_tflops']:.0f} TFLOP/s bf16")
    ops = sorted({c["op"] for c in run["cases"] if "tflops" in c})
    cmap = plt.get_cmap("tab20")
    for i, op in enumerate(ops):
        pts = [(c["flops"] / c["bytes"], c["tflops"]) for c in run["cases"]
               if c["op"] == op and c.get("bytes") and c.get("flops") and c.get("tflops")]
        if pts:
            ax.scatter(*zip(*pts), s=18, color=cmap(i % 20), label=op)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("arithmetic intensity (FLOP / byte of device memory)")
    ax.set_ylabel("achieved TFLOP/s")
    ax.set_title(f"{run['gpu']} — kernels on the measured roofline")
    ax.legend(fontsize=6, loc="lower right")
    ax.grid(True, which="both", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def pred_png(run, path):
    fig, ax = plt.subplots(figsize=(6, 5.5))
    pts = [(c["predicted_ms"] * 1e3, c["time_ms_median"] * 1e3, c["op"]) for c in run["cases"]
           if c.get("predicted_ms") and c.get("time_ms_median")]
    ops = sorted({p[2] for p in pts})
    cmap = plt.get_cmap("tab20")
    for i, op in enumerate(ops):
        sel = [(p, m) for p, m, o in pts if o == op]
        ax.scatter(*zip(*sel), s=18, color=cmap(i % 20), label=op)
    if pts:
        lo = min(min(p, m) for p, m, _ in pts) / 1.5
        hi = max(max(p, m) for p, m, _ in pts) * 1.5
        ax.plot([lo, hi], [lo, hi], "k-", lw=1, label="measured = predicted")
        ax.fill_between([lo, hi], [lo * 0.85, hi * 0.85], [lo * 1.15, hi * 1.15], color="gray", alpha=0.2,
                        label="±15%")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("roofline prediction, layer 2 (µs)")
    ax.set_ylabel("measured median (µs)")
    ax.set_title(f"{run['gpu']} — predicted vs measured")
    ax.legend(fontsize=6)
    ax.grid(True, which="both", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def gap_cell(g):
    """The gap, bold when the prediction misses by more than 15 %."""
    if not isinstance(g, (int, float)):
        return ""
    return f"{g:.2f}" if 1 / 1.15 <= g <= 1.15 else f"**{g:.2f}**"


def kernel_section(name, run, img_dir, md_dir):
    mc = run["measured_ceilings"]
    clk = run.get("clocks", {})
    out = [f"## {run['gpu']} — {name}", ""]
    out.append(f"- file: `bench/results/{name}`; date {run.get('date')}; git `{run.get('git_sha')}`; "
               f"driver {run.get('driver')}"
               + ("" if run.get("complete", True) else
                  f"; **partial: {len(run['cases'])} of {run.get('cases_total')} cases (the run was stopped)**"))
    out.append(f"- clocks at start (nvidia-smi): SM {clk.get('sm_mhz')} MHz, memory {clk.get('mem_mhz')} MHz "
               f"(max {clk.get('sm_max_mhz')} / {clk.get('mem_max_mhz')})")
    out.append(f"- measured ceilings (this run): read {mc['read_gbps']:.0f} GB/s, bf16 GEMM 8192³ "
               f"{mc['bf16_gemm_tflops']:.0f} TFLOP/s, graph launch {mc['launch_graph_us']:.2f} µs/kernel, "
               f"small kernel {mc['small_kernel_us']:.2f} µs"
               + (f", grid-wide fixed cost {mc['stream_fixed_us']:.2f} µs stream / "
                  f"{mc['rw_fixed_us']:.2f} µs read-reduce-write"
                  if "rw_fixed_us" in mc else ""))
    if run.get("baseline"):
        b = run["baseline"]
        out.append(f"- baseline: PyTorch {b.get('torch')} (CUDA {b.get('cuda')}), {b.get('method')}")
    out.append(f"- timing: median / min / max per call over {run.get('reps')} CUDA-graph replays, inputs "
               f"rotated over {run.get('rotation_bytes', 0) / 1e6:.0f} MB; gap = measured / predicted")
    for label, want in (("kernels the library dispatches", True), ("comparison variants", False)):
        gaps = [c["gap"] for c in run["cases"]
                if isinstance(c.get("gap"), (int, float)) and c.get("dispatched", True) == want]
        if gaps:
            inside = sum(1 for g in gaps if 1 / 1.15 <= g <= 1.15)
            out.append(f"- layer-2 prediction within ±15 %, {label}: {inside} of {len(gaps)} "
                       f"(misses in bold; causes in docs/roofline.md)")
    out.append("- `(cmp)`: a comparison variant the library does not dispatch for that shape (the losing side "
               "of a measured crossover, a configuration sweep)")
    out.append("")
    out.append("| kernel | shape | median µs | min–max µs | GB/s | % read BW | TFLOP/s | % matrix | "
               "predicted µs | gap | limiter | baseline | baseline µs | speedup | rel err | check |")
    out.append("|" + "---|" * 16)
    for c in run["cases"]:
        if "time_ms_median" not in c:
            out.append(f"| {c['op']} | {c['shape']} | error: {c.get('error', '')} |" + " |" * 13)
            continue
        err = c.get("max_rel_err")
        out.append("| " + " | ".join([
            c["op"] + ("" if c.get("dispatched", True) else " (cmp)"), c["shape"], fmt_us(c["time_ms_median"]),
            f"{fmt_us(c['time_ms_min'])}–{fmt_us(c['time_ms_max'])}", fmt(c["gbps"], ".0f"),
            fmt(c["pct_read_bw"], ".1f"), fmt(c["tflops"], ".2f"), fmt(c["pct_peak_compute"], ".1f"),
            fmt_us(c.get("predicted_ms")), gap_cell(c.get("gap")), c.get("predicted_limiter", ""),
            c.get("baseline_name") or "", fmt_us(c.get("baseline_ms")), fmt(c.get("speedup_vs_baseline"), ".2f"),
            fmt(err, ".1e") if not isinstance(err, str) else err, "pass" if c.get("passed") else "**FAIL**",
        ]) + " |")
    stem = os.path.splitext(name)[0]
    roof, pred = os.path.join(img_dir, f"{stem}_roofline.png"), os.path.join(img_dir, f"{stem}_pred_vs_meas.png")
    roofline_png(run, roof)
    pred_png(run, pred)
    out += ["", f"![roofline]({os.path.relpath(roof, md_dir)})", f"![predicted vs measured]({os.path.relpath(pred, md_dir)})", ""]
    return out


def first(d, *keys):
    for k in keys:
        if d.get(k) is not None:
            return d[k]
    return None


def generic_cases_section(name, run):
    """Result files of another tool that still list cases with op and shape (e.g. attention)."""
    out = [f"## {run.get('gpu') or run.get('ceilings', {}).get('gpu', '')} — {name}", ""]
    if run.get("tool"):
        out.append(f"- tool: {run['tool']}; git `{run.get('git_sha')}`")
    if run.get("ceilings"):
        out.append("- ceilings: " + ", ".join(f"{k} {v:.4g}" if isinstance(v, float) else f"{k} {v}"
                                              for k, v in run["ceilings"].items() if not isinstance(v, dict)))
    out += ["", "| kernel | shape | median µs | GB/s | TFLOP/s | baseline | baseline µs | speedup | check |",
            "|" + "---|" * 9]
    for c in run["cases"]:
        b = c.get("torch_baseline") or c
        med = first(c, "median_us")
        if med is None and c.get("time_ms_median") is not None:
            med = c["time_ms_median"] * 1e3
        base = b.get("baseline_ms")
        out.append("| " + " | ".join([
            str(c.get("op", "")), str(c.get("shape", "")), fmt(med, ".2f"), fmt(first(c, "GBps", "gbps"), ".0f"),
            fmt(first(c, "TFLOPs", "tflops"), ".2f"), str(b.get("baseline_name") or ""),
            fmt(base * 1e3 if isinstance(base, (int, float)) else None, ".2f"),
            fmt(b.get("speedup_vs_baseline"), ".2f"),
            "pass" if first(c, "pass", "passed") else "**FAIL**",
        ]) + " |")
    return out + [""]


def is_latency(run):
    return isinstance(run, dict) and all(k in run for k in ("ms_per_token", "pct_of_floor", "floor_ms_per_token"))


def latency_section(runs):
    """`ceiling bench latency` runs: one row per result file."""
    out = ["## Decode latency (`ceiling bench latency`)", "",
           "Random-weight models of the named shape, bf16 unless `weights` says fp8 / int4 (quantized on load). `floor` is bytes_per_step (weights once + KV) at the "
           "read bandwidth measured in the same process; `transformers` is Hugging Face transformers' eager "
           "decode of the same model on the same GPU in the same run. `predicted` is the layer-2 roofline of "
           "the step (`ceiling roofline` at the run's context), `gap` measured / predicted (runs before the "
           "prediction was recorded leave both empty). TP: tensor-parallel ranks (`x2p`: over two processes); "
           "under TP the floor is one GPU's share of the bytes and `% of floor+AR` adds the roofline's "
           "all-reduce time to it.", "",
           "| file | model | GPU | weights | TP | batch | in/out | graphs | TTFT ms | ms/token | tokens/s | floor ms "
           "| % of floor | % of floor+AR | GB/s | predicted ms | gap | transformers tok/s | speedup | git |",
           "|" + "---|" * 20]
    for name, r in runs:
        base = r.get("baseline_tokens_per_s")
        tps = r.get("tokens_per_s")
        out.append("| " + " | ".join([
            f"`{name}`", str(r.get("model", "")), str(r.get("gpu", "")), str(r.get("weights", "bf16")),
            str(r.get("tensor_parallel_size", 1)) + (f"x{r['processes']}p" if r.get("processes", 1) > 1 else ""),
            str(r.get("batch", "")),
            f"{r.get('input_len', '')}/{r.get('output_len', '')}", "on" if r.get("cuda_graphs") else "off",
            fmt(r.get("ttft_ms"), ".2f"), fmt(r.get("ms_per_token"), ".3f"), fmt(tps, ".1f"),
            fmt(r.get("floor_ms_per_token"), ".3f"), fmt(r.get("pct_of_floor"), ".1f"),
            fmt(r.get("pct_of_floor_with_allreduce"), ".1f"), fmt(r.get("gbps"), ".0f"),
            fmt(r.get("predicted_ms_per_token"), ".3f"), fmt(r.get("prediction_gap"), ".2f"),
            fmt(base, ".1f"), fmt(tps / base if isinstance(base, (int, float)) and base and tps else None, ".1f"),
            f"`{r.get('git_sha', '')}`",
        ]) + " |")
    return out + [""]


def serve_section(runs):
    """`ceiling bench serve` runs (vLLM's serving metrics): one row per result file."""
    out = ["## Online serving (`ceiling bench serve`)", "",
           "Streamed requests against an OpenAI-compatible server over loopback; TTFT, TPOT (excluding "
           "the first token), ITL and E2EL as `vllm bench serve` computes them. The GPU and server "
           "configuration are in the run's log beside the file (`serve-<gpu>-<date>r<N>.log`).", "",
           "| file | endpoint | in/out | requests | rate | ok | failed | duration s | req/s | output tok/s "
           "| median TTFT ms | p99 TTFT ms | median TPOT ms | median ITL ms | p99 ITL ms | median E2EL ms "
           "| git |", "|" + "---|" * 17]
    for name, r in runs:
        out.append("| " + " | ".join([
            f"`{name}`", str(r.get("endpoint", "")),
            f"{r.get('random_input_len', '')}/{r.get('random_output_len', '')}",
            str(r.get("num_prompts", "")), str(r.get("request_rate", "")), str(r.get("completed", "")),
            str(r.get("failed", "")), fmt(r.get("duration"), ".1f"), fmt(r.get("request_throughput"), ".2f"),
            fmt(r.get("output_throughput"), ".1f"), fmt(r.get("median_ttft_ms"), ".2f"),
            fmt(r.get("p99_ttft_ms"), ".2f"), fmt(r.get("median_tpot_ms"), ".2f"),
            fmt(r.get("median_itl_ms"), ".2f"), fmt(r.get("p99_itl_ms"), ".2f"),
            fmt(r.get("median_e2el_ms"), ".2f"), f"`{r.get('git_sha', '')}`",
        ]) + " |")
    return out + [""]


def allreduce_section(name, run):
    """`ceiling bench allreduce`: latency per message size, NCCL beside the one-shot P2P kernel."""
    out = [f"### {name}", "",
           f"All-reduce (sum, {run.get('dtype', '')}) over {run.get('tensor_parallel_size', '')} GPUs; "
           f"{run.get('method', '')}", "",
           "| bytes | NCCL us | custom us | NCCL in graph us | custom in graph us | roofline us | choice |",
           "|---|---|---|---|---|---|---|"]
    for c in run.get("sizes", []):  # runs before the graph timing leave those columns empty
        out.append(f"| {c.get('bytes')} | {fmt(c.get('nccl_us'), '.2f')} | {fmt(c.get('custom_us'), '.2f')} "
                   f"| {fmt(c.get('nccl_graph_us'), '.2f')} | {fmt(c.get('custom_graph_us'), '.2f')} "
                   f"| {fmt(c.get('roofline_us'), '.2f')} | {c.get('choice', '')} |")
    return out + [""]


def scalars_section(name, run):
    """Any other result object: its top-level numbers and strings, as recorded."""
    out = [f"### {name}", "", "| field | value |", "|---|---|"]
    for k, v in run.items():
        if isinstance(v, (int, float, str, bool)) and not isinstance(v, bool) or isinstance(v, bool):
            out.append(f"| {k} | {fmt(v, '.4g') if isinstance(v, float) else v} |")
    return out + [""]


def accuracy_section(runs):
    """`ceiling bench accuracy` runs: low precision against the checkpoint on the CPU reference."""
    out = ["## Accuracy of low precision (`ceiling bench accuracy`, CPU reference)", "",
           "Each variant reads the same windows of the text; perplexity of its next-token predictions, "
           "mean (and largest) KL divergence of its next-token distribution from the checkpoint's "
           "(nats), and how often its top-1 token is the checkpoint's. fp8: E4M3 weights, a scale per "
           "output row, and from the 2026-11-28 files W8A8 — the inputs of every call of 17 rows or more "
           "(the chunks here) rounded through E4M3 with a scale per token, as the GPU's prefill runs it "
           "(earlier files: bf16 inputs); int4: asymmetric round-to-nearest with the group sizes listed; kv-fp8: the KV "
           "cache rounded through E4M3 (scale from the checkpoint, else 1). Computed in fp32 on the CPU "
           "(CpuOps, the oracle of the GPU kernels).", ""]
    for name, run in runs:
        out.append(f"### {run.get('model')} on `{run.get('text')}`")
        out.append("")
        out.append(f"- file: `bench/results/{name}`; date {run.get('date')}; git `{run.get('git_sha')}`; "
                   f"{run.get('tokens_used')} of {run.get('text_tokens')} tokens in windows of "
                   f"{run.get('window')} (chunks of {run.get('chunk')}); wall {fmt(run.get('wall_seconds'), '.0f')} s "
                   f"on {run.get('threads') or run.get('hardware_threads', 'all')} CPU threads"
                   + ("" if run.get("complete", True) else
                      f"; **partial: {run.get('windows_done')} of {run.get('windows')} windows**"))
        out.append("")
        out.append("| variant | weights | KV cache | perplexity | Δ ppl | mean KL | max KL | top-1 agreement | "
                   "int4 groups | forward s |")
        out.append("|" + "---|" * 10)
        ref = (run.get("variants") or [{}])[0].get("perplexity")
        for v in run.get("variants", []):
            groups = ", ".join(f"g{g}: {n}" for g, n in sorted((v.get("int4_group_sizes") or {}).items(),
                                                                key=lambda kv: -int(kv[0])))
            dppl = "" if ref is None else f"{(v['perplexity'] / ref - 1) * 100:+.2f} %"
            out.append("| " + " | ".join([
                v.get("variant", ""), v.get("weights", ""), v.get("kv_cache_dtype", ""),
                fmt(v.get("perplexity"), ".4f"), dppl, fmt(v.get("mean_kl"), ".5f"),
                fmt(v.get("max_kl"), ".3f"), fmt(v.get("top1_agreement"), ".4f"), groups,
                fmt(v.get("seconds"), ".0f")]) + " |")
        out.append("")
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--results", default=os.path.join(ROOT, "bench", "results"))
    ap.add_argument("--out", default=os.path.join(ROOT, "docs", "results.md"))
    a = ap.parse_args()
    md_dir = os.path.dirname(os.path.abspath(a.out))
    img_dir = os.path.join(md_dir, "img")
    os.makedirs(img_dir, exist_ok=True)
    lines = ["# Results: every run", "",
             "Generated by `bench/render_results.py` from `bench/results/*.json` — do not edit by hand. "
             "Every number below comes from one measured run; a ratio compares two numbers of the same run "
             "on the same GPU. The latest figures per GPU are on the first page, [results.md](results.md).", ""]
    others = []
    latency = []
    kernels = []
    throughput = []
    serve = []
    accuracy = []
    for path in sorted(glob.glob(os.path.join(a.results, "*.json"))):
        with open(path) as f:
            try:
                run = json.load(f)
            except json.JSONDecodeError as e:
                others.append(f"- `{os.path.basename(path)}`: unreadable ({e})")
                continue
        base = os.path.basename(path)
        if is_latency(run):
            latency.append((base, run))
        elif isinstance(run, dict) and run.get("tool") == "ceiling bench throughput":
            throughput.append((base, run))
        elif isinstance(run, dict) and run.get("tool") == "ceiling bench serve":
            serve.append((base, run))
        elif isinstance(run, dict) and run.get("tool") == "ceiling bench accuracy":
            accuracy.append((base, run))
        elif isinstance(run, dict) and run.get("tool") == "ceiling bench allreduce":
            others += allreduce_section(base, run)
        elif isinstance(run, dict) and run.get("tool") == "ceiling bench kernels":
            lines += kernel_section(base, run, img_dir, md_dir)
            kernels.append((base, run))
        elif isinstance(run, dict) and isinstance(run.get("cases"), list) and all(
                isinstance(c, dict) and "op" in c for c in run["cases"]):
            lines += generic_cases_section(base, run)
        elif isinstance(run, dict):
            others += scalars_section(base, run)
        else:
            others.append(f"- `{base}`: not a JSON object")
    if latency:
        lines += latency_section(latency)
    if serve:
        lines += serve_section(serve)
    if accuracy:
        lines += accuracy_section(accuracy)
    if throughput:
        lines += ["## Offline throughput (every run)", ""]
        for name, run in throughput:
            lines += [f"### {name}", ""] + results_headline.throughput_table({name: (name, run)})
    if others:
        lines += ["## Other result files", ""] + others + [""]
    history = os.path.join(md_dir, "results-history.md")
    with open(history, "w") as f:
        f.write("\n".join(lines))

    def images(name, run):
        stem = os.path.splitext(name)[0]
        return (os.path.join(img_dir, f"{stem}_roofline.png"), os.path.join(img_dir, f"{stem}_pred_vs_meas.png"))

    first = ["# Results", "",
             "Generated by `bench/render_results.py` from `bench/results/*.json` — do not edit by hand. "
             "The latest plain run of each benchmark per GPU; every number links to the JSON it comes from "
             "(GPU, driver, clocks, git SHA and the ceilings measured in the same run). A/B pairs, experiments "
             "and every earlier run: [results-history.md](results-history.md). What the predictions mean: "
             "[roofline.md](roofline.md).", ""]
    first += results_headline.headline(latency, kernels, img_dir, md_dir, images, throughput)
    if serve:
        first += serve_section(serve)
    if accuracy:  # per model the latest run, then older runs' variants the newer ones lack
        by_model = {}
        for name, run in sorted(accuracy, key=lambda nr: nr[1].get("date", "")):
            by_model.setdefault(run.get("model"), []).append((name, run))
        shown = []
        for model in sorted(by_model):
            seen = set()
            for name, run in reversed(by_model[model]):
                vs = run.get("variants") or []
                keep = [v for i, v in enumerate(vs) if v.get("variant") not in seen or i == 0]
                if len(keep) > 1 or not seen:
                    shown.append((name, dict(run, variants=keep)))
                seen |= {v.get("variant") for v in vs}
        first += accuracy_section(shown)
    with open(a.out, "w") as f:
        f.write("\n".join(first))
    print(f"wrote {a.out} and {history}")


if __name__ == "__main__":
    main()
