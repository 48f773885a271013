"""The first page of docs/results.md: the latest figures per GPU, each linked to its JSON.

Picks, per GPU, the newest *plain* run of each benchmark: a file name's run tag is `<date>` or
`<date>r<N>`; tags with letters after the number (`old`, `raw`, `ab`, `b`, `xahead`, ...) are A/B
pairs and experiments and stay in the history. Kernel runs: `<tag>_<gpu>_kernels.json` only (not
`_kernels_linear`, `_sampler_kernels`, `rep1`, ...). Decode latency: CUDA graphs on (the `-eager`
files are the graphs-off comparison). The `kv` tag (`latency-<gpu>-<date>r<N>kv-...`) is the KV-cache
A/B of `bench/run_kvfp8_on_gpu.sh` (bf16 against fp8 at the same batch and input): its own table.
The `ttft` tag is the time to first token of a long prompt, bf16 against fp8 / int4: its own table.
Plain runs with a `kernel_trace` (`bench latency --kernel-trace`) give the step's kernel table.
Traced runs before `tracer_detached_while_timed` (2026-11-29 r133) kept CUPTI attached while timed,
which cost the host 0.04–0.1 ms a step (hw/kernel_trace.h): the latency tables skip them.
"""
import os
import re
import statistics

LATENCY = re.compile(r"^latency-(?P<gpu>[a-z0-9]+)-(?P<date>\d{8})(?:r(?P<r>\d+))?(?P<x>[a-z]*)-"
                     r"(?P<model>.+?)(?:-b(?P<b>\d+))?(?P<eager>-eager)?\.json$")
THROUGHPUT = re.compile(r"^throughput-(?P<gpu>[a-z0-9]+)-(?P<date>\d{8})(?:r(?P<r>\d+))?(?P<x>[a-z]*)-"
                        r"(?P<what>.+)\.json$")
KERNELS = re.compile(r"^(?P<date>\d{4}-\d{2}-\d{2})(?:r(?P<r>\d+))?(?P<x>[a-z]*)_(?P<gpu>[a-z0-9]+)_kernels\.json$")


WEIGHTS_RANK = {"bf16": 0, "fp8": 1, "int4": 2}  # row order of the low-precision tables


def tagged(latency, x):
    """{(gpu, run order): [(name, run)]} of the latency runs whose tag letters are `x`."""
    by_tag = {}
    for name, run in latency:
        m = LATENCY.match(name)
        if m and m["x"] == x:
            by_tag.setdefault((m["gpu"], run_order(m)), []).append((name, run))
    return by_tag


def traced(run):
    """Whether the run's timing ran with the kernel tracer attached (its host figures overstate)."""
    return isinstance(run.get("kernel_trace"), dict) and not run.get("tracer_detached_while_timed")


def run_order(m):
    return (m["date"].replace("-", ""), int(m["r"] or 0))


def link(name):
    return f"[{name}](../bench/results/{name})"


def fmt(v, spec):
    return "" if not isinstance(v, (int, float)) else format(v, spec)


def latest_latency(latency):
    """{gpu: {(model, batch): (name, run)}} from the plain, graphs-on runs, newest wins."""
    best = {}
    for name, run in latency:
        m = LATENCY.match(name)
        if not m or m["x"] or m["eager"] or not run.get("cuda_graphs", True) or traced(run):
            continue
        if run.get("tensor_parallel_size", 1) > 1:  # tp_table's
            continue
        if run.get("weights", "bf16") != "bf16":  # lowprec_table's
            continue
        key = (run.get("model", m["model"]), int(run.get("batch", m["b"] or 1)))
        g = best.setdefault(m["gpu"], {})
        if key not in g or run_order(m) >= run_order(LATENCY.match(g[key][0])):
            g[key] = (name, run)
    return best


def latest_throughput(throughput):
    """{gpu: {what: (name, run)}}: the newest plain `bench throughput` run of each workload."""
    best = {}
    for name, run in throughput:
        m = THROUGHPUT.match(name)
        if not m or m["x"]:
            continue
        g = best.setdefault(m["gpu"], {})
        if m["what"] not in g or run_order(m) >= run_order(THROUGHPUT.match(g[m["what"]][0])):
            g[m["what"]] = (name, run)
    return best


def throughput_weights(what, run):
    """The projections' format: the file's `weights` field (since 2026-11-29 r140), else its name's tag."""
    if "weights" in run:
        return str(run["weights"])
    tags = what.split("-")
    return "fp8" if "fp8" in tags else "int4" if "int4" in tags else "bf16"


def throughput_table(runs):
    """One row per workload: measured against the roofline's prediction of the same workload."""
    out = ["**Offline throughput** (`ceiling bench throughput`: every request at once, EOS ignored; "
           "predicted = `roofline/throughput.h` at the run's measured ceilings and KV capacity)", "",
           "| model | weights | dataset | prompts × in / out | KV cache | prefix caching | output tok/s | predicted | "
           "measured / predicted | mean batch | preemptions | prefix hit rate | run |", "|" + "---|" * 13]
    for what, (name, r) in sorted(runs.items()):
        pred = r.get("predicted_output_tokens_per_s")
        tps = r.get("output_tokens_per_s")
        out.append("| " + " | ".join([
            str(r.get("model", "")), throughput_weights(what, r), str(r.get("dataset", "")),
            f"{r.get('num_prompts', '')} × {r.get('input_len', '')} / {r.get('output_len', '')}",
            str(r.get("kv_cache_dtype", "bf16")), "on" if r.get("engine", {}).get("prefix_caching") else "off", fmt(tps, ".0f"), fmt(pred, ".0f"),
            fmt(tps / pred if pred and tps else None, ".2f"), fmt(r.get("mean_batch_size"), ".1f"),
            str(r.get("preemptions", "")), fmt(r.get("prefix_cache_hit_rate"), ".3f"), link(name)]) + " |")
    return out + [""]


def latest_kernels(kernels):
    """{gpu: (name, run)}: the newest plain full kernels run per GPU."""
    best = {}
    for name, run in kernels:
        m = KERNELS.match(name)
        if not m or m["x"]:
            continue
        if m["gpu"] not in best or run_order(m) >= run_order(KERNELS.match(best[m["gpu"]][0])):
            best[m["gpu"]] = (name, run)
    return best


def decode_tables(runs):
    """Batch 1 per model, then the batch sweep (tokens/s against the floor)."""
    one = sorted((k, v) for k, v in runs.items() if k[1] == 1)
    out = ["**Decode at batch 1** (random weights of the named shape, bf16; floor = the step's bytes at the "
           "read bandwidth measured in the same run; transformers = Hugging Face eager decode, same GPU, same run)",
           "", "| model | ms/token | tokens/s | % of floor | predicted gap | TTFT ms (prompt) | transformers tok/s "
           "| speedup | run |", "|" + "---|" * 9]
    for (model, _), (name, r) in one:
        base, tps = r.get("baseline_tokens_per_s"), r.get("tokens_per_s")
        out.append("| " + " | ".join([
            model, fmt(r.get("ms_per_token"), ".3f"), fmt(tps, ".1f"), fmt(r.get("pct_of_floor"), ".1f"),
            fmt(r.get("prediction_gap"), ".2f"), f"{fmt(r.get('ttft_ms'), '.2f')} ({r.get('input_len', '')})",
            fmt(base, ".1f"), fmt(tps / base if base and tps else None, ".1f") + ("x" if base and tps else ""),
            link(name)]) + " |")
    sweep = sorted((k, v) for k, v in runs.items())
    out += ["", "**Decode batch sweep** (tokens/s over all sequences)", "",
            "| model | batch | prompt / output | ms/step | tokens/s | floor tokens/s | % of floor | run |",
            "|" + "---|" * 8]
    for (model, b), (name, r) in sweep:
        floor = r.get("floor_ms_per_token")
        out.append("| " + " | ".join([
            model, str(b), f"{r.get('input_len', '')} / {r.get('output_len', '')}",
            fmt(r.get("ms_per_token"), ".3f"), fmt(r.get("tokens_per_s"), ".0f"),
            fmt(1e3 * b / floor if floor else None, ".0f"), fmt(r.get("pct_of_floor"), ".1f"), link(name)]) + " |")
    return out + [""]


def kernel_table(name, run):
    """One row per op of the newest kernels run: how close it comes to its roofline."""
    by_op = {}
    for c in run["cases"]:
        if c.get("dispatched", True) and "time_ms_median" in c:
            by_op.setdefault(c["op"], []).append(c)
    out = [f"**Kernels at their roofline** ({len(run['cases'])} cases, {link(name)}; git `{run.get('git_sha')}`; "
           f"dispatched cases only; medians over each op's shapes)", "",
           "| kernel | shapes | % of read BW | % of matrix peak | predicted gap | vs PyTorch | checks |",
           "|" + "---|" * 7]

    def med(cs, key):
        v = [c[key] for c in cs if isinstance(c.get(key), (int, float))]
        return statistics.median(v) if v else None

    for op, cs in sorted(by_op.items()):
        sp = med(cs, "speedup_vs_baseline")
        out.append("| " + " | ".join([
            op, str(len(cs)), fmt(med(cs, "pct_read_bw"), ".1f"), fmt(med(cs, "pct_peak_compute"), ".1f"),
            fmt(med(cs, "gap"), ".2f"), (fmt(sp, ".2f") + "x") if sp else "",
            "pass" if all(c.get("passed") for c in cs) else "**FAIL**"]) + " |")
    return out + [""]


def tokens_vs_batch_png(gpu, runs, path):
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for i, model in enumerate(sorted({m for m, _ in runs})):
        pts = sorted((b, r) for (m, b), (_, r) in runs.items() if m == model)
        if len(pts) < 2:
            continue
        xs = [b for b, _ in pts]
        col = plt.get_cmap("tab10")(i)
        ax.plot(xs, [r["tokens_per_s"] for _, r in pts], "o-", color=col, label=f"{model} measured")
        ax.plot(xs, [1e3 * b / r["floor_ms_per_token"] for b, r in pts], "--", color=col,
                label=f"{model} floor (bytes / measured bandwidth)")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    ax.set_xlabel("batch (sequences decoding together)")
    ax.set_ylabel("tokens/s")
    ax.set_title(f"{gpu.upper()}: decode tokens/s against the memory floor")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def latest_tp(latency):
    """{gpu: [(name, run, tp1 run of the same tag or None)]}: the newest run tag's tensor-parallel
    decode runs per GPU and model (NCCL alone, the custom all-reduce, several processes)."""
    by_tag = {}
    for name, run in latency:
        m = LATENCY.match(name)
        if not m or m["x"] or m["eager"] or "-tp" not in name:
            continue
        by_tag.setdefault((m["gpu"], run.get("model", ""), run_order(m)), []).append((name, run))
    newest = {}
    for (gpu, model, order) in by_tag:
        if any(r.get("tensor_parallel_size", 1) > 1 for _, r in by_tag[(gpu, model, order)]):
            if order > newest.get((gpu, model), (("", 0),))[0]:
                newest[(gpu, model)] = (order,)
    out = {}
    for (gpu, model), (order,) in sorted(newest.items()):
        runs = sorted(by_tag[(gpu, model, order)], key=lambda nr: (nr[1].get("tensor_parallel_size", 1), nr[0]))
        base = next((r for _, r in runs if r.get("tensor_parallel_size", 1) == 1), None)
        out.setdefault(gpu, []).extend((n, r, base) for n, r in runs)
    return out


def tp_table(rows):
    out = ["**Tensor parallel decode, batch 1** (one run per model; speed-up against TP 1 of the same run; "
           "`% of floor+AR`: one GPU's share of the bytes at the measured bandwidth plus the roofline's "
           "all-reduce time, over the measured time; `x2p`: two processes)", "",
           "| model | TP | all-reduce | ms/token | tokens/s | speed-up | % of floor+AR | predicted gap | run |",
           "|---|---|---|---|---|---|---|---|---|"]
    for name, r, base in rows:
        tp = str(r.get("tensor_parallel_size", 1)) + (f"x{r['processes']}p" if r.get("processes", 1) > 1 else "")
        sp = r["tokens_per_s"] / base["tokens_per_s"] if base and r.get("tokens_per_s") else None
        out.append(f"| {r.get('model', '')} | {tp} | {r.get('communicator', '')} | {fmt(r.get('ms_per_token'), '.3f')} "
                   f"| {fmt(r.get('tokens_per_s'), '.1f')} | {fmt(sp, '.2f')} "
                   f"| {fmt(r.get('pct_of_floor_with_allreduce'), '.1f')} | {fmt(r.get('prediction_gap'), '.2f')} "
                   f"| {link(name)} |")
    return out + [""]


def latest_lowprec(latency):
    """{gpu: [(name, run, bf16 run of the same tag, model and batch or None)]}: per GPU, model,
    batch and weights format the newest run tag with that format at that batch (a run of one
    format does not hide the others' latest), each against the bf16 run of its own tag; the bf16
    row is the newest such tag's. A model with no low-precision run at a batch has no rows."""
    groups = {}
    for name, run in latency:
        m = LATENCY.match(name)
        if not m or m["x"] or m["eager"] or run.get("tensor_parallel_size", 1) > 1 or traced(run):
            continue
        g = groups.setdefault((m["gpu"], run.get("model", m["model"]), run.get("batch", 1)), {})
        g.setdefault(run_order(m), []).append((name, run))
    out = {}
    for (gpu, _, _), by_order in sorted(groups.items()):
        newest = {}  # weights format -> newest tag holding it
        for o, runs in by_order.items():
            for _, r in runs:
                w = r.get("weights", "bf16")
                if w != "bf16":
                    newest[w] = max(newest.get(w, o), o)
        if not newest:
            continue

        def base(o):
            return next((r for _, r in by_order[o] if r.get("weights", "bf16") == "bf16"), None)
        top = max(newest.values())
        rows = [(n, r, base(top)) for n, r in by_order[top] if r.get("weights", "bf16") == "bf16"]
        for w, o in newest.items():
            rows += [(n, r, base(o)) for n, r in by_order[o] if r.get("weights") == w]
        rows.sort(key=lambda t: WEIGHTS_RANK.get(t[1].get("weights"), 9))
        out.setdefault(gpu, []).extend(rows)
    return out


def latest_ttft(latency):
    """{gpu: [(name, run, bf16 run or None)]}: the newest `ttft` tag per GPU (the time to first
    token of a long prompt, bf16 weights against fp8 / int4)."""
    out = {}
    for (gpu, _), runs in sorted(tagged(latency, "ttft").items()):
        base = {r.get("input_len"): r for _, r in runs if r.get("weights", "bf16") == "bf16"}
        rows = sorted(runs, key=lambda nr: (nr[1].get("input_len"), WEIGHTS_RANK.get(nr[1].get("weights"), 9)))
        out[gpu] = [(n, r, base.get(r.get("input_len"))) for n, r in rows]
    return out


def ttft_table(rows):
    out = ["**Time to first token of a long prompt** (one run; batch 1, random weights quantized on load; "
           "fp8 prefill GEMMs run W8A8 — per-token E4M3 activations, cuBLASLt FP8 — attention stays bf16)", "",
           "| model | weights | prompt | TTFT ms | × bf16 | run |", "|---|---|---|---|---|---|"]
    for name, r, base in rows:
        sp = base["ttft_ms"] / r["ttft_ms"] if base and r.get("ttft_ms") else None
        out.append(f"| {r.get('model', '')} | {r.get('weights', 'bf16')} | {r.get('input_len', '')} "
                   f"| {fmt(r.get('ttft_ms'), '.1f')} | {fmt(sp, '.2f')} | {link(name)} |")
    return out + [""]


def latest_kv(latency):
    """{gpu: [(name, run, bf16-cache run of the same batch and input or None)]}: the newest `kv`
    tag per GPU (bf16 against fp8 KV cache)."""
    out = {}
    for (gpu, _), runs in sorted(tagged(latency, "kv").items()):
        key = lambda r: (r.get("batch"), r.get("input_len"))
        base = {key(r): r for _, r in runs if r.get("kv_cache_dtype", "bf16") == "bf16"}
        rows = sorted(runs, key=lambda nr: (key(nr[1]), nr[1].get("kv_cache_dtype", "bf16") != "bf16"))
        out[gpu] = [(n, r, base.get(key(r))) for n, r in rows]
    return out


def kv_table(rows):
    out = ["**fp8 KV cache in decode** (one run; `--kv-cache-dtype fp8`, bf16 weights; speed-up against the "
           "bf16 cache at the same batch and input in the same run; floor: the step's bytes with that cache at "
           "the measured bandwidth)", "",
           "| model | KV cache | batch | in / out | ms/token | tokens/s | × bf16 KV | % of floor | predicted gap | "
           "run |", "|---|---|---|---|---|---|---|---|---|---|"]
    for name, r, base in rows:
        sp = r["tokens_per_s"] / base["tokens_per_s"] if base and r.get("tokens_per_s") else None
        out.append(f"| {r.get('model', '')} | {r.get('kv_cache_dtype', 'bf16')} | {r.get('batch', '')} "
                   f"| {r.get('input_len', '')} / {r.get('output_len', '')} | {fmt(r.get('ms_per_token'), '.3f')} "
                   f"| {fmt(r.get('tokens_per_s'), '.1f')} | {fmt(sp, '.2f')} | {fmt(r.get('pct_of_floor'), '.1f')} "
                   f"| {fmt(r.get('prediction_gap'), '.2f')} | {link(name)} |")
    return out + [""]


def lowprec_table(rows):
    out = ["**Low-precision decode** (per batch and format the newest run; random weights "
           "quantized on load, `--quantization`; speed-up against bf16 at the same batch in the same run as "
           "the row; floor: the step's bytes in that format at the measured bandwidth; past 16 rows fp8 runs "
           "W8A8 from r51, int4 its own GEMM on the packed weights up to 128 rows from r79 — before, every "
           "weight was dequantized to bf16 for those GEMMs, as int4 still is above 128 rows)", "",
           "| model | weights | batch | in / out | ms/token | tokens/s | × bf16 | % of floor | predicted gap "
           "| TTFT ms | run |",
           "|---|---|---|---|---|---|---|---|---|---|---|"]
    for name, r, base in rows:
        w = r.get("weights", "bf16") + (f" g{r['group_size']}" if r.get("weights") == "int4" else "")
        sp = r["tokens_per_s"] / base["tokens_per_s"] if base and r.get("tokens_per_s") else None
        out.append(f"| {r.get('model', '')} | {w} | {r.get('batch', '')} "
                   f"| {r.get('input_len', '')} / {r.get('output_len', '')} | {fmt(r.get('ms_per_token'), '.3f')} "
                   f"| {fmt(r.get('tokens_per_s'), '.1f')} | {fmt(sp, '.2f')} | {fmt(r.get('pct_of_floor'), '.1f')} "
                   f"| {fmt(r.get('prediction_gap'), '.2f')} | {fmt(r.get('ttft_ms'), '.1f')} | {link(name)} |")
    return out + [""]


def latest_traces(latency):
    """{gpu: [(name, run)]}: per (model, weights, batch) the newest plain run with a kernel trace."""
    best = {}
    for name, run in latency:
        m = LATENCY.match(name)
        if not m or m["x"] or not isinstance(run.get("kernel_trace"), dict):
            continue
        key = (run.get("model", m["model"]), WEIGHTS_RANK.get(run.get("weights", "bf16"), 9),
               int(run.get("batch", 1)))
        g = best.setdefault(m["gpu"], {})
        if key not in g or run_order(m) >= run_order(LATENCY.match(g[key][0])):
            g[key] = (name, run)
    return {gpu: [g[k] for k in sorted(g)] for gpu, g in best.items()}


def short_kernel(name):
    """The kernel's name without template arguments (cuBLASLt's names as they are)."""
    return name.split("<")[0]


def trace_table(rows):
    out = ["**Where a decode step's time goes** (`bench latency --kernel-trace`: CUPTI's kernel records of "
           "20 back-to-back replays of the timed pass's middle step; per slot of the layer pattern, means over "
           "layers and replays in µs: *exposed* is how far the kernel pushes the step's end past its "
           "predecessors', *duration* runs from its launch, which under PDL starts early and waits; the "
           "layers' exposed times plus what runs outside them add up to the traced step)", "",
           "| model | weights | batch | step µs | per layer µs | outside layers µs | slot | kernel | grid × block "
           "| exposed µs | duration µs | run |",
           "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for name, r in rows:
        t = r["kernel_trace"]
        lay = t.get("layers", {})
        slots = lay.get("slots", [])
        inside = lay.get("per_layer_us", 0) * lay.get("count", 0)
        head = (f"| {r.get('model', '')} | {r.get('weights', 'bf16')} | {r.get('batch', '')} "
                f"| {fmt(t.get('step_us'), '.1f')} | {fmt(lay.get('per_layer_us'), '.2f')} "
                f"| {fmt(t.get('step_us', 0) - inside, '.1f')} ")
        blank = "| | | | | | "
        for i, sl in enumerate(slots):
            grid = "×".join(str(v) for v in sl["grid"] if v != 1) or "1"
            out.append((head if i == 0 else blank) +
                       f"| {i} | `{short_kernel(sl['kernel'])}` | {grid} × {sl['block'][0]} "
                       f"| {fmt(sl.get('exposed_us'), '.2f')} | {fmt(sl.get('duration_us'), '.1f')} "
                       f"| {link(name) if i == 0 else ''} |")
        if not slots:
            out.append(head + f"| | (no layer pattern) | | {fmt(t.get('exposed_us'), '.1f')} | | {link(name)} |")
    return out + [""]


def headline(latency, kernels, img_dir, md_dir, kernel_images, throughput=()):
    """The first page's lines. kernel_images(name, run) -> (roofline png, pred-vs-measured png)."""
    lat, ker, thr = latest_latency(latency), latest_kernels(kernels), latest_throughput(throughput)
    tp, low, kv = latest_tp(latency), latest_lowprec(latency), latest_kv(latency)
    ttft, traces = latest_ttft(latency), latest_traces(latency)
    out = []
    for gpu in sorted(set(lat) | set(ker) | set(thr) | set(tp) | set(low) | set(kv) | set(ttft) | set(traces)):
        out += [f"## {gpu.upper()} — latest", ""]
        if gpu in thr:
            out += throughput_table(thr[gpu])
        if gpu in lat:
            out += decode_tables(lat[gpu])
            png = os.path.join(img_dir, f"headline_{gpu}_tokens_vs_batch.png")
            tokens_vs_batch_png(gpu, lat[gpu], png)
            out += [f"![tokens/s vs batch]({os.path.relpath(png, md_dir)})", ""]
        if gpu in tp:
            out += tp_table(tp[gpu])
        if gpu in low:
            out += lowprec_table(low[gpu])
        if gpu in kv:
            out += kv_table(kv[gpu])
        if gpu in ttft:
            out += ttft_table(ttft[gpu])
        if gpu in traces:
            out += trace_table(traces[gpu])
        if gpu in ker:
            name, run = ker[gpu]
            out += kernel_table(name, run)
            roof, pred = kernel_images(name, run)
            out += [f"![kernels on the roofline]({os.path.relpath(roof, md_dir)}) "
                    f"![predicted vs measured]({os.path.relpath(pred, md_dir)})", ""]
    return out
