#!/usr/bin/env bash
# data/eval/kjv-luke.txt, the English text `ceiling bench accuracy` scores: the Gospel of Luke in
# the King James Version (1611; public domain), printed by the Debian package bible-kjv 4.38 from
# the text of bible-kjv-text 4.38 (its copyright file: "The copyright for the King James Version
# text of the Bible is expired"). One paragraph per chapter, verse numbers dropped.
# The file is committed (about 130 KB); this script regenerates it: `--check` compares instead.
# Needs root for apt-get (Debian / Ubuntu).
set -euo pipefail
cd "$(dirname "$0")/.."
out=data/eval/kjv-luke.txt
if ! command -v bible >/dev/null; then
  apt-get install -y -q bible-kjv bible-kjv-text >/dev/null
fi
tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT
bible -l100000 "Luke1:1-Luke24:53" 2>/dev/null | python3 -c '
import re, sys
chapters, cur = [], []
for line in sys.stdin:
    line = line.rstrip("\n")
    if re.fullmatch(r"Luke \d+", line.strip()):
        if cur: chapters.append(" ".join(cur))
        cur = []
    elif line.strip():
        cur.append(re.sub(r"^\s*\d+\s+", "", line).strip())
if cur: chapters.append(" ".join(cur))
sys.stdout.write("\n\n".join(chapters) + "\n")
' > "$tmp"
if [ "${1:-}" = "--check" ]; then
  cmp -s "$tmp" "$out" && echo "$out is current" || { echo "$out differs from the package"; exit 1; }
else
  mkdir -p "$(dirname "$out")"
  cp "$tmp" "$out"
  echo "wrote $out ($(wc -c <"$out") bytes)"
fi
