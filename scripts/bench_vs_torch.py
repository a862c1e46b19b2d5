#!/usr/bin/python3
"""Runs PyTorch 1.13's nn.MultiheadAttention and `mha bench` on the same
shapes in the same run and prints the speed ratio per shape.

    /usr/bin/python3 scripts/bench_vs_torch.py [--mha build/mha] [--threads 2] [-r 5]
        [--shapes 8x384x1024/16,1x4096x1024/16c] [--json out.json]
        [--decode 4096/32/8/128@32768] [--decode-steps 16] [--cache-dtypes float32,bfloat16]

A shape is BxSxE/H, with a trailing "c" for causal (PyTorch gets the
triu(ones(S, S), 1) bool attn_mask, mha gets is_causal). PyTorch runs in
inference mode with need_weights=False, self-attention, batch_first, which
is its fastest path; cached runs only (after a warm-up).

Decode rows (--decode HIDDEN/HEADS/KV_HEADS/HEAD_DIM@DEPTH, comma list; '' for
none; --shapes '' skips the rows above): one token at a time against a KV
cache holding DEPTH positions, Llama-style (RoPE, GQA, no biases). PyTorch
runs Hugging Face's eager path with a preallocated cache (StaticCache-style):
q/k/v projections, rotary embedding at the position, index_copy_ into the
cache, repeat_kv, matmul, float32 softmax, matmul, o_proj. mha runs `mha run`
with a decode section whose depth is a synthetic context (random K/V, the
same cost per step as a real prefill of DEPTH tokens). Both take the median of
--decode-steps steps per repetition, then the median over repetitions. Bytes
per token = the four projection weights + the K and V rows read (DEPTH + 1
positions) in the cache dtype; GB/s = bytes / time.

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
reports that rate against the sgemm probe of the same run, and the
attention alone: (torch layer - torch projections) / (mha layer - mha
projections-only pass).

    /usr/bin/python3 scripts/bench_vs_torch.py --gqa-core 4096x4096/32:8 [--threads 2] [-r 3] [--rounds 5]

The attention core alone, measured directly rather than as a difference of
two whole-layer timings (which a loaded machine swamps): Hugging Face's
eager GQA attention (repeat_kv, Q.K^T, the additive causal mask, softmax,
P.V) on random Q/K/V against the cpu flash kernel on the same shape
(build/mha_flash_bench), alternating which goes first, --rounds rounds;
each row gives wall and CPU-time medians, then the median speed-up.
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
                          "-r", str(reps), "-o", "json", "--no-progress", "--probes", "fresh"],
                         check=True, capture_output=True, text=True, env=env).stdout
    doc = json.loads(out)
    return doc["rows"][0], doc["sgemm_gflops"]


def parse_decode(s):
    dims, depth = s.split("@")
    hidden, heads, kv, dh = (int(x) for x in dims.split("/"))
    return hidden, heads, kv, dh, int(depth)


def decode_bytes(hidden, heads, kv, dh, depth, cache_dtype):
    weights = 4 * (hidden * heads * dh + 2 * hidden * kv * dh + heads * dh * hidden)
    cache = 2 * kv * dh * (depth + 1) * (2 if cache_dtype == "bfloat16" else 4)
    return weights, cache


def torch_decode_ms(hidden, heads, kv, dh, depth, steps, cache_dtype, reps):
    """Hugging Face LlamaAttention's eager decode step with a preallocated cache."""
    torch.manual_seed(0)
    nn = torch.nn
    q_proj, k_proj = nn.Linear(hidden, heads * dh, bias=False), nn.Linear(hidden, kv * dh, bias=False)
    v_proj, o_proj = nn.Linear(hidden, kv * dh, bias=False), nn.Linear(heads * dh, hidden, bias=False)
    store = torch.bfloat16 if cache_dtype == "bfloat16" else torch.float32
    total = depth + steps
    k_cache = torch.zeros(1, kv, total, dh, dtype=store)
    v_cache = torch.zeros(1, kv, total, dh, dtype=store)
    k_cache[:, :, :depth] = torch.rand(1, kv, depth, dh) * 2 - 1
    v_cache[:, :, :depth] = torch.rand(1, kv, depth, dh) * 2 - 1
    inv_freq = 1.0 / (500000.0 ** (torch.arange(0, dh, 2, dtype=torch.int64).float() / dh))
    n_rep, scaling = heads // kv, dh ** -0.5

    def rotate_half(x):
        return torch.cat((-x[..., dh // 2:], x[..., :dh // 2]), dim=-1)

    def repeat_kv(x):
        b, h, s_, d = x.shape
        return x[:, :, None, :, :].expand(b, h, n_rep, s_, d).reshape(b, h * n_rep, s_, d)

    def step(x, pos):
        q = q_proj(x).view(1, 1, heads, dh).transpose(1, 2)
        k = k_proj(x).view(1, 1, kv, dh).transpose(1, 2)
        v = v_proj(x).view(1, 1, kv, dh).transpose(1, 2)
        freqs = pos.float()[:, None] * inv_freq[None, :]
        emb = torch.cat((freqs, freqs), dim=-1)
        cos, sin = emb.cos()[None, None], emb.sin()[None, None]
        q, k = q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin
        k_cache.index_copy_(2, pos, k.to(store))
        v_cache.index_copy_(2, pos, v.to(store))
        n = int(pos[-1]) + 1
        keys = repeat_kv(k_cache[:, :, :n].to(torch.float32))
        values = repeat_kv(v_cache[:, :, :n].to(torch.float32))
        w = torch.matmul(q, keys.transpose(2, 3)) * scaling
        w = torch.softmax(w, dim=-1, dtype=torch.float32)
        return o_proj(torch.matmul(w, values).transpose(1, 2).reshape(1, 1, heads * dh))

    medians = []
    with torch.inference_mode():
        x = torch.randn(1, 1, hidden)
        for _ in range(reps):
            times = []
            for t in range(steps):
                pos = torch.tensor([depth + t])
                t0 = time.perf_counter()
                step(x, pos)
                times.append((time.perf_counter() - t0) * 1e3)
            medians.append(statistics.median(times))
    return statistics.median(medians)


def mha_decode_row(binary, hidden, heads, kv, dh, depth, steps, cache_dtype, reps, threads):
    import tempfile
    config = {"variant": "llama_attention",
              "params": {"hidden_size": hidden, "num_attention_heads": heads, "num_key_value_heads": kv,
                         "head_dim": dh, "rope_theta": 500000.0, "max_position_embeddings": depth + steps + 1},
              "weights": {"init": "torch", "seed": 0},
              "inputs": {"seed": 0, "x": {"randn": [1, 1 + steps, hidden]}},
              "decode": {"prompt": 1, "tokens": steps, "depth": depth, "cache_dtype": cache_dtype},
              "runs": {"iterations": reps},
              "backend": {"name": "cpu", "threads": threads}}
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "decode.json")
        with open(path, "w") as f:
            json.dump(config, f)
        env = dict(os.environ, OPENBLAS_NUM_THREADS=str(threads))
        out = subprocess.run([binary, "run", "--config", path, "--json", "-"], check=True, capture_output=True,
                             text=True, env=env).stdout
    return json.loads(out)["decode"]


def decode_rows(args):
    rows = []
    print()
    print(f"decode, {args.decode_steps} steps per repetition, median of {args.repetitions} repetitions")
    print("| hidden/heads/kv/head_dim | depth | cache | MB per token (weights + KV) | torch ms | mha ms | speed-up "
          "| torch GB/s | mha GB/s | mha tokens/s |")
    print("|---|---:|---|---:|---:|---:|---:|---:|---:|---:|")
    for s in args.decode.split(","):
        hidden, heads, kv, dh, depth = parse_decode(s)
        for cache_dtype in args.cache_dtypes.split(","):
            w, c = decode_bytes(hidden, heads, kv, dh, depth, cache_dtype)
            t_ms = torch_decode_ms(hidden, heads, kv, dh, depth, args.decode_steps, cache_dtype, args.repetitions)
            row = mha_decode_row(args.mha, hidden, heads, kv, dh, depth, args.decode_steps, cache_dtype,
                                 args.repetitions, args.threads)
            m_ms = row["step_median_ms"]
            mb = (w + c) / 1e6
            print(f"| {hidden}/{heads}/{kv}/{dh} | {depth} | {cache_dtype} | {w / 1e6:.0f} + {c / 1e6:.0f} = {mb:.0f} | "
                  f"{t_ms:.1f} | {m_ms:.1f} | {t_ms / m_ms:.2f}x | {mb / t_ms:.2f} | {mb / m_ms:.2f} | "
                  f"{row['tokens_per_s']:.1f} |")
            sys.stdout.flush()
            rows.append({"decode": s, "cache_dtype": cache_dtype, "weight_bytes": w, "cache_bytes": c,
                         "torch_ms": t_ms, "mha_ms": m_ms, "speedup": t_ms / m_ms, "torch_gbps": mb / t_ms,
                         "mha_gbps": mb / m_ms, "mha": row})
    return rows

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
    m = LlamaAttention(e, h, kv, e // h, 500000.0, False, False, None).eval()
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
                          "-r", "1", "-o", "json", "--no-progress", "--probes", "fresh"], check=True, capture_output=True, text=True,
                         env=dict(os.environ, OPENBLAS_NUM_THREADS=str(threads))).stdout
    return json.loads(out)["sgemm_gflops"]


def gqa_prefill(args):
    """GQA prefill rows: mha vs PyTorch's eager LlamaAttention, projections apart."""
    rows = []
    print(f"torch {torch.__version__}, {args.threads} threads, GQA prefill (causal, llama_attention, cpu)")
    print("| shape | torch eager ms | mha ms | speed-up | torch proj ms | mha proj ms | proj GFLOP/s | "
          "% sgemm | sgemm GFLOP/s | mha attention share | attention alone speed-up |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
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
        # Attention alone: each side's layer minus its projections-only pass.
        attn = (t_full - t_proj) / (m_full - m_proj) if m_full > m_proj else float("nan")
        print(f"| {n}x{e}/{h}:{kv} | {t_full:.0f} | {m_full:.0f} | {t_full / m_full:.2f}x | {t_proj:.0f} | {m_proj:.0f} | "
              f"{proj_gflops:.1f} | {100 * proj_gflops / sgemm:.1f} | {sgemm:.1f} | {100 * share:.0f}% | {attn:.2f}x |")
        sys.stdout.flush()
        rows.append({"shape": s, "torch_ms": t_full, "torch_proj_ms": t_proj, "mha_ms": m_full, "mha_proj_ms": m_proj,
                     "proj_gflops": proj_gflops, "sgemm_gflops": sgemm, "speedup": t_full / m_full,
                     "attention_speedup": attn})
    return rows


def torch_gqa_core_ms(n, h, kv, d, reps):
    """(wall ms, CPU ms) medians of Hugging Face's eager GQA attention core:
    repeat_kv, Q.K^T * scale, + the additive causal mask (built once,
    outside the timing), float32 softmax, P.V."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from torch_oracle import llama_repeat_kv
    torch.manual_seed(0)
    q, k, v = torch.randn(1, h, n, d), torch.randn(1, kv, n, d), torch.randn(1, kv, n, d)
    mask = torch.zeros(1, 1, n, n).masked_fill(torch.ones(n, n, dtype=torch.bool).triu(1),
                                               torch.finfo(torch.float32).min)

    def core():
        kk, vv = llama_repeat_kv(k, h // kv), llama_repeat_kv(v, h // kv)
        w = torch.matmul(q, kk.transpose(2, 3)) * d ** -0.5 + mask
        return torch.matmul(torch.softmax(w, dim=-1, dtype=torch.float32), vv)

    with torch.inference_mode():
        core()  # warm-up
        wall, cpu = [], []
        for _ in range(reps):
            t0, c0 = time.perf_counter(), time.process_time()
            core()
            wall.append((time.perf_counter() - t0) * 1e3)
            cpu.append((time.process_time() - c0) * 1e3)
    return statistics.median(wall), statistics.median(cpu)


def mha_flash_core_ms(binary, n, h, kv, d, reps, threads):
    """(wall ms, CPU ms, ISA) of mha_flash_bench: the cpu flash kernel alone."""
    out = subprocess.run([binary, str(n), str(h), str(kv), str(d), str(threads), str(reps)], check=True,
                         capture_output=True, text=True).stdout
    m = re.search(r"flash (\w+) .*wall median ([0-9.]+) ms .*cpu median ([0-9.]+) ms", out)
    if not m:
        raise SystemExit(f"mha_flash_bench: unexpected output:\n{out}")
    return float(m.group(2)), float(m.group(3)), m.group(1)


def gqa_core(args):
    """The attention core alone, PyTorch eager vs mha's flash kernel, in
    alternating order for --rounds rounds; ratios of wall and CPU time."""
    rows = []
    print(f"torch {torch.__version__}, {args.threads} threads, GQA attention core (causal), {args.rounds} rounds")
    print("| shape | round | load | torch ms | mha ms | speed-up | torch CPU ms | mha CPU ms | CPU-time ratio | mha ISA |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    for s in args.gqa_core.split(","):
        n, e, h, kv = gqa_shape(s)
        d = e // h
        ratios = []
        for r in range(args.rounds):
            load = os.getloadavg()[0]
            if r % 2 == 0:
                tw, tc = torch_gqa_core_ms(n, h, kv, d, args.repetitions)
                mw, mc, isa = mha_flash_core_ms(args.flash_bench, n, h, kv, d, args.repetitions, args.threads)
            else:
                mw, mc, isa = mha_flash_core_ms(args.flash_bench, n, h, kv, d, args.repetitions, args.threads)
                tw, tc = torch_gqa_core_ms(n, h, kv, d, args.repetitions)
            ratios.append(tw / mw)
            print(f"| {n}x{e}/{h}:{kv} | {r} | {load:.1f} | {tw:.0f} | {mw:.0f} | {tw / mw:.2f}x | {tc:.0f} | {mc:.0f} | "
                  f"{tc / mc:.2f}x | {isa} |")
            sys.stdout.flush()
            rows.append({"shape": s, "round": r, "load": load, "torch_ms": tw, "mha_ms": mw, "torch_cpu_ms": tc,
                         "mha_cpu_ms": mc, "speedup": tw / mw, "isa": isa})
        print(f"median speed-up {statistics.median(ratios):.2f}x (range {min(ratios):.2f}-{max(ratios):.2f}x)")
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mha", default=os.path.join(os.path.dirname(__file__), "..", "build", "mha"))
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("-r", "--repetitions", type=int, default=5)
    ap.add_argument("--shapes", default=DEFAULT_SHAPES)
    ap.add_argument("--json", help="also write the rows here")
    ap.add_argument("--decode", default="4096/32/8/128@32768",
                    help="decode rows HIDDEN/HEADS/KV_HEADS/HEAD_DIM@DEPTH, comma list ('' for none)")
    ap.add_argument("--decode-steps", type=int, default=16)
    ap.add_argument("--cache-dtypes", default="float32,bfloat16")
    ap.add_argument("--gqa-core", metavar="SHAPES",
                    help="attention core alone (SxE/H:KV, causal): PyTorch's eager GQA attention against "
                         "mha's flash kernel (mha_flash_bench), --rounds times in alternating order")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--flash-bench", default=os.path.join(os.path.dirname(__file__), "..", "build", "mha_flash_bench"))
    ap.add_argument("--gqa-prefill", metavar="SHAPES",
                    help="GQA prefill rows (SxE/H:KV, comma list) instead of the nn.MultiheadAttention rows")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    if args.gqa_prefill or args.gqa_core:
        rows = (gqa_prefill(args) if args.gqa_prefill else []) + (gqa_core(args) if args.gqa_core else [])
        if args.json:
            with open(args.json, "w") as f:
                json.dump(rows, f, indent=2)
        return
    rows = []
    print(f"torch {torch.__version__}, {args.threads} threads")
    if args.shapes:
        print("| shape | causal | torch ms | mha ms | speed-up | mha GFLOP/s | mha % sgemm | sgemm GFLOP/s | mha first/cached |")
        print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
    for s in filter(None, args.shapes.split(",")):
        b, n, e, h, causal = parse_shape(s)
        t_ms = torch_ms(b, n, e, h, causal, args.repetitions)
        row, sgemm = mha_row(args.mha, b, n, e, h, causal, args.repetitions, args.threads)
        m_ms = row["timing"]["median_ms"]
        first = row["timing"]["first_ms"] / m_ms
        print(f"| {b}x{n}x{e}/{h} | {'yes' if causal else 'no'} | {t_ms:.1f} | {m_ms:.1f} | {t_ms / m_ms:.2f}x | "
              f"{row['timing']['gflops_cached']:.1f} | {row['sgemm_percent']:.1f} | {sgemm:.1f} | {first:.2f} |")
        sys.stdout.flush()
        rows.append({"shape": s, "torch_ms": t_ms, "mha": row, "sgemm_gflops": sgemm, "speedup": t_ms / m_ms})
    if args.decode:
        rows += decode_rows(args)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=2)


if __name__ == "__main__":
    main()
