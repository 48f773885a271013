#!/usr/bin/env python3
"""Summarizes an `ncu --csv --metrics gpu__time_duration.sum` log of one decode step: kernels
grouped by name (templates stripped) and grid (which tells the projections apart), with count,
total and mean GPU time and share of the step's sum.
Usage: ncu_kernel_summary.py NCU_CSV"""
import csv
import re
import sys
from collections import defaultdict


def short(name):
    name = name.replace("(anonymous namespace)", "anon")
    name = re.sub(r"^void ", "", name)
    name = re.sub(r"\(.*$", "", name)          # argument list
    name = re.sub(r"<.*>", "<>", name)          # template arguments
    return name.split("::")[-1][:60]


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    lines = open(sys.argv[1]).read().splitlines()
    start = next((i for i, l in enumerate(lines) if l.startswith('"ID"')), None)
    if start is None:
        sys.exit("ncu_kernel_summary: no CSV header in " + sys.argv[1])
    total = defaultdict(float)
    count = defaultdict(int)
    for row in csv.DictReader(lines[start:]):
        if row.get("Metric Name") != "gpu__time_duration.sum":
            continue
        v = float(row["Metric Value"].replace(",", ""))
        unit = row.get("Metric Unit", "nsecond")
        us = v / 1000 if unit.startswith("n") else v * 1000 if unit.startswith("m") else v
        k = short(row["Kernel Name"]) + " " + row.get("Grid Size", "").replace(" ", "")
        total[k] += us
        count[k] += 1
    s = sum(total.values())
    n = sum(count.values())
    print(f"{n} kernels, {s:.1f} us of GPU time in one decode step")
    for k in sorted(total, key=total.get, reverse=True):
        print(f"  {k:60s} {count[k]:4d} x {total[k] / count[k]:8.2f} us = {total[k]:8.1f} us"
              f" ({100 * total[k] / s:4.1f}%)")


if __name__ == "__main__":
    main()
