#!/usr/bin/env python3
"""Draws `ceiling roofline --plot FILE.png` charts from the JSON the C++ side writes.

Input (--input): either one report (the `--format json` object) or a sweep
{"sweep": "batch"|"context", "points": [report, ...]}.

One report: a log-log roofline chart — the memory roof (bandwidth x intensity) and the compute
roofs (bf16, and fp8 where the GPU has it), with each op placed at its arithmetic intensity and its
achieved rate under the predicted time (FLOPs / predicted time); ops without FLOPs are skipped.
A sweep: predicted and roofline step time, and throughput, against the swept variable (log x).
"""
import argparse
import json
import sys


def plot_roofline(report, out):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    c = report["ceilings_used"]
    bw = c["mem_bw"]
    fig, ax = plt.subplots(figsize=(9, 6))
    xs = [10 ** (i / 20) for i in range(-40, 101)]  # 0.01 .. 1e5 FLOP/byte
    roofs = [("bf16", c["bf16_flops"], "tab:blue")]
    if c.get("fp8_flops", 0) > 0:
        roofs.append(("fp8", c["fp8_flops"], "tab:purple"))
    for name, peak, color in roofs:
        ax.plot(xs, [min(peak, bw * x) for x in xs], color=color, lw=2,
                label=f"{name} roof {peak / 1e12:.0f} TFLOP/s, ridge {peak / bw:.0f} FLOP/B")
    ax.plot(xs, [bw * x for x in xs], color="gray", lw=0.8, ls=":",
            label=f"memory roof {bw / 1e12:.2f} TB/s")
    markers = {"compute": "o", "memory": "s", "overhead": "x", "communication": "^"}
    for op in report["ops"]:
        if not op["flops"] or not op["bytes"] or not op["time_s_predicted"]:
            continue
        x = op["intensity"]
        y = op["flops"] / op["time_s_predicted"]
        ax.scatter([x], [y], marker=markers.get(op["limiter"], "o"), s=40, zorder=3)
        ax.annotate(op["name"], (x, y), textcoords="offset points", xytext=(4, 4), fontsize=7)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("arithmetic intensity (FLOP/byte)")
    ax.set_ylabel("FLOP/s (ops at FLOPs / predicted time)")
    t = report["total"]
    ax.set_title(f"{report['model']} on {report['gpu']} — {report['phase']}, batch "
                 f"{report['batch']}, context {report['context']}: "
                 f"{t['time_s_predicted'] * 1e3:.3f} ms/step predicted ({t['limiter']})",
                 fontsize=9)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    fig.savefig(out, dpi=130)


def plot_sweep(data, out):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    var = data["sweep"]
    pts = data["points"]
    xs = [p[var] for p in pts]
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(12, 5))
    a1.plot(xs, [p["total"]["time_s_predicted"] * 1e3 for p in pts], "o-", label="predicted")
    a1.plot(xs, [p["total"]["time_s_roofline"] * 1e3 for p in pts], "s--", label="roofline")
    a1.set_ylabel("step time (ms)")
    a2.plot(xs, [p["total"]["tokens_per_s"] for p in pts], "o-", label="predicted")
    a2.plot(xs, [p["total"]["tokens_per_s_roofline"] for p in pts], "s--", label="roofline")
    a2.set_ylabel("tokens/s")
    for a in (a1, a2):
        a.set_xscale("log", base=2)
        a.set_xlabel(var)
        a.grid(True, which="both", alpha=0.3)
        a.legend(fontsize=8)
    p0 = pts[0]
    fig.suptitle(f"{p0['model']} on {p0['gpu']} — {p0['phase']}, sweeping {var}", fontsize=10)
    fig.tight_layout()
    fig.savefig(out, dpi=130)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--input", required=True)
    ap.add_argument("--output", required=True)
    args = ap.parse_args()
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        sys.exit("plot_roofline.py: matplotlib is not installed (pip install matplotlib)")
    with open(args.input) as f:
        data = json.load(f)
    if isinstance(data, dict) and "sweep" in data:
        plot_sweep(data, args.output)
    else:
        plot_roofline(data, args.output)


if __name__ == "__main__":
    main()
