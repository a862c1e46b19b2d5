#!/usr/bin/python3
"""tt-metal's SDPA prefill tests of tt_metal latest's period, run on tt-sim against torch.

The parameterisations and the bounds of the stored versions of
  tests/ttnn/nightly/unit_tests/operations/sdpa/test_sdpa_prefill.py   (019b681e59da69f58e48b316ceb830c0ab42e31a)
  tests/ttnn/unit_tests/operations/sdpa/test_sdpa_prefill.py           (0287c21566a95b4fa6d92b43c32cbc0bd1145835)
(the post-commit file keeps a reduced copy of the nightly one's tests and adds test_sdpa_noncausal_randn_bias)
through tt-sim's SDPA (mha.op("sdpa"), the library `mha op sdpa` runs, in this process) at the tt_metal
profile --tt-metal names (passed to every op; default latest), against softmax attention in float64 on the same float32 inputs
(tt-metal: torch's float32 SDPA). The tests' own draws: fa_rand Q, K, V then the mask under
torch.manual_seed(1234); their program configs (exp_approx_mode on) and compute configs.

What each test asserts, as that revision does: run_test_sdpa_tt asserts RMSE < its threshold when the
test gives one and PCC >= 0.994 otherwise (not both); run_sdpa_noncausal asserts PCC >= 0.994 and, when
given, RMSE < its threshold; test_sdpa_noncausal_randn_bias PCC >= 0.99. A case tt-sim does not model at
the profile (it refuses it in one line) is reported "refused" with that line and does not fail the run.

  /usr/bin/python3 scripts/ttmetal_sdpa_prefill_tests.py --mha build/mha --tt-metal latest     # subset
  ... --full          # every parameterisation (hours on 2 cores: 8K and 4K sequences, 71 heads)
  ... --quick         # a few small cases (the ctest)

test_sdpa_tt_large_seq (128K tokens) is scripts/ttmetal_sdpa_large_seq.py. Prints one markdown row per
case and exits 1 if any case fails its bound.
"""
import argparse
import math
import sys
import time

import torch

from mha_package import Ops, comp_pcc, fa_rand
from ttmetal_decode_tests import FAILED, report

REFUSED = []


def reference(Q, K, V, causal, mask=None, scale=None):
    """softmax(Q K^T * scale + mask) V in float64, GQA by repetition; Q [b, nh, sq, d], K/V [b, nkv, sk, d]."""
    nh, nkv = Q.shape[1], K.shape[1]
    k = K.double().repeat_interleave(nh // nkv, dim=1)
    v = V.double().repeat_interleave(nh // nkv, dim=1)
    out = torch.empty(Q.shape[0], nh, Q.shape[2], V.shape[3], dtype=torch.float64)
    scale = scale if scale is not None else 1 / math.sqrt(Q.shape[3])
    for h in range(nh):  # a head at a time: a 4K x 4K float64 score block per batch
        sc = Q[:, h:h + 1].double() @ k[:, h:h + 1].transpose(-1, -2) * scale
        if causal:
            sq, sk = sc.shape[-2], sc.shape[-1]
            sc = sc.masked_fill(torch.ones(sq, sk, dtype=torch.bool).triu(1), float("-inf"))
        if mask is not None:
            sc = sc + mask[:, (h if mask.shape[1] > 1 else 0):][:, :1].double()
        out[:, h:h + 1] = torch.softmax(sc, -1) @ v[:, h:h + 1]
    return out


def measure(ref, got):
    return comp_pcc(ref, got), float(((ref - got.double()) ** 2).mean().sqrt())


def run_case(op, test, case, Q, K, V, causal, rmse_bound, pcc_asserted, mask=None, mask_dtype=None, **options):
    """One case: tt-sim's output against float64, judged as the test judges it."""
    t0 = time.time()
    dtype = options.pop("dtype")
    tensors = (Q, K, V) if mask is None else (Q, K, V, mask)
    dtypes = [dtype] * 3 + ([mask_dtype] if mask is not None else [])
    try:
        got = op("sdpa", *tensors, dtypes=dtypes, is_causal=causal, **options)
    except Exception as e:  # tt-sim's one-line refusal (InputError, exit code 2 in the CLI)
        line = str(e).strip().splitlines()[-1]
        print(f"| {test} | {case} | - | refused: {line} | refused | {time.time() - t0:.1f} |", flush=True)
        REFUSED.append((test, case, line))
        return
    ref = reference(Q, K, V, causal, mask, options.get("scale"))
    pcc, rmse = measure(ref, got[:, :, :Q.shape[2]])
    want, ok = [], True
    if pcc_asserted:
        want.append(f"PCC >= {pcc_asserted}")
        ok = ok and pcc >= pcc_asserted
    if rmse_bound is not None:
        want.append(f"RMSE < {rmse_bound}")
        ok = ok and rmse < rmse_bound
    report(test, case, ", ".join(want), f"PCC {pcc:.6f}, RMSE {rmse:.5f}", ok, time.time() - t0)


def hifi2(approx):
    """The tests' HiFi2 compute config (fp32_dest_acc_en and packer_l1_acc off)."""
    return {"math_fidelity": "HiFi2", "math_approx_mode": approx, "fp32_dest_acc_en": False, "exp_approx_mode": True}


def sdpa_tt(op, b, nh, nkv, s, d, qc, kc, dtype, rmse_bound, test="test_sdpa_tt", causal=True):
    """run_test_sdpa_tt (causal; PCC asserted only without an RMSE bound) and, with causal=False,
    run_sdpa_noncausal without a mask (test_sdpa_tt_padded's non-causal half: PCC and RMSE)."""
    torch.manual_seed(1234)
    Q, K, V = fa_rand(b, nh, s, d), fa_rand(b, nkv, s, d), fa_rand(b, nkv, s, d)
    pcc = 0.994 if (rmse_bound is None or not causal) else None
    case = f"b={b} nh={nh} nkv={nkv} s={s} d={d} q/k {qc}/{kc} {dtype}{'' if causal else ' non-causal'}"
    run_case(op, test, case, Q, K, V, causal, rmse_bound, pcc, dtype=dtype, q_chunk_size=qc, k_chunk_size=kc,
             **hifi2(causal))


def sdpa_noncausal(op, b, nh, nkv, sq, d, qc, kc, dtype, rmse_bound, test, sk=None, bcast_batch=False,
                   bcast_head=True, mask_dtype="bfloat4_b"):
    """run_sdpa_noncausal with its mask: bernoulli(0.25) * -1e9 drawn after Q, K, V. A batch-broadcast
    mask is expanded on the host (the factory's broadcast changes which tile the reader reads, not a value)."""
    sk = sk or sq
    torch.manual_seed(1234)
    Q, K, V = fa_rand(b, nh, sq, d), fa_rand(b, nkv, sk, d), fa_rand(b, nkv, sk, d)
    mask = torch.bernoulli(torch.full((1 if bcast_batch else b, 1 if bcast_head else nh, sq, sk), 0.25)) * -1e9
    mask = mask.expand(b, -1, -1, -1).contiguous()
    case = (f"b={b} nh={nh} nkv={nkv} sq={sq} sk={sk} d={d} q/k {qc}/{kc} {dtype} mask {mask_dtype}"
            f"{' bcast-batch' if bcast_batch else ''}{' bcast-head' if bcast_head else ''}")
    run_case(op, test, case, Q, K, V, False, rmse_bound, 0.994, mask=mask, mask_dtype=mask_dtype, dtype=dtype,
             q_chunk_size=qc, k_chunk_size=kc, **hifi2(False))


def divisible(s, qc, kc, sk=None):
    return s % qc == 0 and (sk or s) % kc == 0


def test_sdpa_tt(op, level):
    shapes = [(1, 8, 1, 2048, 128), (1, 16, 1, 2048, 64), (1, 71, 1, 2048, 64), (8, 8, 1, 2048, 128),
              (1, 8, 1, 8192, 128)]
    for b, nh, nkv, s, d in shapes[:2] if level != "full" else shapes:
        for dtype in ("bfloat4_b", "bfloat8_b", "bfloat16"):
            for qc in (128, 192, 256):
                for kc in (128, 256):
                    if dtype == "bfloat4_b" and (qc > 128 or kc > 128 or (b, nh, nkv, s, d) != shapes[0]):
                        continue  # the test: one bfp4 sanity case
                    if not divisible(s, qc, kc) or (nh == 8 and qc == 128 and kc == 128):
                        continue  # the test's skips (OOM when profiling)
                    if level == "quick" and (nh, qc, kc, dtype) != (16, 256, 256, "bfloat16"):
                        continue
                    sdpa_tt(op, b, nh, nkv, s, d, qc, kc, dtype, 0.0092 if dtype != "bfloat16" else 0.0093)


def test_sdpa_tt_small_chunks(op, level):
    for dtype in ("bfloat8_b", "bfloat16"):
        sdpa_tt(op, 1, 16, 1, 32, 64, 32, 32, dtype, None, test="test_sdpa_tt_small_chunks")


def test_sdpa_tt_padded(op, level):
    """test_sdpa_tt_padded: bf16, RMSE < 0.033 (causal: run_test_sdpa_tt; non-causal: no mask, PCC too).
    The subset: b = 2, nh = 8 (what the test runs in CI) at s = 160 and 2011 and q chunks 32, 96, 128."""
    for s in (1, 160, 2011):
        for qc in (32, 96, 128, 192, 512):
            for kc in (128, 512):
                for causal in (True, False):
                    for b in (1, 2):
                        for nh in (1, 8):
                            if qc == 512 and kc == 512:
                                continue
                            if level != "full" and (b == 1 or nh == 1 or s == 1 or qc in (192, 512) or kc == 512):
                                continue  # the test's CI skips, and q 192
                            if level == "quick" and (s, qc, causal) not in ((160, 96, True), (160, 32, False)):
                                continue
                            sdpa_tt(op, b, nh, 1, s, 128, qc, kc, "bfloat16", 0.033, "test_sdpa_tt_padded", causal)


def test_sdpa_noncausal(op, level):
    shapes = [(1, 8, 1, 2048, 128), (1, 16, 2, 128, 128), (1, 16, 16, 4096, 96), (1, 71, 1, 2048, 64),
              (8, 8, 1, 2048, 128)]
    for b, nh, nkv, s, d in shapes if level == "full" else shapes[:2]:
        for dtype in ("bfloat8_b", "bfloat16"):
            for qc in (32, 128, 256):
                for kc in (128, 256):
                    if not divisible(s, qc, kc) or (s > 2048 and 128 in (qc, kc)):
                        continue
                    if level == "subset" and s == 2048 and (qc, kc) != (256, 256):
                        continue
                    if level == "quick" and (s, qc, dtype) != (128, 32, "bfloat16"):
                        continue
                    sdpa_noncausal(op, b, nh, nkv, s, d, qc, kc, dtype, 0.0069, "test_sdpa_noncausal")


def test_sdpa_noncausal_unequal_seqlen(op, level):
    if level != "full":
        return
    for b, nh, nkv, sq, sk, d in ((1, 8, 1, 4096, 2048, 128), (1, 4, 1, 2048, 6528, 128)):
        for dtype in ("bfloat8_b", "bfloat16"):
            for qc in (128, 256):
                for kc in (128, 256):
                    if divisible(sq, qc, kc, sk):
                        sdpa_noncausal(op, b, nh, nkv, sq, d, qc, kc, dtype, None,
                                       "test_sdpa_noncausal_unequal_seqlen", sk=sk)


def test_sdpa_noncausal_mask(op, level, streaming):
    """test_sdpa_noncausal_mask (bfp4 masks) and _streaming (bf16 / bfp8 / bfp4 masks): RMSE < 0.007."""
    shapes = [(1, 16, 16, 128, 64), (2, 8, 1, 160, 64)] + ([] if streaming else [(128, 4, 4, 128, 32)])
    test = "test_sdpa_noncausal_mask" + ("_streaming" if streaming else "")
    for mask_dtype in ("bfloat16", "bfloat8_b", "bfloat4_b") if streaming else ("bfloat4_b",):
        for b, nh, nkv, s, d in shapes:
            for qc in (32, 128):
                for kc in (64, 128):
                    for bb in (True, False):
                        for bh in (True, False):
                            if level == "subset" and b == 128:
                                continue  # Boltz's 128 batches: --full
                            if level == "quick" and (streaming or (b, qc, kc, bb, bh) != (2, 32, 64, False, True)):
                                continue
                            sdpa_noncausal(op, b, nh, nkv, s, d, qc, kc, "bfloat16", 0.007, test, bcast_batch=bb,
                                           bcast_head=bh, mask_dtype=mask_dtype)


def test_sdpa_noncausal_randn_bias(op, level):
    """The post-commit file's test: randn Q, K, V and a randn bias as the mask, drawn in bfloat16 as the test
    draws them (torch.randn(..., dtype=torch.bfloat16): not the float32 draws rounded), TT-NN's default program
    and compute configs, scale 1/sqrt(d); PCC >= 0.99. s = 197 ends in a partial key tile: at tt_metal latest
    its 27 padded keys join the softmax (the mask's tile padding is 0; tt-metal #54833), as on the device."""
    b, nh, s, d = 1, 12, 197, 64
    torch.manual_seed(1234)
    Q, K, V = (torch.randn(b, nh, s, d, dtype=torch.bfloat16).float() for _ in range(3))
    bias = torch.randn(b, nh, s, s, dtype=torch.bfloat16).float()
    run_case(op, "test_sdpa_noncausal_randn_bias", f"b={b} nh={nh} s={s} d={d} bf16, bias bf16 (defaults)",
             Q, K, V, False, None, 0.99, mask=bias, mask_dtype="bfloat16", dtype="bfloat16", scale=1 / math.sqrt(d))


def test_sliding_window_and_sink(op, level):
    """The post-commit file's test_sdpa_sliding_window (RMSE < 0.01) and test_sdpa_with_attention_sink
    (RMSE < 0.02; sinks torch.rand(1, nh) * 4 after Q, K, V under the reset_seeds fixture's 213919)."""
    b, nh, nkv, s, d, w = 1, 8, 1, 2048, 128, 128
    torch.manual_seed(1234)
    Q, K, V = fa_rand(b, nh, s, d), fa_rand(b, nkv, s, d), fa_rand(b, nkv, s, d)
    win = torch.zeros(s, s)
    i = torch.arange(s)
    win[(i[None, :] > i[:, None]) | (i[None, :] <= i[:, None] - w)] = float("-inf")
    t0 = time.time()
    try:
        got = op("sdpa", Q, K, V, dtype="bfloat8_b", q_chunk_size=256, k_chunk_size=256, sliding_window_size=w,
                 **hifi2(True))
        pcc, rmse = measure(reference(Q, K, V, False, win[None, None]), got)
        report("test_sdpa_sliding_window", f"b={b} nh={nh} s={s} W={w} q/k 256/256 bfloat8_b", "RMSE < 0.01",
               f"PCC {pcc:.6f}, RMSE {rmse:.5f}", rmse < 0.01, time.time() - t0)
    except Exception as e:
        line = str(e).strip().splitlines()[-1]
        print(f"| test_sdpa_sliding_window | W={w} | - | refused: {line} | refused | {time.time() - t0:.1f} |")
        REFUSED.append(("test_sdpa_sliding_window", f"W={w}", line))
    b, nh, nkv, s, d = 1, 8, 1, 256, 32
    torch.manual_seed(213919)
    Q, K, V = fa_rand(b, nh, s, d), fa_rand(b, nkv, s, d), fa_rand(b, nkv, s, d)
    sinks = torch.rand(1, nh) * 4.0
    t0 = time.time()
    try:
        got = op("sdpa", Q, K, V, dtype="bfloat16", q_chunk_size=32, k_chunk_size=128,
                 attention_sink=[float(x) for x in sinks.bfloat16().float()[0]], **hifi2(True))
        sc = Q.double() @ K.double().transpose(-1, -2) / math.sqrt(d)
        sc = sc.masked_fill(torch.ones(s, s, dtype=torch.bool).triu(1), float("-inf"))
        sink_col = (sinks.double() / math.sqrt(d)).reshape(1, nh, 1, 1).expand(b, nh, s, 1)
        ref = torch.softmax(torch.cat([sc, sink_col], -1), -1)[..., :-1] @ V.double()
        pcc, rmse = measure(ref, got)
        report("test_sdpa_with_attention_sink", f"b={b} nh={nh} s={s} d={d} q/k 32/128", "RMSE < 0.02",
               f"PCC {pcc:.6f}, RMSE {rmse:.5f}", rmse < 0.02, time.time() - t0)
    except Exception as e:
        line = str(e).strip().splitlines()[-1]
        print(f"| test_sdpa_with_attention_sink | b={b} nh={nh} s={s} | - | refused: {line} | refused | "
              f"{time.time() - t0:.1f} |")
        REFUSED.append(("test_sdpa_with_attention_sink", "", line))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mha", default="build/mha", help="the build's mha binary; its package BUILD/python/mha runs the op")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--tt-metal", default="latest", choices=["2024", "latest"],
                    help="the tt_metal profile of every run, passed to every op (default latest, these tests' period)")
    g = ap.add_mutually_exclusive_group()
    g.add_argument("--quick", action="store_true", help="a few small cases (what ctest runs)")
    g.add_argument("--full", action="store_true", help="every parameterisation")
    a = ap.parse_args()
    level = "quick" if a.quick else "full" if a.full else "subset"
    print("| test | case | tt-metal asserts | measured | result | s |\n|---|---|---|---|---|---|", flush=True)
    ops = Ops(a.mha, a.threads)
    op = lambda name, *t, **o: ops(name, *t, tt_metal=a.tt_metal, **o)  # noqa: E731
    test_sdpa_tt_small_chunks(op, level)
    test_sdpa_noncausal_mask(op, level, streaming=False)
    test_sdpa_tt_padded(op, level)
    if level != "quick":
        test_sdpa_noncausal_mask(op, level, streaming=True)
        test_sdpa_noncausal_randn_bias(op, level)
        test_sliding_window_and_sink(op, level)
    test_sdpa_noncausal(op, level)
    test_sdpa_tt(op, level)
    test_sdpa_noncausal_unequal_seqlen(op, level)
    print(f"\n{len(REFUSED)} case(s) refused (not modelled at tt_metal {a.tt_metal}), {len(FAILED)} failed",
          file=sys.stderr)
    return 1 if FAILED else 0


if __name__ == "__main__":
    sys.exit(main())
