#!/bin/bash
# First run / cached median of one `mha bench` row over N fresh processes:
# a first run pays for what a process has not touched yet, so one process
# says little. Usage (from the repository root):
#   scripts/first_run_ratio.sh N [mha bench row flags...]
#   scripts/first_run_ratio.sh 10 --variant torch_mha --batch 8 --seq 384 --hidden 1024 --heads 16
set -euo pipefail
n=${1:?usage: scripts/first_run_ratio.sh N [mha bench flags...]}
shift
for _ in $(seq "$n"); do ./build/mha bench "$@" -r 5 -o jsonl --no-progress; done | /usr/bin/python3 -c '
import json, statistics, sys
rows = [json.loads(line)["timing"] for line in sys.stdin if "\"timing\"" in line]
q = sorted(t["first_ms"] / t["median_ms"] for t in rows)
print("first/cached over %d processes: median %.2f, worst %.2f (%s)"
      % (len(q), statistics.median(q), q[-1], " ".join("%.2f" % x for x in q)))'
