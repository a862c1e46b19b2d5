#!/usr/bin/python3
"""Plots `mha bench -o json` output (and optionally the JSON that
scripts/bench_vs_torch.py writes, to put PyTorch beside it): time per shape
and backend, as a bar chart PNG.

    build/mha bench -o json > bench.json
    /usr/bin/python3 scripts/plot_bench.py bench.json [--torch vs_torch.json] -o bench.png
"""
import argparse
import json

import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("bench_json")
    ap.add_argument("--torch", help="rows written by scripts/bench_vs_torch.py --json")
    ap.add_argument("-o", "--output", default="bench.png")
    args = ap.parse_args()
    with open(args.bench_json) as f:
        doc = json.load(f)
    series = {}  # label -> {shape: ms}
    shapes = []
    for r in doc["rows"]:
        if "skipped" in r:
            continue
        shape = f"{r['batch']}x{r['seq']}x{r['hidden']}/{r['heads']}{' causal' if r['causal'] else ''}"
        if shape not in shapes:
            shapes.append(shape)
        series.setdefault(f"mha {r['variant']} {r['backend']}", {})[shape] = r["timing"]["median_ms"]
    if args.torch:
        with open(args.torch) as f:
            for r in json.load(f):
                m = r["mha"]
                shape = f"{m['batch']}x{m['seq']}x{m['hidden']}/{m['heads']}{' causal' if m['causal'] else ''}"
                if shape not in shapes:
                    shapes.append(shape)
                series.setdefault("PyTorch 1.13 nn.MultiheadAttention", {})[shape] = r["torch_ms"]
    fig, ax = plt.subplots(figsize=(max(6, 1.6 * len(shapes)), 4.5))
    width = 0.8 / max(1, len(series))
    for i, (label, vals) in enumerate(series.items()):
        xs = [j + i * width for j, s in enumerate(shapes) if s in vals]
        ax.bar(xs, [vals[s] for s in shapes if s in vals], width, label=label)
    ax.set_xticks([j + 0.4 - width / 2 for j in range(len(shapes))])
    ax.set_xticklabels(shapes, rotation=20, ha="right")
    ax.set_ylabel("median cached run, ms (log)")
    ax.set_yscale("log")
    ax.set_title(f"mha bench (sgemm {doc.get('sgemm_gflops', 0):.0f} GFLOP/s)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(args.output, dpi=120)
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
