#!/usr/bin/python3
"""Draws the attention weights that `mha run --attn-weights W.npy` saved as
one heatmap per head (query position down, key position across), all on one
colour scale so heads can be compared. Entries that are exactly 0 (masked:
causal, sliding window, padding) are drawn grey, so a mask's shape shows at a
glance.

Accepted layouts (what the variants return):
  [B, H, L, S]  per head (llama_attention, mha, ttnn_mha; torch_mha with
                average_attn_weights false)
  [B, L, S]     averaged over heads (torch_mha's default): one panel
  [L, S]        one panel

    build/mha run --config configs/llama_attention.json --attn-weights w.npy
    /usr/bin/python3 scripts/plot_attention.py w.npy --batch 0 -o heads.png
"""
import argparse
import math
import sys

import numpy as np
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def fail(msg):
    print(f"plot_attention.py: {msg}", file=sys.stderr)
    sys.exit(2)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("weights", help=".npy written by `mha run --attn-weights`")
    ap.add_argument("--batch", type=int, default=0, help="which batch item (default 0)")
    ap.add_argument("--heads", help="comma list of heads to draw (default: all, at most --max-heads)")
    ap.add_argument("--max-heads", type=int, default=32)
    ap.add_argument("--log", action="store_true", help="logarithmic colour scale (small weights visible)")
    ap.add_argument("-o", "--output", default="attention.png")
    args = ap.parse_args()
    try:
        w = np.load(args.weights, allow_pickle=False)
    except (OSError, ValueError) as e:
        fail(f"{args.weights}: cannot read as .npy: {e}")
    averaged = w.ndim == 3  # torch_mha's average over heads
    if w.ndim == 2:
        w = w[None, None]
    elif w.ndim == 3:
        w = w[:, None]
    elif w.ndim != 4:
        fail(f"{args.weights}: expected weights of shape [B, H, L, S], [B, L, S] or [L, S], found {list(w.shape)}")
    b, h, l, s = w.shape
    if not 0 <= args.batch < b:
        fail(f"--batch {args.batch}: the file holds batch items 0..{b - 1}")
    heads = list(range(h))
    if args.heads:
        try:
            heads = [int(x) for x in args.heads.split(",")]
        except ValueError:
            fail(f"--heads: expected a comma list of head numbers, found '{args.heads}'")
        bad = [x for x in heads if not 0 <= x < h]
        if bad:
            fail(f"--heads: head {bad[0]} not in 0..{h - 1}")
    heads = heads[: args.max_heads]
    data = w[args.batch].astype(np.float64)
    shown = data[heads]
    vmax = float(shown.max()) if shown.size else 1.0
    positive = shown[shown > 0]
    norm = (matplotlib.colors.LogNorm(vmin=max(float(positive.min()), vmax * 1e-6), vmax=vmax)
            if args.log and positive.size else matplotlib.colors.Normalize(vmin=0.0, vmax=vmax))
    cmap = matplotlib.colormaps["viridis"].copy()
    cmap.set_bad("#cfcfcf")  # exact zeros (masked) are drawn as NaN
    cols = min(len(heads), max(1, math.ceil(math.sqrt(len(heads)))))
    rows = math.ceil(len(heads) / cols)
    panel = 2.6 if len(heads) > 1 else 4.5
    fig, axes = plt.subplots(rows, cols, figsize=(panel * cols + 1.2, panel * rows * l / max(s, 1) + 0.9),
                             squeeze=False, layout="constrained")
    im = None
    for i, ax in enumerate(axes.flat):
        if i >= len(heads):
            ax.axis("off")
            continue
        m = np.where(data[heads[i]] == 0, np.nan, data[heads[i]])
        im = ax.imshow(m, cmap=cmap, norm=norm, interpolation="nearest", aspect="auto")
        ax.set_title("mean of heads" if averaged else f"head {heads[i]}", fontsize=9)
        ax.tick_params(labelsize=7)
        if i % cols == 0:
            ax.set_ylabel("query position", fontsize=8)
        if i // cols == rows - 1:
            ax.set_xlabel("key position", fontsize=8)
    fig.suptitle(f"{args.weights}: batch {args.batch}, {l} queries x {s} keys (grey: exactly 0, masked)", fontsize=9)
    fig.colorbar(im, ax=axes, shrink=0.8, label="attention weight")
    fig.savefig(args.output, dpi=100)
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
