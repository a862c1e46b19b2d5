#!/usr/bin/python3
r"""Accuracy study of tt-sim's SDPA kernels at Llama-3-8B attention shapes, against float64.

What a TT engineer would run before touching a device: for one Llama-3-8B attention layer
(32 query heads, 8 KV heads, head_dim 128, batch 1) it runs
  - SDPA prefill (`mha op sdpa`, causal) at 1K-4K tokens, and
  - one SDPA decode step (`mha op sdpa-decode`, Flash-Decode) at cache depths 1K-128K
through tt-sim in this process (the Python package's mha.op, the library `mha op` runs; the package
built beside --mha), one configuration at a time (k_chunk_size, exp_approx_mode, math fidelity,
fp32_dest_acc_en, Q/K/V or cache dtype), and compares each output with softmax attention computed
in float64 by torch on the same float32 inputs (so input quantisation counts as error, as in
tt-metal's tests). Per run it reports PCC (tt-metal's comp_pcc over the whole output), relative
L2 error, max abs error, and the fraction of output rows (one per query head and token, 128 wide)
whose argmax agrees with the reference's.

Inputs (--inputs): `randn`, Q/K/V ~ N(0, 1) as tt-metal's SDPA decode tests generate them (nearly
what i.i.d. activations through Gaussian projections and RoPE give: covariance W^T W ~ I); `fa_rand`,
tt-metal's SDPA prefill test generator (N(0, 1) plus, with probability 0.001, N(0, 10) spikes).

  nice /usr/bin/python3 scripts/ttsim_accuracy.py --mha build/mha --tt-metal 2024 --quick --out /tmp/acc
  nice /usr/bin/python3 scripts/ttsim_accuracy.py --mha build/mha --tt-metal 2024 --full --out acc \
      --plot docs/img/ttsim_accuracy.png
  ... --only positions          # decode at the cur_pos values tt-metal's issues saw break
  ... --full --only long-prefill --prefill-to 16384    # prefill at 8K and 16K on one KV group (4 q heads)
  /usr/bin/python3 scripts/ttsim_accuracy.py --table OUT/ttsim_accuracy.csv   # as markdown

--tt-metal names the kernel revision every run emulates (the backend option tt_metal, passed to every op,
default: tt-sim's own, latest, as the op reports it). --prefill-to S adds prefill lengths from twice the grid's
longest (--full: 8K; the default grid: 4K; --quick: 512) up to S, doubling,
each on --long-heads query heads of the first KV head (default 4: one Llama-3-8B GQA group; a 16K
causal prefill costs about a minute per head on 2 cores) at q / k chunks 256 / 256, with TT-NN's
defaults and with HiFi4 and an FP32 Dst (at latest: the streaming and the standard kernel).

Writes OUT/ttsim_accuracy.csv and .json (one row per run) and a PNG (1 - PCC against length).
--quick runs tiny shapes (8 q heads, 2 KV heads) in well under a minute, for the test suite.
"""
import argparse
import csv
import ctypes
import json
import math
import os
import sys
import time

import torch

from mha_package import Ops, PccAgainst

# seq: the prefill length, or a decode step's cur_pos + 1 (the keys it attends).
COLUMNS = ["op", "seq", "q_heads", "q_chunk", "k_chunk", "exp_approx_mode", "math_fidelity", "fp32_dest_acc_en",
           "dtype", "inputs", "pcc", "rel_l2", "max_abs", "argmax_agree", "tt_metal", "seconds"]


class Reference:
    """A float64 reference [..., rows, dh] and what every run's metrics take from it alone (comp_pcc's
    golden side, its norm, its row argmax), computed once for the runs that share it: the same
    expressions as a per-run computation, so the same bits."""

    def __init__(self, ref):
        self.ref = ref.double()
        self.pcc = PccAgainst(self.ref)
        self.norm = self.ref.norm()
        self.argmax = self.ref.argmax(-1)


def metrics(ref, got):
    """ref: a Reference; got [..., rows, dh]. PCC, ||got - ref|| / ||ref||, max |got - ref|, argmax agreement."""
    got = got.double()
    diff = got - ref.ref
    agree = (ref.argmax == got.argmax(-1)).double().mean()
    return {"pcc": ref.pcc(got), "rel_l2": float(diff.norm() / ref.norm),
            "max_abs": float(diff.abs().max()), "argmax_agree": float(agree)}


def reuse_freed_memory():
    """Serve every allocation from the heap and keep it when freed (glibc's mallopt). By default each
    large float64 temporary (the reference's blocks, every run's metrics) is an mmap of its own, returned
    to the kernel when freed and faulted in and zeroed again by the next: about a third of the CPU time
    the script spends outside the ops (--full). Changes no value; elsewhere than glibc it does nothing."""
    try:
        libc = ctypes.CDLL("libc.so.6")
    except OSError:
        return
    m_trim_threshold, m_mmap_max = -1, -4
    libc.mallopt(m_mmap_max, 0)
    libc.mallopt(m_trim_threshold, 2 ** 31 - 1)


def blas_one_thread():
    """Run the float64 reference's matrix products (torch's OpenBLAS) on this thread alone. OpenBLAS's
    worker thread spins (sched_yield) between and after them: about 3 % of the study's CPU time (--full)
    for no work. The same products, the same bits (each output element's sum stays on one thread); where
    torch's BLAS is not OpenBLAS it does nothing."""
    try:
        ctypes.CDLL("libopenblas.so.0").openblas_set_num_threads(1)
    except (OSError, AttributeError):
        return


def gen(kind, shape, gen_):
    if kind == "randn":
        return torch.randn(*shape, generator=gen_)
    # tt-metal's fa_rand (test_scaled_dot_product_attention.py)
    normal_1 = torch.randn(*shape, generator=gen_)
    normal_2 = torch.randn(*shape, generator=gen_) * 10
    spikes = torch.bernoulli(torch.full(shape, 0.001), generator=gen_)
    return normal_1 + normal_2 * spikes


def ref_prefill(Q, K, V, block=512):
    """Causal softmax attention in float64, one q head at a time. Q [1, nqh, s, dh], K/V [1, nkv, s, dh].
    Rows in blocks of `block` queries against the keys up to the block's last (the keys past it are
    masked out, exp(-inf) = 0: the causal half of the work)."""
    nqh, s, dh = Q.shape[1], Q.shape[2], Q.shape[3]
    g = nqh // K.shape[1]
    mask = torch.triu(torch.full((block, block), float("-inf"), dtype=torch.float64), diagonal=1)
    out = torch.empty(nqh, s, dh, dtype=torch.float64)
    Kd, Vd = K[0].double(), V[0].double()
    for h in range(nqh):
        q = Q[0, h].double()
        for i0 in range(0, s, block):
            i1 = min(s, i0 + block)
            sc = q[i0:i1] @ Kd[h // g, :i1].T
            sc /= math.sqrt(dh)
            sc[:, i0:] += mask[:i1 - i0, :i1 - i0]  # keys before the block: + 0, the same to softmax
            out[h, i0:i1] = torch.softmax(sc, -1) @ Vd[h // g, :i1]
    return out


def ref_decode(Q, K, V, pos):
    """One token per head over cache positions 0..pos in float64. Q [1, 1, nqh, dh], K/V [1, nkv, S, dh]."""
    nqh, dh = Q.shape[2], Q.shape[3]
    g = nqh // K.shape[1]
    out = torch.empty(nqh, dh, dtype=torch.float64)
    for kv in range(K.shape[1]):
        q = Q[0, 0, kv * g:(kv + 1) * g].double()
        sc = (q @ K[0, kv, :pos + 1].double().T) / math.sqrt(dh)
        out[kv * g:(kv + 1) * g] = torch.softmax(sc, -1) @ V[0, kv, :pos + 1].double()
    return out


def compute(c):
    """A case's compute and program settings, and its tt_metal profile, as mha.op options."""
    return {"math_fidelity": c["math_fidelity"], "exp_approx_mode": c["exp_approx_mode"],
            "fp32_dest_acc_en": c["fp32_dest_acc_en"], "k_chunk_size": c["k_chunk"], "tt_metal": c["tt_metal"]}


def run_prefill(ops, shape, seq, cases, inputs, seed):
    nqh, nkv, dh = shape
    g = torch.Generator().manual_seed(seed)
    Q, K, V = gen(inputs, (1, nqh, seq, dh), g), gen(inputs, (1, nkv, seq, dh), g), gen(inputs, (1, nkv, seq, dh), g)
    ref = Reference(ref_prefill(Q, K, V))
    rows = []
    for c in cases:
        got, sec = ops.timed("sdpa", Q, K, V, dtype=c["dtype"], q_chunk_size=c["q_chunk"], **compute(c))
        rows.append(dict(c, op="sdpa", seq=seq, q_heads=nqh, inputs=inputs, seconds=round(sec, 2),
                         **metrics(ref, got[0])))
        print_row(rows[-1])
    return rows


def run_decode(ops, shape, depth, cases, inputs, seed, positions=None):
    """One decode step over a cache of `depth` positions at cur_pos = depth - 1, or, with
    `positions`, at each of those cur_pos values over the same cache (row's seq = cur_pos + 1)."""
    nqh, nkv, dh = shape
    g = torch.Generator().manual_seed(seed)
    Q, K, V = gen(inputs, (1, 1, nqh, dh), g), gen(inputs, (1, nkv, depth, dh), g), gen(inputs, (1, nkv, depth, dh), g)
    rows = []
    for pos in positions or [depth - 1]:
        ref = Reference(ref_decode(Q, K, V, pos))
        for c in cases:
            got, sec = ops.timed("sdpa-decode", Q, K, V, cur_pos=[pos], dtypes=[None, c["dtype"], c["dtype"]],
                                 **compute(c))
            rows.append(dict(c, op="sdpa-decode", seq=pos + 1, q_heads=nqh, q_chunk="", inputs=inputs,
                             seconds=round(sec, 2), **metrics(ref, got[0, 0])))
            print_row(rows[-1])
    return rows


def case(k_chunk, q_chunk="", approx=True, fid="HiFi2", fp32=False, dtype="bfloat16"):
    return {"q_chunk": q_chunk, "k_chunk": k_chunk, "exp_approx_mode": approx, "math_fidelity": fid,
            "fp32_dest_acc_en": fp32, "dtype": dtype}


def long_prefill(shape, longest, upto, heads):
    """({seq: cases}, shape) for the lengths from twice the grid's `longest` prefill up to `upto`, doubling:
    `heads` q heads on the first KV head (the Llama-3-8B shape's first GQA group when heads = 4), at TT-NN's
    defaults and at HiFi4 with an FP32 Dst."""
    seqs, s = [], 2 * longest
    while s <= upto:
        seqs.append(s)
        s *= 2
    cases = [case(256, 256), case(256, 256, fid="HiFi4", fp32=True)]
    return {s: cases for s in seqs}, (heads, 1, shape[2])


# Positions where tt-metal's issues saw decode break: cur_pos 31 -> 32 with 32-key chunks and an fp32
# Dst (the second core's first merge, #56171), and 4096 + 255 -> 4096 + 256 (#22096, paged with
# dynamic chunks on device). Over one cache of 8192 positions, the defaults and those configs.
POSITIONS = (8192, [31, 32, 33, 4095 + 256, 4096 + 256, 8191],
             [case(32, fp32=True), case(32, fid="HiFi4", fp32=True, approx=False), case(512)])


def grids(level):
    """(shape, prefill {seq: cases}, decode {depth: cases}). One axis varied at a time around
    TT-NN's defaults (HiFi2, exp approx on, 16-bit Dst, bfloat16), to keep the cost linear."""
    if level == "quick":
        shape = (8, 2, 128)
        pre = {256: [case(32, 32), case(32, 32, approx=False), case(128, 128)]}
        dec = {1024: [case(32), case(32, approx=False), case(256), case(256, dtype="bfloat8_b")]}
        return shape, pre, dec
    shape = (32, 8, 128)
    core = [case(32, 32), case(32, 32, approx=False), case(256, 256)]
    extra = [case(256, 256, approx=False), case(256, 256, fid="HiFi4", fp32=True), case(256, 256, dtype="bfloat8_b")]
    pre = {1024: core + extra, 2048: core + extra, 4096: core}
    dcore = [case(128), case(512), case(128, approx=False), case(512, approx=False)]
    dextra = [case(512, fid="HiFi4", fp32=True), case(512, dtype="bfloat8_b"), case(512, dtype="bfloat4_b")]
    dec = {d: dcore + dextra for d in (1024, 4096, 16384, 32768, 131072)}
    if level == "full":
        return shape, pre, dec
    # default: the full grid minus 4K prefill and 128K decode (the two expensive points)
    pre.pop(4096)
    dec.pop(131072)
    return shape, pre, dec


def print_row(r):
    print(f"{r['tt_metal']:<6} {r['op']:<11} seq={r['seq']:<6} heads={r['q_heads']:<2} "
          f"q/k={r['q_chunk']}/{r['k_chunk']:<3} approx={int(r['exp_approx_mode'])} "
          f"{r['math_fidelity']} fp32={int(r['fp32_dest_acc_en'])} {r['dtype']:<9} pcc={r['pcc']:.6f} "
          f"rel_l2={r['rel_l2']:.5f} max_abs={r['max_abs']:.4f} argmax={r['argmax_agree']:.4f} {r['seconds']:.1f}s",
          flush=True)


def label(r):
    s = f"k{r['k_chunk']}" if r["op"] == "sdpa-decode" else f"q/k {r['q_chunk']}/{r['k_chunk']}"
    s += " approx" if r["exp_approx_mode"] else " exact-exp"
    if r["math_fidelity"] != "HiFi2" or r["fp32_dest_acc_en"]:
        s += f" {r['math_fidelity']}{' fp32' if r['fp32_dest_acc_en'] else ''}"
    if r["dtype"] != "bfloat16":
        s += f" {r['dtype']}"
    return s


def plot(rows, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, 2, figsize=(13, 5))
    for ax, op, title in ((axes[0], "sdpa", "SDPA prefill (causal)"), (axes[1], "sdpa-decode", "SDPA decode, one step")):
        series = {}
        for r in rows:
            if r["op"] == op:
                series.setdefault(label(r), []).append((r["seq"], max(1 - r["pcc"], 1e-7)))
        for name, pts in series.items():
            pts.sort()
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=name)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("sequence length" if op == "sdpa" else "cache depth (cur_pos + 1)")
        ax.set_ylabel("1 - PCC vs float64")
        ax.set_title(title)
        ax.grid(True, which="both", alpha=0.3)
        if series:
            ax.legend(fontsize=7)
    fig.suptitle("tt-sim accuracy, Llama-3-8B attention (32 q heads, 8 kv heads, dh 128); HiFi2 / 16-bit Dst / "
                 "bfloat16 unless named", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def markdown(rows):
    """The rows as a markdown table (docs/TTSIM.md keeps one)."""
    out = ["| tt_metal | op | length | q heads | chunks q / k | exp approx | fidelity, Dst | dtype | PCC | rel L2 | "
           "max abs | argmax agree |", "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        chunks = f"{r['q_chunk']} / {r['k_chunk']}" if r["op"] == "sdpa" else f"k {r['k_chunk']}"
        dst = "fp32" if str(r["fp32_dest_acc_en"]) == "True" else "16-bit"
        approx = "on" if str(r["exp_approx_mode"]) == "True" else "off"
        out.append(f"| {r.get('tt_metal', '2024')} | {r['op']} | {r['seq']} | {r.get('q_heads', 32)} | {chunks} | {approx} | "
                   f"{r['math_fidelity']}, {dst} | {r['dtype']} | {float(r['pcc']):.6f} | {float(r['rel_l2']):.4f} | "
                   f"{float(r['max_abs']):.4f} | {float(r['argmax_agree']):.3f} |")
    return "\n".join(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mha", default="build/mha", help="the build's mha binary; its package BUILD/python/mha runs the ops")
    ap.add_argument("--table", metavar="CSV", help="print an existing CSV as a markdown table and exit")
    ap.add_argument("--out", help="folder for ttsim_accuracy.csv/.json (and the plot by default)")
    ap.add_argument("--plot", help="PNG path (default OUT/ttsim_accuracy.png)")
    level = ap.add_mutually_exclusive_group()
    level.add_argument("--quick", action="store_true", help="tiny shapes, seconds (the ctest)")
    level.add_argument("--full", action="store_true", help="adds 4K prefill and 128K decode (~25 min on 2 cores)")
    ap.add_argument("--only", choices=["prefill", "decode", "positions", "long-prefill"],
                    help="one part of the grid (positions: the cur_pos sweep, not in the default grid; "
                         "long-prefill: the --prefill-to lengths alone)")
    ap.add_argument("--tt-metal", choices=["2024", "latest"],
                    help="the tt_metal profile (kernel revision) of every run, passed to every op (default: "
                         "tt-sim's, latest; docs/TTSIM-STUDY.md's earlier figures name 2024)")
    ap.add_argument("--prefill-to", type=int, default=0, metavar="S",
                    help="add prefill lengths from twice the grid's longest up to S (doubling)")
    ap.add_argument("--long-heads", type=int, default=4, help="query heads of the --prefill-to lengths (on 1 KV head)")
    ap.add_argument("--inputs", choices=["randn", "fa_rand"], default="randn")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--seed", type=int, default=1234)
    a = ap.parse_args()
    if a.table:
        with open(a.table) as f:
            print(markdown(list(csv.DictReader(f))))
        return 0
    if not a.out:
        ap.error("--out is required")
    lvl = "quick" if a.quick else "full" if a.full else "default"
    shape, pre, dec = grids(lvl)
    os.makedirs(a.out, exist_ok=True)
    rows = []
    t0 = time.time()
    ops = Ops(a.mha, a.threads)
    a.tt_metal = a.tt_metal or ops.profile()  # every row names the profile that ran
    os.nice(10)  # a background study: the machine's other work first
    reuse_freed_memory()
    blas_one_thread()
    if a.only in (None, "prefill"):
        for seq, cases in pre.items():
            rows += run_prefill(ops, shape, seq, [dict(c, tt_metal=a.tt_metal) for c in cases], a.inputs, a.seed)
    if a.only in (None, "prefill", "long-prefill"):
        long_pre, long_shape = long_prefill(shape, max(pre), a.prefill_to, a.long_heads)
        for seq, cases in long_pre.items():
            rows += run_prefill(ops, long_shape, seq, [dict(c, tt_metal=a.tt_metal) for c in cases], a.inputs, a.seed)
    if a.only in (None, "decode"):
        for depth, cases in dec.items():
            rows += run_decode(ops, shape, depth, [dict(c, tt_metal=a.tt_metal) for c in cases], a.inputs, a.seed)
    if a.only == "positions":
        rows += run_decode(ops, shape, POSITIONS[0], [dict(c, tt_metal=a.tt_metal) for c in POSITIONS[2]], a.inputs,
                           a.seed, POSITIONS[1])
    rows = [{k: r[k] for k in COLUMNS} for r in rows]
    with open(os.path.join(a.out, "ttsim_accuracy.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=COLUMNS)
        w.writeheader()
        w.writerows(rows)
    meta = {"level": lvl, "shape": {"nqh": shape[0], "nkv": shape[1], "dh": shape[2], "batch": 1},
            "inputs": a.inputs, "seed": a.seed, "threads": a.threads, "tt_metal": a.tt_metal,
            "prefill_to": a.prefill_to, "long_heads": a.long_heads, "seconds": round(time.time() - t0, 1)}
    with open(os.path.join(a.out, "ttsim_accuracy.json"), "w") as f:
        json.dump({"meta": meta, "rows": rows}, f, indent=1)
    plot(rows, a.plot or os.path.join(a.out, "ttsim_accuracy.png"))
    print(f"{len(rows)} runs in {meta['seconds']} s; wrote {a.out}/ttsim_accuracy.csv, .json", flush=True)


if __name__ == "__main__":
    sys.exit(main())
