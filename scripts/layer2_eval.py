#!/usr/bin/env python3
"""Layer-2 kernel model against `ceiling bench kernels` result files (python3, stdlib only).

The C++ model (src/roofline/kernel_cost.cpp) is the single source of the predictions:
`ceiling roofline --rejoin FILE.json ...` re-predicts every case of a result file from its
recorded cost fields and the run's measured ceilings (src/roofline/rejoin.cpp). This script is a
workbench around it:

  * `mirror()` below is a Python copy of the layer-2 pricing of a benchmark case (written bytes
    at the rw probe's write rate, the fixed cost from the probe points, the plainly launched
    stream probe for kernels launched without PDL, waves, launch), for trying
    a candidate change on the committed measurements without rebuilding. It MUST be kept in step
    with kernel_cost.cpp and rejoin.cpp: `--check BIN` compares it case by case with
    `BIN roofline --rejoin ... --format json` and fails on any difference (a ctest runs this).
  * The summary puts several files (one per GPU) side by side: per op, the dispatched cases within
    ±15 % (as docs/results.md counts: 1/1.15 <= measured / predicted <= 1.15) for the prediction
    recorded in each file and for the model, the cases within on every file, and the worst gaps.

usage:
  python3 scripts/layer2_eval.py bench/results/2026-11-23r9_h100_kernels.json \\
      bench/results/2026-11-23r9_h200_kernels.json [--ceiling build/release/apps/ceiling]
  python3 scripts/layer2_eval.py --check build/release/apps/ceiling FILE.json ...

With --ceiling the "model" columns come from the C++ rejoin; without it, from the mirror.
Cost fields that older files lack (write_bytes, tiles, pdl) are derived from op + params as
rejoin.cpp derives them (see legacy_write_bytes / legacy_tiles / legacy_pdl there).
"""
import argparse
import json
import math
import subprocess
import sys

BAND = 0.15


def within(measured, predicted):
    return predicted > 0 and 1 / (1 + BAND) <= measured / predicted <= 1 + BAND


# --- mirror of rejoin.cpp: ceilings and costs of a result file -------------------------------

def ceilings(run):
    """GpuCeilings of the run, as roofline::ceilings_from_bench_run builds them (the fields the
    kernel benchmark's cases use; fp32 is the GPU table's, recorded by the run)."""
    m, dev = run["measured_ceilings"], run.get("device", {})
    pts = lambda k: sorted((p["bytes"], p["us"] * 1e-6) for p in m.get(k, []))
    return {
        "sm_count": dev["sm_count"],
        "mem_bw": m["read_gbps"] * 1e9,
        "bf16": m["bf16_gemm_tflops"] * 1e12,
        "fp32": run["roofline"]["fp32_tflops"] * 1e12,
        "launch_graph": m["launch_graph_us"] * 1e-6,
        "kernel_floor": max(0.0, (m["small_kernel_us"] - m["launch_graph_us"]) * 1e-6),
        "round_trip": m["round_trip_us"] * 1e-6,
        "stream_fixed": max(0.0, m.get("stream_fixed_us", 0) * 1e-6),
        "rw_fixed": max(0.0, m.get("rw_fixed_us", 0) * 1e-6),
        "stream_bw": max(0.0, m.get("stream_gbps", 0) * 1e9),
        "rw_bw": max(0.0, m.get("rw_gbps", 0) * 1e9),
        "stream_points": pts("stream_points"),
        "rw_points": pts("rw_points"),
        "stream_serial_fixed": max(0.0, m.get("stream_serial_fixed_us", 0) * 1e-6),
        "stream_serial_bw": max(0.0, m.get("stream_serial_gbps", 0) * 1e9),
        "stream_serial_points": pts("stream_serial_points"),
    }


def base_op(op):
    return op[:-4] if op.endswith("_cfg") else op


def legacy_write_bytes(op, p):
    b = base_op(op)
    if b == "embedding":
        return 2.0 * p["T"] * p["H"]
    if b in ("rms_norm", "rms_norm_residual"):
        return 2.0 * p["T"] * p["H"] * (2 if p.get("residual") else 1)
    if b == "rms_norm_heads":
        return 2.0 * p["T"] * p["heads"] * p["D"]
    if b == "silu_mul":
        return 2.0 * p["T"] * p["I"]
    if b == "linear_gemv_fused":
        if p.get("rope"):
            return 2.0 * p["M"] * (p["Hq"] + 2 * p["Hkv"]) * p["D"]
        return 2.0 * p["M"] * (p["N"] / 2 if p.get("silu_pairs") else p["N"])
    if b in ("linear", "linear_gemv", "linear_cublaslt"):
        return (4.0 if p.get("out_dtype") == "f32" else 2.0) * p["M"] * p["N"]
    if b in ("rope_kv_write", "qk_norm_rope_kv_write"):
        return 2.0 * p["T"] * (p["Hq"] + 2 * p["Hkv"]) * p["D"]
    if b in ("argmax", "sample", "sample_mixed"):
        return 4.0 * p["S"]
    return None


def legacy_tiles(op, p, math_dtype):
    b = base_op(op)
    if b in ("linear", "linear_cublaslt") and math_dtype == "bf16":
        return ((p["M"] + 127) // 128) * ((p["N"] + 127) // 128)
    if b == "attention_prefill":
        return None
    return 0


def legacy_pdl(op, math_dtype):
    return not (base_op(op) in ("linear", "linear_cublaslt") and math_dtype == "bf16")


def case_cost(c):
    k = {"flops": c["flops"], "bytes": c["bytes"], "launches": c.get("launches", 1),
         "round_trips": c.get("round_trips", 1), "l2_reuse": c.get("l2_reuse_bytes", 0)}
    if "write_bytes" in c:
        k["write_bytes"] = c["write_bytes"]
    else:
        w = legacy_write_bytes(c["op"], c.get("params", {}))
        k["write_bytes"] = w if w is not None and w <= c["bytes"] else 0.0
    if "tiles" in c:
        k["tiles"] = c["tiles"]
    else:
        t = legacy_tiles(c["op"], c.get("params", {}), c["math"])
        k["tiles"] = t or 0
    pdl = c.get("pdl")
    k["pdl"] = pdl if isinstance(pdl, bool) else legacy_pdl(c["op"], c["math"])
    return k


# --- mirror of kernel_cost.cpp: predict() for a benchmark case (measured ceilings, graphs on,
# no L2 reuse, no NVLink) -----------------------------------------------------------------------

def probe_fixed(pts, rate, b):
    excess = lambda p: p[1] - p[0] / rate
    if b <= pts[0][0]:
        return pts[0][1] - b / rate
    if b >= pts[-1][0]:
        return excess(pts[-1])
    for lo, hi in zip(pts, pts[1:]):
        if lo[0] <= b < hi[0]:
            f = (b - lo[0]) / (hi[0] - lo[0])
            return excess(lo) + f * (excess(hi) - excess(lo))
    raise AssertionError("unsorted points")


def mirror(g, k, math_dtype):
    peak = g["bf16"] if math_dtype == "bf16" else g["fp32"]
    wave = 1.0
    if k["tiles"] > 0:
        wave = k["tiles"] / (math.ceil(k["tiles"] / g["sm_count"]) * g["sm_count"])
    comp = k["flops"] / (peak * wave) if k["flops"] > 0 else 0.0
    hbm = k["bytes"]  # benchmark cases rotate their inputs: no L2 reuse
    read_bw, w = g["mem_bw"], k["write_bytes"]
    write_bw = read_bw
    if g["rw_bw"] > 0 and 2 / g["rw_bw"] - 1 / read_bw > 0:
        write_bw = 1 / (2 / g["rw_bw"] - 1 / read_bw)
    mem = (hbm - w) / read_bw + w / write_bw
    if k["launches"] == 0:
        return max(comp, mem)
    spts, srate, sline = g["stream_serial_points"], g["stream_serial_bw"], g["stream_serial_fixed"]
    if not k["pdl"] and ((spts and srate > 0) or sline > 0) and hbm > 0:
        fixed = probe_fixed(spts, srate, hbm) if spts and srate > 0 else sline
        lat = max(0.0, fixed - g["launch_graph"]) + max(0, k["round_trips"] - 1) * g["round_trip"]
        return max(comp, mem + lat) + k["launches"] * g["launch_graph"]
    stream = k["round_trips"] <= 1
    pts = g["stream_points"] if stream else g["rw_points"]
    rate = g["stream_bw"] if stream else g["rw_bw"]
    line = g["stream_fixed"] if stream else g["rw_fixed"]
    if hbm > 0 and ((pts and rate > 0) or line > 0):
        fixed = probe_fixed(pts, rate, hbm) if pts and rate > 0 else line
        lat = max(0.0, fixed - g["launch_graph"]) + max(0, k["round_trips"] - 2) * g["round_trip"]
    else:
        lat = g["kernel_floor"] + (max(0, k["round_trips"] - 1) * g["round_trip"] if hbm > 0 else 0)
    return max(comp, mem + lat) + k["launches"] * g["launch_graph"]


# --- driver ------------------------------------------------------------------------------------

def mirrored(run):
    g = ceilings(run)
    return [mirror(g, case_cost(c), c["math"]) for c in run["cases"] if "time_ms_median" in c]


def rejoined(binary, files):
    out = subprocess.run([binary, "roofline", "--rejoin", *files, "--format", "json"],
                         check=True, capture_output=True, text=True).stdout
    return [[c["predicted_ms"] * 1e-3 for c in r["cases"]] for r in json.loads(out)["runs"]]


def check(binary, files, runs):
    bad = 0
    for f, run, cpp in zip(files, runs, rejoined(binary, files)):
        cases = [c for c in run["cases"] if "time_ms_median" in c]
        for c, py, cc in zip(cases, mirrored(run), cpp):
            if abs(py / cc - 1) > 1e-9:
                bad += 1
                print(f"{f}: {c['op']} {c['shape']}: mirror {py * 1e6:.4f} us, C++ {cc * 1e6:.4f} us")
        if len(cases) != len(cpp):
            bad += 1
            print(f"{f}: {len(cases)} timed cases, the C++ rejoin has {len(cpp)}")
    print(f"mirror vs C++ rejoin: {'in step' if bad == 0 else f'{bad} differences'}")
    return 1 if bad else 0


def summary(files, runs, model):
    rows, keyed = {}, []
    for i, (run, preds) in enumerate(zip(runs, model)):
        cases = [c for c in run["cases"] if "time_ms_median" in c]
        here = {}
        for c, p in zip(cases, preds):
            if not c.get("dispatched", True):
                continue
            meas, rec = c["time_ms_median"] * 1e-3, c["predicted_ms"] * 1e-3
            r = rows.setdefault(c["op"], [[0, 0, 0] for _ in runs])
            r[i][0] += 1
            r[i][1] += within(meas, rec)
            r[i][2] += within(meas, p)
            here[(c["op"], c["shape"])] = (within(meas, rec), within(meas, p), meas / p)
        keyed.append(here)
    names = [f.rsplit("/", 1)[-1].replace("_kernels.json", "") for f in files]
    head = "".join(f" | {n[-22:]:>22}" for n in names)
    print(f"{'op':<24}{head}\n{'':<24}" + " | cases recorded   model" * len(runs))
    total = [[0, 0, 0] for _ in runs]
    for op, r in rows.items():
        print(f"{op:<24}" + "".join(f" | {a:>5} {b:>8} {m:>7}" for a, b, m in r))
        for t, x in zip(total, r):
            for j in range(3):
                t[j] += x[j]
    print(f"{'all dispatched':<24}" + "".join(f" | {a:>5} {b:>8} {m:>7}" for a, b, m in total))
    common = set.intersection(*(set(k) for k in keyed))
    rec = sum(all(k[c][0] for k in keyed) for c in common)
    now = sum(all(k[c][1] for k in keyed) for c in common)
    print(f"\nwithin ±{BAND:.0%} on every file ({len(common)} cases): recorded {rec}, model {now}")
    print("\nworst model gaps (measured / predicted):")
    for name, here in zip(names, keyed):
        worst = sorted(here.items(), key=lambda kv: -abs(math.log(kv[1][2])))[:8]
        print(f"  {name}: " + "; ".join(f"{op} {shape} {v[2]:.2f}" for (op, shape), v in worst))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("files", nargs="+", help="`ceiling bench kernels` result files")
    ap.add_argument("--ceiling", help="the ceiling binary: model columns from its --rejoin")
    ap.add_argument("--check", metavar="BIN", help="compare the mirror with BIN's --rejoin")
    a = ap.parse_args()
    runs = [json.load(open(f)) for f in a.files]
    if a.check:
        return check(a.check, a.files, runs)
    model = rejoined(a.ceiling, a.files) if a.ceiling else [mirrored(r) for r in runs]
    summary(a.files, runs, model)
    return 0


if __name__ == "__main__":
    sys.exit(main())
