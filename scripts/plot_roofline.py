#!/usr/bin/env python3
"""Draws `ceiling roofline --plot FILE.png` charts from the JSON the C++ side writes.

Input (--input): either one report (the `--format json` object) or a sweep
{"sweep": "batch"|"context", "points": [report, ...]}.

One report: left, a log-log roofline chart -- the memory roof (bandwidth x intensity) and the
compute roofs (bf16, and fp8 where the GPU has it), each op a coloured point at its arithmetic
intensity and its achieved rate under the predicted time, its shape naming its limiter; right,
every op's predicted time per step (bars, sorted, with its share) against its roofline time, so
ops without FLOPs (the embedding, all-reduces) are shown too.
A sweep: predicted and roofline step time, and throughput, against the swept variable (log x).
"""
import argparse
import json
import sys


LIMITER_MARKERS = {"compute": "o", "memory": "s", "overhead": "X", "communication": "^"}


def point_groups(ops, tol=0.25):
    """Ops whose points lie within `tol` decades of each other (chained), fastest first."""
    import math
    pts = [(math.log10(o["intensity"]), math.log10(o["flops"] / o["time_s_predicted"]), o) for o in ops]
    groups = []
    for x, y, o in sorted(pts, key=lambda p: -p[1]):
        near = [g for g in groups if any(abs(gx - x) < tol and abs(gy - y) < tol for gx, gy, _ in g)]
        merged = [(x, y, o)] + [p for g in near for p in g]
        groups = [g for g in groups if g not in near] + [merged]
    return [[o for _, _, o in sorted(g, key=lambda p: -p[1])] for g in groups]


def human_time(t):
    return f"{t * 1e3:.2f} ms" if t >= 1e-3 else f"{t * 1e6:.1f} us"


def plot_roofline(report, out):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    c = report["ceilings_used"]
    bw = c["mem_bw"]
    total = report["total"]["time_s_predicted"]
    ops = sorted(report["ops"], key=lambda o: -o["time_s_predicted"])
    colors = plt.get_cmap("tab10" if len(ops) <= 10 else "tab20")
    color = {o["name"]: colors(i % colors.N) for i, o in enumerate(ops)}
    fig, (ax, bars) = plt.subplots(1, 2, figsize=(14, 6.5), gridspec_kw={"width_ratios": [3, 2]})

    # Left: the roofline, each op with FLOPs at (intensity, FLOPs / predicted time).
    placed = [o for o in ops if o["flops"] and o["bytes"] and o["time_s_predicted"]]
    peaks = [("bf16", c["bf16_flops"], "tab:blue")]
    if c.get("fp8_flops", 0) > 0:
        peaks.append(("fp8", c["fp8_flops"], "tab:purple"))
    xs_op = [o["intensity"] for o in placed] or [1.0]
    ys_op = [o["flops"] / o["time_s_predicted"] for o in placed] or [bw]
    x_lo = min(min(xs_op) / 4, 0.1)
    x_hi = max(max(xs_op) * 4, 10 * max(p / bw for _, p, _ in peaks))
    y_lo, y_hi = min(ys_op) / 4, max(p for _, p, _ in peaks) * 3
    xs = [x_lo * (x_hi / x_lo) ** (i / 200) for i in range(201)]
    for name, peak, col in peaks:
        ax.plot(xs, [min(peak, bw * x) for x in xs], color=col, lw=2,
                label=f"{name} roof: {peak / 1e12:.0f} TFLOP/s, ridge {peak / bw:.0f} FLOP/B")
    ax.plot(xs, [bw * x for x in xs], color="gray", lw=0.8, ls=":", label=f"memory {bw / 1e12:.2f} TB/s")
    for o in placed:
        ax.scatter([o["intensity"]], [o["flops"] / o["time_s_predicted"]], s=70, zorder=3,
                   marker=LIMITER_MARKERS.get(o["limiter"], "o"), color=color[o["name"]],
                   edgecolors="black", linewidths=0.5)
    # Ops at (nearly) the same point share one label, so names never print over each other.
    for group in point_groups(placed):
        x, y = group[0]["intensity"], group[0]["flops"] / group[0]["time_s_predicted"]
        many = len(group) > 1  # a stack of names goes below-left, on a white ground
        ax.annotate("\n".join(o["name"] for o in group), (x, y), textcoords="offset points",
                    xytext=(-10, -8) if many else (9, 0), ha="right" if many else "left",
                    va="top" if many else "center", fontsize=8,
                    bbox=dict(fc="white", ec="lightgray", alpha=0.9) if many else None)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(x_lo, x_hi)
    ax.set_ylim(y_lo, y_hi)
    ax.set_xlabel("arithmetic intensity (FLOP/byte)")
    ax.set_ylabel("achieved FLOP/s (FLOPs / predicted time)")
    ax.grid(True, which="major", alpha=0.3)
    roofs = ax.legend(fontsize=8, loc="upper left")
    ax.add_artist(roofs)
    shapes = [Line2D([], [], ls="", marker=m, color="gray", markeredgecolor="black", label=f"{k}-bound")
              for k, m in LIMITER_MARKERS.items() if any(o["limiter"] == k for o in placed)]
    ax.legend(handles=shapes, fontsize=8, loc="lower right", title="marker = limiter", title_fontsize=8)
    off = [o["name"] for o in ops if o not in placed]
    if off:
        ax.text(0.01, -0.13, "no FLOPs, so not on the roofline (see the bars): " + ", ".join(off),
                transform=ax.transAxes, fontsize=8, color="dimgray")

    # Right: where the step's time goes, every op (predicted, with its roofline time).
    names = [o["name"] for o in ops][::-1]
    pred = [o["time_s_predicted"] * 1e6 for o in ops][::-1]
    roof = [o["time_s_roofline"] * 1e6 for o in ops][::-1]
    bars.barh(names, pred, color=[color[n] for n in names], edgecolor="black", linewidth=0.5)
    bars.scatter(roof, names, marker="|", s=200, color="black", zorder=3)
    for y, (p, o) in enumerate(zip(pred, ops[::-1])):
        bars.text(p, y, f" {100 * o['time_s_predicted'] / total:.1f}%", va="center", fontsize=8)
    bars.set_xlabel("time per step (us)")
    bars.set_xlim(0, max(pred + roof) * 1.25)
    bars.tick_params(axis="y", labelsize=8)
    bars.legend(handles=[Patch(facecolor="lightgray", edgecolor="black", label="predicted"),
                         Line2D([], [], ls="", marker="|", markersize=12, color="black", label="roofline")],
                fontsize=8, loc="lower right")
    bars.grid(True, axis="x", alpha=0.3)
    bars.set_title("where the step's time goes (share of predicted)", fontsize=9)

    t = report["total"]
    fig.suptitle(f"{report['model']} on {report['gpu']}: {report['phase']}, batch {report['batch']}, "
                 f"context {report['context']} -- {human_time(t['time_s_predicted'])}/step predicted "
                 f"({t['limiter']}-bound), {human_time(t['time_s_roofline'])} roofline, "
                 f"{t['tokens_per_s']:.0f} tok/s" + ("" if report.get("fits", True) else
                                                    "  [DOES NOT FIT IN MEMORY]"), fontsize=10)
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
