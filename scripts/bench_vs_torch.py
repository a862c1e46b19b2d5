#!/usr/bin/python3
"""Runs PyTorch 1.13's nn.MultiheadAttention and `mha bench` on the same
shapes in the same run and prints the speed ratio per shape.

    /usr/bin/python3 scripts/bench_vs_torch.py [--mha build/mha] [--threads 2] [-r 5]
        [--shapes 8x384x1024/16,1x4096x1024/16c] [--json out.json]

A shape is BxSxE/H, with a trailing "c" for causal (PyTorch gets the
triu(ones(S, S), 1) bool attn_mask, mha gets is_causal). PyTorch runs in
inference mode with need_weights=False, self-attention, batch_first, which
is its fastest path; cached runs only (after a warm-up).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

import torch

DEFAULT_SHAPES = "8x384x1024/16,1x1024x768/12,1x1024x768/12c,1x4096x1024/16,1x4096x1024/16c"


def parse_shape(s):
    causal = s.endswith("c")
    dims, heads = s.rstrip("c").split("/")
    b, n, e = (int(x) for x in dims.split("x"))
    return b, n, e, int(heads), causal


def torch_ms(b, n, e, h, causal, reps):
    torch.manual_seed(0)
    m = torch.nn.MultiheadAttention(e, h, batch_first=True).eval()
    x = torch.rand(b, n, e)
    mask = torch.triu(torch.ones(n, n), diagonal=1).bool() if causal else None
    times = []
    with torch.inference_mode():
        m(x, x, x, attn_mask=mask, need_weights=False)  # warm-up
        for _ in range(reps):
            t0 = time.perf_counter()
            m(x, x, x, attn_mask=mask, need_weights=False)
            times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def mha_row(binary, b, n, e, h, causal, reps, threads):
    env = dict(os.environ, OPENBLAS_NUM_THREADS=str(threads))
    out = subprocess.run([binary, "bench", "--variant", "torch_mha", "--batch", str(b), "--seq", str(n),
                          "--hidden", str(e), "--heads", str(h), "--causal", "1" if causal else "0",
                          "-r", str(reps), "-o", "json", "--no-progress"],
                         check=True, capture_output=True, text=True, env=env).stdout
    doc = json.loads(out)
    return doc["rows"][0], doc["sgemm_gflops"]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mha", default=os.path.join(os.path.dirname(__file__), "..", "build", "mha"))
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("-r", "--repetitions", type=int, default=5)
    ap.add_argument("--shapes", default=DEFAULT_SHAPES)
    ap.add_argument("--json", help="also write the rows here")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    rows = []
    print(f"torch {torch.__version__}, {args.threads} threads")
    print("| shape | causal | torch ms | mha ms | speed-up | mha GFLOP/s | mha % sgemm | sgemm GFLOP/s | mha first/cached |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
    for s in args.shapes.split(","):
        b, n, e, h, causal = parse_shape(s)
        t_ms = torch_ms(b, n, e, h, causal, args.repetitions)
        row, sgemm = mha_row(args.mha, b, n, e, h, causal, args.repetitions, args.threads)
        m_ms = row["timing"]["median_ms"]
        first = row["timing"]["first_ms"] / m_ms
        print(f"| {b}x{n}x{e}/{h} | {'yes' if causal else 'no'} | {t_ms:.1f} | {m_ms:.1f} | {t_ms / m_ms:.2f}x | "
              f"{row['timing']['gflops_cached']:.1f} | {row['sgemm_percent']:.1f} | {sgemm:.1f} | {first:.2f} |")
        sys.stdout.flush()
        rows.append({"shape": s, "torch_ms": t_ms, "mha": row, "sgemm_gflops": sgemm, "speedup": t_ms / m_ms})
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=2)


if __name__ == "__main__":
    main()
