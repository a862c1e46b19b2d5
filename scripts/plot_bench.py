#!/usr/bin/python3
"""Plots a `mha bench` sweep (-o json or -o jsonl) as lines: one panel per
kind of row (forward passes, pp<P> prefill rows, tg<N> decode rows), rate
against sequence length or depth, one line per shape / backend / thread
count, error bars from the standard deviation over the timed runs.

Forward and prefill panels show GFLOP/s with the sgemm rate probed in the
same run (dotted, one per thread count); decode panels show tokens/s with
the most the probed read bandwidth allows (dashed: bandwidth / bytes read
per step, so it falls as the KV cache grows). --torch adds PyTorch's times
from scripts/bench_vs_torch.py --json to the forward panel.

    build/mha bench -p 128,512,2048 -n 64 -d 0,1024,4096 -o json > sweep.json
    /usr/bin/python3 scripts/plot_bench.py sweep.json -o sweep.png
    /usr/bin/python3 scripts/plot_bench.py sweep.json --x depth --metric tokens -o tokens.png
"""
import argparse
import json
import math
import sys

import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def fail(msg):
    print(f"plot_bench.py: {msg}", file=sys.stderr)
    sys.exit(2)


def load_rows(path):
    """Rows of `mha bench -o json` (an object with "rows") or -o jsonl (one row a line)."""
    try:
        with open(path) as f:
            text = f.read()
    except OSError as e:
        fail(f"{path}: cannot read: {e.strerror}")
    except UnicodeDecodeError:
        fail(f"{path}: not text: expected `mha bench -o json` or `-o jsonl` output")
    try:
        doc = json.loads(text)
        if isinstance(doc, dict) and isinstance(doc.get("rows"), list):
            return doc["rows"]
        fail(f"{path}: expected `mha bench -o json` output (an object with \"rows\"), found {type(doc).__name__}")
    except json.JSONDecodeError:
        rows = []
        for i, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError as e:
                fail(f"{path}:{i}: not JSON ({e.msg}): expected `mha bench -o json` or `-o jsonl` output")
        return rows


def phase_of(r):
    # Rows written before the phases existed are forward passes.
    return r.get("phase", "forward")


def gflops_runs(r):
    """GFLOP/s of each timed run."""
    t = r["timing"]
    return [t["flops"] / (ms * 1e6) for ms in t["cached_ms"] if ms > 0]


def mean_sd(v):
    if not v:
        return 0.0, 0.0
    m = sum(v) / len(v)
    sd = math.sqrt(sum((x - m) ** 2 for x in v) / (len(v) - 1)) if len(v) > 1 else 0.0
    return m, sd


def series_key(r, x):
    """What a line holds constant: everything but the x axis."""
    shape = f"{r['batch']}x{r['hidden']}/{r['heads']}"
    if r.get("kv_heads", r["heads"]) != r["heads"]:
        shape += f":{r['kv_heads']}"
    parts = [r["variant"], r["backend"], shape]
    if phase_of(r) == "forward":
        parts.append("causal" if r["causal"] else "")
    else:
        if x != "seq":
            parts.append(r["test"])
        if x != "depth":
            parts.append(f"d{r.get('depth', 0)}")
    parts.append(f"t{r.get('threads', '?')}")
    return " ".join(p for p in parts if p)


def choose_x(rows, asked):
    if asked != "auto":
        return asked
    seqs = {r["seq"] for r in rows}
    depths = {r.get("depth", 0) for r in rows}
    return "depth" if len(depths) > len(seqs) else "seq"


def draw_panel(ax, rows, phase, x, metric):
    x = "seq" if phase == "forward" else x
    by = {}
    for r in rows:
        by.setdefault(series_key(r, x), []).append(r)
    sgemm_lines = {}
    for label, rs in by.items():
        rs.sort(key=lambda r: r.get(x, 0))
        xs = [r.get(x, 0) for r in rs]
        if metric == "tokens":
            ys = [r["tokens_per_s"] for r in rs]
            es = [r.get("tokens_per_s_sd", 0) for r in rs]
        else:
            ys, es = zip(*[mean_sd(gflops_runs(r)) for r in rs])
        line = ax.errorbar(xs, ys, yerr=es, marker="o", ms=4, capsize=3, label=label)
        if metric == "tokens" and phase == "generate":
            # tokens/s if every step read its bytes at the probed bandwidth.
            bound = [r["read_gbs"] * 1e9 / r["bytes_per_token"] * r["batch"] if r.get("bytes_per_token") else None
                     for r in rs]
            if all(b is not None for b in bound):
                ax.plot(xs, bound, "--", color=line[0].get_color(), alpha=0.7,
                        label=f"bandwidth bound ({rs[0]['read_gbs']:.1f} GB/s)")
        if metric == "gflops":
            for r in rs:
                sgemm_lines[r.get("threads", 0)] = r.get("sgemm_gflops", 0)
    for t, g in sorted(sgemm_lines.items()):
        if g > 0:
            ax.axhline(g, ls=":", color="grey")
            ax.annotate(f"sgemm t{t}: {g:.0f} GFLOP/s", (0.01, g), xycoords=("axes fraction", "data"),
                        fontsize=7, color="grey", va="bottom")
    xs_all = sorted({r.get(x, 0) for r in rows})
    if xs_all and xs_all[0] == 0:
        # Depth 0 has no logarithm: linear up to the first non-zero depth.
        ax.set_xscale("symlog", base=2, linthresh=xs_all[1] if len(xs_all) > 1 else 1)
    else:
        ax.set_xscale("log", base=2)
    ax.set_xticks(xs_all)
    ax.set_xticklabels([str(v) for v in xs_all], fontsize=7)
    ax.set_xlabel({"seq": {"forward": "sequence length", "prefill": "prompt tokens P",
                           "generate": "generated tokens N"}[phase],
                   "depth": "depth (tokens in the KV cache before the row)"}[x])
    ax.set_ylabel("tokens/s" if metric == "tokens" else "GFLOP/s")
    ax.set_title({"forward": "forward pass", "prefill": "prefill (pp)", "generate": "decode (tg)"}[phase])
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=7)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("bench", help="`mha bench -o json` or `-o jsonl` output")
    ap.add_argument("--x", choices=["auto", "seq", "depth"], default="auto",
                    help="x axis of prefill/decode panels (auto: whichever the sweep varies more)")
    ap.add_argument("--metric", choices=["auto", "gflops", "tokens"], default="auto",
                    help="auto: GFLOP/s for forward and prefill, tokens/s for decode")
    ap.add_argument("--torch", help="rows written by scripts/bench_vs_torch.py --json (forward panel)")
    ap.add_argument("-o", "--output", default="bench.png")
    args = ap.parse_args()
    rows = [r for r in load_rows(args.bench) if "skipped" not in r and "timing" in r]
    if not rows:
        fail(f"{args.bench}: no row that ran (every row skipped, or none)")
    phases = [p for p in ("forward", "prefill", "generate") if any(phase_of(r) == p for r in rows)]
    fig, axes = plt.subplots(1, len(phases), figsize=(6.5 * len(phases), 4.8), squeeze=False)
    for ax, phase in zip(axes[0], phases):
        rs = [r for r in rows if phase_of(r) == phase]
        metric = args.metric if args.metric != "auto" else ("tokens" if phase == "generate" else "gflops")
        draw_panel(ax, rs, phase, choose_x(rs, args.x), metric)
        if phase == "forward" and args.torch:
            with open(args.torch) as f:
                pts = sorted((r["mha"]["seq"], r["mha"]["timing"]["flops"] / (r["torch_ms"] * 1e6)) for r in json.load(f))
            ax.plot([p[0] for p in pts], [p[1] for p in pts], "s-", label="PyTorch 1.13 nn.MultiheadAttention")
            ax.legend(fontsize=7)
    r0 = rows[0]
    fig.suptitle(f"mha bench: build {r0.get('build', '?')}, {r0.get('cpu', '?')}", fontsize=9)
    fig.tight_layout()
    fig.savefig(args.output, dpi=110)
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
