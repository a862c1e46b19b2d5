#!/usr/bin/env bash
# tt-sim per-op breakdown and thread scaling for a config (default: seed
# 002's first pipeline at its full shape, exact numerics):
#   scripts/ttsim_breakdown.sh [CONFIG] [RUNS]
# For 1 and 2 threads it runs `mha run` (first run + RUNS cached runs) and
# prints the cached median, each op's share of host time, and for matmuls the
# ns per emulated multiply-add phase per thread (host time x threads /
# lane multiply-adds x fidelity phases), from the backend's JSON report.
set -euo pipefail
cd "$(dirname "$0")/.."
config="${1:-configs/seed002_tt_ttnn_mha.json}"
runs="${2:-2}"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
# The config with backend.threads set, written beside the original so that
# relative paths in it still resolve.
for t in 1 2; do
  c="$(dirname "$config")/.ttsim_breakdown_$$_t$t.json"
  /usr/bin/python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); j["backend"]["threads"]=int(sys.argv[3]); json.dump(j, open(sys.argv[2],"w"))' "$config" "$c" "$t"
  ./build/mha run --config "$c" -n "$runs" --warmup 0 --json "$tmp/t$t.json" >/dev/null || { rm -f "$c"; exit 1; }
  rm -f "$c"
done
/usr/bin/python3 - "$tmp" <<'PY'
import json, sys
d = sys.argv[1]
med = {}
for t in (1, 2):
    j = json.load(open(f"{d}/t{t}.json"))
    med[t] = j["timing"]["median_ms"]
    ops = j["backend_info"]["program_cache"]
    total = sum(o.get("host_ms", 0) for o in ops.values())
    print(f"threads={t}: cached median {med[t]:.1f} ms; host time by op over all runs ({total:.0f} ms):")
    for name, o in sorted(ops.items(), key=lambda kv: -kv[1].get("host_ms", 0)):
        extra = f", {o['ns_per_mac_phase_per_thread']:.3f} ns per MAC-phase per thread" if "emulated_mac_phases" in o else ""
        print(f"  {name:58s} {o.get('host_ms', 0):9.1f} ms {100 * o.get('host_ms', 0) / total:5.1f}%{extra}")
print(f"speed-up 1 -> 2 threads: {med[1] / med[2]:.2f}x")
PY
