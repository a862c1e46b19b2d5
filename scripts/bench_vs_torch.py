#!/usr/bin/python3
"""Runs PyTorch 1.13's nn.MultiheadAttention and `mha bench` on the same
shapes in the same run and prints the speed ratio per shape.

    /usr/bin/python3 scripts/bench_vs_torch.py [--mha build/mha] [--threads 2] [-r 5]
        [--shapes 8x384x1024/16,1x4096x1024/16c] [--json out.json]

A shape is BxSxE/H, with a trailing "c" for causal (PyTorch gets the
triu(ones(S, S), 1) bool attn_mask, mha gets is_causal). PyTorch runs in
inference mode with need_weights=False, self-attention, batch_first, which
is its fastest path; cached runs only (after a warm-up).

    /usr/bin/python3 scripts/bench_vs_torch.py --gqa-prefill 4096x4096/32:8 [--threads 2] [-r 3]

GQA prefill rows instead: a shape is SxE/H:KV (one sequence of S tokens,
width E, H query heads over KV key/value heads, head_dim E/H, causal). The
PyTorch side is Hugging Face's LlamaAttention with eager attention as
scripts/torch_oracle.py restates it (projections, rope, repeat_kv, matmul,
the additive causal mask, softmax, matmul, o_proj); mha runs
`llama_attention` on the cpu backend. Each row also times the four
projections alone on both sides: PyTorch's as F.linear calls, mha's as
the same layer with sliding_window 1 (one key per query: the attention
costs next to nothing, so the time is the projections plus the rope), and
reports that rate against the sgemm probe of the same run.
"""
import argparse
import json
import os
import re
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


def gqa_shape(s):
    dims, heads = s.split("/")
    n, e = (int(x) for x in dims.split("x"))
    h, kv = (int(x) for x in heads.split(":"))
    return n, e, h, kv


def median_ms(fn, reps):
    fn()  # warm-up
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def torch_gqa_prefill_ms(n, e, h, kv, reps):
    """(eager LlamaAttention ms, its four projections alone ms)."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from torch_oracle import LlamaAttention
    torch.manual_seed(0)
    m = LlamaAttention(e, h, kv, e // h, 500000.0, False, None).eval()
    x = torch.rand(1, n, e)
    with torch.inference_mode():
        full = median_ms(lambda: m(x), reps)
        proj = median_ms(lambda: (m.q_proj(x), m.k_proj(x), m.v_proj(x), m.o_proj(x)), reps)
    return full, proj


def mha_gqa_run(binary, n, e, h, kv, window, reps, threads):
    """mha's cached median ms for llama_attention at the shape (window 0: none)."""
    import tempfile
    cfg = {"name": "gqa-prefill", "variant": "llama_attention",
           "params": {"hidden_size": e, "num_attention_heads": h, "num_key_value_heads": kv, "head_dim": e // h,
                      "rope_theta": 500000.0, "max_position_embeddings": n,
                      "sliding_window": window if window > 0 else None},
           "weights": {"init": "torch", "seed": 0},
           "inputs": {"seed": 0, "x": {"rand": [1, n, e]}},
           "backend": {"name": "cpu", "threads": threads},
           "runs": {"warmup": 1, "iterations": reps}}
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "gqa.json")
        with open(path, "w") as f:
            json.dump(cfg, f)
        # The text report (--json would carry every output value).
        p = subprocess.run([binary, "run", "--config", path], capture_output=True, text=True)
    if p.returncode != 0:
        raise SystemExit(f"mha run failed ({p.returncode}): {p.stderr.strip()}")
    out = p.stdout
    m = re.search(r"cached runs \(\d+\): median ([0-9.]+) ms", out)
    if not m:
        raise SystemExit(f"mha run: no cached-run timing in its report:\n{out[-2000:]}")
    return float(m.group(1))


def mha_sgemm_gflops(binary, threads):
    """The sgemm probe `mha bench` runs, from a tiny row."""
    out = subprocess.run([binary, "bench", "--variant", "mha", "--seq", "8", "--hidden", "64", "--heads", "2",
                          "-r", "1", "-o", "json", "--no-progress"], check=True, capture_output=True, text=True,
                         env=dict(os.environ, OPENBLAS_NUM_THREADS=str(threads))).stdout
    return json.loads(out)["sgemm_gflops"]


def gqa_prefill(args):
    """GQA prefill rows: mha vs PyTorch's eager LlamaAttention, projections apart."""
    rows = []
    print(f"torch {torch.__version__}, {args.threads} threads, GQA prefill (causal, llama_attention, cpu)")
    print("| shape | torch eager ms | mha ms | speed-up | torch proj ms | mha proj ms | proj GFLOP/s | "
          "% sgemm | sgemm GFLOP/s | mha attention share |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for s in args.gqa_prefill.split(","):
        n, e, h, kv = gqa_shape(s)
        d = e // h
        t_full, t_proj = torch_gqa_prefill_ms(n, e, h, kv, args.repetitions)
        m_full = mha_gqa_run(args.mha, n, e, h, kv, 0, args.repetitions, args.threads)
        m_proj = mha_gqa_run(args.mha, n, e, h, kv, 1, args.repetitions, args.threads)
        sgemm = mha_sgemm_gflops(args.mha, args.threads)
        proj_flops = 2.0 * n * e * (2 * h * d + 2 * kv * d)
        proj_gflops = proj_flops / (m_proj * 1e6)
        share = 1.0 - m_proj / m_full
        print(f"| {n}x{e}/{h}:{kv} | {t_full:.0f} | {m_full:.0f} | {t_full / m_full:.2f}x | {t_proj:.0f} | {m_proj:.0f} | "
              f"{proj_gflops:.1f} | {100 * proj_gflops / sgemm:.1f} | {sgemm:.1f} | {100 * share:.0f}% |")
        sys.stdout.flush()
        rows.append({"shape": s, "torch_ms": t_full, "torch_proj_ms": t_proj, "mha_ms": m_full, "mha_proj_ms": m_proj,
                     "proj_gflops": proj_gflops, "sgemm_gflops": sgemm, "speedup": t_full / m_full})
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mha", default=os.path.join(os.path.dirname(__file__), "..", "build", "mha"))
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("-r", "--repetitions", type=int, default=5)
    ap.add_argument("--shapes", default=DEFAULT_SHAPES)
    ap.add_argument("--json", help="also write the rows here")
    ap.add_argument("--gqa-prefill", metavar="SHAPES",
                    help="GQA prefill rows (SxE/H:KV, comma list) instead of the nn.MultiheadAttention rows")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    if args.gqa_prefill:
        rows = gqa_prefill(args)
        if args.json:
            with open(args.json, "w") as f:
                json.dump(rows, f, indent=2)
        return
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
