#!/usr/bin/python3
"""tt-metal's unit tests for the decode-time ops, run on tt-sim against torch.

Runs the parameterisations of tt-metal's
  tests/tt_eager/python_api_testing/unit_testing/misc/test_scaled_dot_product_attention_decode.py
  tests/tt_eager/python_api_testing/unit_testing/misc/test_rotary_embedding_llama.py
  tests/tt_eager/python_api_testing/unit_testing/misc/test_update_cache.py
  tests/ttnn/unit_tests/operations/test_paged_update_cache.py
on tt-sim (mha.op's sdpa-decode, rotary-llama, update-cache and fill-cache: the library `mha op` runs,
called in this process through the package built beside --mha) and asserts the PCC
thresholds (or exact equality) those tests assert. The stored SDPA decode test predates `cur_pos`:
its mask (0 before start_idx, -inf from it) and valid_seq_len become cur_pos = start_idx - 1, which
attends the same positions. Cases tt-metal's files lack (GQA at Llama-3-8B's shape, paged caches
for SDPA decode) are marked "mha" and use thresholds of our own.

  /usr/bin/python3 scripts/ttmetal_decode_tests.py --mha build/mha            # the subset (minutes)
  /usr/bin/python3 scripts/ttmetal_decode_tests.py --mha build/mha --full     # every parameterisation
  ... --quick                                                                  # a few cases (the ctest)
  ... --tt-metal 2024                          # every op at that tt-metal profile (default: latest)

Prints one markdown table row per case (docs/TTSIM.md keeps the table) and exits 1 if any fails.
"""
import argparse
import sys
import time

import torch

from mha_package import Ops, comp_pcc, fa_rand

FAILED = []


def report(test, case, want, got, passed, seconds):
    row = f"| {test} | {case} | {want} | {got} | {'pass' if passed else 'FAIL'} | {seconds:.1f} |"
    print(row, flush=True)
    if not passed:
        FAILED.append(row)


# --- SDPA decode -------------------------------------------------------------------------

def nearest_n(x, n):
    return ((x + n - 1) // n) * n


def get_chunk_size(s):  # the test's own table
    if s <= 128:
        return 32
    if s <= 256:
        return 256
    return 512


DTYPES = {  # id: (K/V dtype, Q dtype)
    "all_bfp8": ("bfloat8_b", "bfloat8_b"),
    "all_bfp16": ("bfloat16", "bfloat16"),
    "kv_bfp8_mask_bfp4": ("bfloat8_b", "bfloat16"),
    "kvmask_bfp4": ("bfloat4_b", "bfloat16"),
}


def sdpa_decode_min_pcc(b, grid, kv_dtype, q_dtype):
    if grid[0] * grid[1] // b == 1:
        return 0.90
    pcc = 0.98 if q_dtype == "bfloat8_b" else 0.99
    return 0.97 if kv_dtype == "bfloat4_b" else pcc


MASK_DTYPES = {"all_bfp8": "bfloat8_b", "all_bfp16": "bfloat16", "kv_bfp8_mask_bfp4": "bfloat4_b",
               "kvmask_bfp4": "bfloat4_b"}


def sdpa_decode_case(op, b, nh, nkv, d, grid, dtype_id, start_idx, seed=1234, masked=False):
    """One start_idx of run_test_sdpa_decode(_single_iter): K/V [b, nkv, S, d] cut at the padded
    layer length (the kernel reads nothing past it), Q [1, b, nh, d], HiFi4, approx off. masked
    (tt_metal latest): the test's own form, is_causal=False with its mask (0 before start_idx,
    -inf from it) in the id's mask dtype, instead of cur_pos."""
    kv_dtype, q_dtype = DTYPES[dtype_id]
    torch.manual_seed(seed)
    chunk = get_chunk_size(start_idx)
    layer = nearest_n(start_idx, chunk)
    K = torch.randn(b, nkv, layer, d)
    V = torch.randn(b, nkv, layer, d)
    Q = torch.randn(1, b, nh, d)
    t0 = time.time()
    if masked:
        M = torch.zeros(b, 1, nh, layer)
        M[..., start_idx:] = float("-inf")
        out = op("sdpa-decode", Q, K, V, M, dtypes=[q_dtype, kv_dtype, kv_dtype, MASK_DTYPES[dtype_id]],
                 math_fidelity="HiFi4", math_approx_mode=False, core_grid=[grid[1], grid[0]], k_chunk_size=chunk,
                 scale=d ** -0.5, is_causal=False)
    else:
        out = op("sdpa-decode", Q, K, V, cur_pos=[start_idx - 1] * b, dtypes=[q_dtype, kv_dtype, kv_dtype],
                 math_fidelity="HiFi4", math_approx_mode=False, core_grid=[grid[1], grid[0]], k_chunk_size=chunk,
                 scale=d ** -0.5)
    rep = nh // nkv
    Kr = K[:, :, :start_idx].repeat_interleave(rep, dim=1)
    Vr = V[:, :, :start_idx].repeat_interleave(rep, dim=1)
    q = Q[0].unsqueeze(2)  # b, nh, 1, d
    expect = torch.softmax((q @ Kr.transpose(-1, -2)) * d ** -0.5, dim=-1) @ Vr
    got = comp_pcc(expect.squeeze(2), out[0])
    want = sdpa_decode_min_pcc(b, grid, kv_dtype, q_dtype)
    report("sdpa_decode", f"b={b} nh={nh} nkv={nkv} d={d} grid={grid[0]}x{grid[1]} {dtype_id} "
           + (f"mask -inf from {start_idx} (non-causal) " if masked else f"pos={start_idx - 1} ")
           + f"k_chunk={chunk}", f"PCC >= {want}", f"{got:.6f}", got >= want, time.time() - t0)


def sdpa_decode_tests(op, level, masked=False):
    shapes = [  # b, nh, nkv, s, d, grid, single_iter (test_sdpa_decode's parameterisation: Llama2-70B)
        (32, 8, 1, 32768, 128, (8, 8), True),
        (16, 8, 1, 32768, 128, (8, 8), False),
        (8, 8, 1, 32768, 128, (8, 8), True),
        (4, 8, 1, 32768, 128, (8, 8), True),
    ]
    for b, nh, nkv, s, d, grid, single in shapes:
        if level == "quick" and b not in (8,):
            continue
        for dtype_id in DTYPES:
            if level == "quick" and dtype_id not in ("all_bfp16", "kvmask_bfp4"):
                continue
            if single:
                sdpa_decode_case(op, b, nh, nkv, d, grid, dtype_id, s // 2 if level == "full" else s // 16,
                                 masked=masked)
            else:
                start = 31
                while start < s:
                    sdpa_decode_case(op, b, nh, nkv, d, grid, dtype_id, start, masked=masked)
                    start += 601 if start < 4096 else 3001
                    if level != "full" and start > 2000:
                        break


def get_chunk_size_2026(max_start_pos, s):  # sdpa_test_utils.py's table
    chunk = 32 if max_start_pos <= 128 else 128 if max_start_pos <= 1024 else 512
    i = 1
    while i < s and s % (2 ** (i + 1)) == 0:
        i += 1
    return min(chunk, 2 ** i)


def sliding_window_case(op, b, nh, nkv, s, d, grid, kv_dtype, window, cur_pos):
    """test_sdpa_decode_sliding_window's run_test_sdpa_decode_single_iter (tests/ttnn/unit_tests/operations/
    sdpa/sdpa_test_utils.py): seed 1234, K, V = fa_rand(b, nkv, s, d), Q = fa_rand(1, b, nh, d), users at
    cur_pos + i, HiFi2, approx off, exp_approx_mode off, the test's k chunk; reference: softmax over
    [pos - W + 1, pos]."""
    torch.manual_seed(1234)
    K = fa_rand(b, nkv, s, d)
    V = fa_rand(b, nkv, s, d)
    Q = fa_rand(1, b, nh, d)
    pos = [cur_pos + i for i in range(b)]
    chunk = get_chunk_size_2026(max(pos) + 1, s)
    t0 = time.time()
    out = op("sdpa-decode", Q, K, V, cur_pos=pos, dtypes=[None, kv_dtype, kv_dtype], math_fidelity="HiFi2",
             math_approx_mode=False, core_grid=[grid[1], grid[0]], k_chunk_size=chunk, exp_approx_mode=False,
             scale=d ** -0.5, sliding_window_size=window)
    rep = nh // nkv
    Kr = K.double().repeat_interleave(rep, dim=1)
    Vr = V.double().repeat_interleave(rep, dim=1)
    sc = (Q[0].double().unsqueeze(2) @ Kr.transpose(-1, -2)) * d ** -0.5  # b, nh, 1, s
    j = torch.arange(s)
    for u in range(b):
        sc[u, :, :, (j > pos[u]) | (j < pos[u] - window + 1)] = float("-inf")
    expect = (torch.softmax(sc, dim=-1) @ Vr).squeeze(2)
    got = comp_pcc(expect, out[0])
    want = sdpa_decode_min_pcc(b, grid, kv_dtype, "bfloat16")
    report("sdpa_decode_sliding_window", f"b={b} nh={nh} nkv={nkv} s={s} grid={grid[0]}x{grid[1]} kv={kv_dtype} "
           f"W={window} pos={cur_pos}+i k_chunk={chunk}", f"PCC >= {want}", f"{got:.6f}", got >= want,
           time.time() - t0)


def sliding_window_tests(op, level):
    shapes = [  # b, nh, nkv, s, d, grid, W (test_sdpa_decode_sliding_window; the 16K Gemma / GPT-OSS rows: --full)
        (4, 8, 1, 1024, 128, (8, 4), 64),
        (4, 8, 1, 1024, 128, (8, 4), 128),
        (4, 8, 1, 1024, 128, (8, 4), 256),
        (8, 16, 4, 2048, 128, (8, 8), 128),
        (1, 8, 1, 4096, 128, (8, 4), 512),
        (1, 4, 2, 16384, 128, (8, 8), 1024),
        (1, 8, 1, 16384, 128, (8, 8), 128),
    ]
    for b, nh, nkv, s, d, grid, w in shapes:
        if (level != "full" and s > 4096) or (level == "quick" and w != 128):
            continue
        positions = [(w + off - 1) + 32 * k for k in (5, 10, 20, 30) for off in (15, 16, 17)]
        positions += [w * 2, w // 2, w - 1, s // 2, s - 10]
        if level == "quick":
            positions = positions[:2]
        elif level != "full":
            positions = positions[::3] + positions[-5:]
        for kv_dtype in ("bfloat16", "bfloat8_b"):
            if level == "quick" and kv_dtype != "bfloat8_b":
                continue
            for p in positions:
                if p + b - 1 < s:  # the test skips positions past the cache (users sit at p + i)
                    sliding_window_case(op, b, nh, nkv, s, d, grid, kv_dtype, w, p)


def paged_gqa_tests(op, level):
    """mha's own: Llama-3-8B GQA (32 q heads on 8 kv heads), per-user positions, through a page table."""
    torch.manual_seed(7)
    b, nh, nkv, d, block, blocks = 4, 32, 8, 128, 64, 32 if level != "quick" else 8
    S = block * blocks
    K = torch.randn(b, nkv, S, d)
    V = torch.randn(b, nkv, S, d)
    Q = torch.randn(1, b, nh, d)
    pos = [0, S // 3, S // 2 + 31, S - 1]
    perm = torch.randperm(b * blocks)
    table = perm.reshape(b, blocks)
    Kp = torch.empty(b * blocks, nkv, block, d)
    Vp = torch.empty(b * blocks, nkv, block, d)
    for u in range(b):
        for j in range(blocks):
            Kp[table[u, j]] = K[u, :, j * block:(j + 1) * block]
            Vp[table[u, j]] = V[u, :, j * block:(j + 1) * block]
    for paged in (False, True):
        for kv_dtype in ("bfloat16", "bfloat8_b"):
            t0 = time.time()
            out = op("sdpa-decode", Q, Kp if paged else K, Vp if paged else V, cur_pos=pos,
                     dtypes=[None, kv_dtype, kv_dtype], page_table=table.to(torch.int32) if paged else None)
            worst = 1.0
            for u in range(b):
                Kr = K[u, :, :pos[u] + 1].repeat_interleave(nh // nkv, dim=0)
                Vr = V[u, :, :pos[u] + 1].repeat_interleave(nh // nkv, dim=0)
                expect = torch.softmax((Q[0, u].unsqueeze(1) @ Kr.transpose(-1, -2)) * d ** -0.5, -1) @ Vr
                worst = min(worst, comp_pcc(expect.squeeze(1), out[0, u]))
            report("sdpa_decode (mha)", f"b={b} nh={nh} nkv={nkv} d={d} {'paged block=64' if paged else 'contiguous'} "
                   f"S={S} {kv_dtype} cur_pos={pos} (defaults)", "PCC >= 0.99 per user", f"{worst:.6f}",
                   worst >= 0.99, time.time() - t0)


# --- rotary_embedding_llama ---------------------------------------------------------------

def precompute_freqs_cis(dim, end, theta=10000.0):
    freqs = 1.0 / (theta ** (torch.arange(0, dim, 2)[: (dim // 2)].float() / dim))
    t = torch.arange(end, dtype=torch.float32)
    return torch.polar(torch.ones(end, dim // 2), torch.outer(t, freqs).float())


def apply_rotary_emb(x, freqs_cis):  # the Llama reference: x [..., seq, heads, dim] with pairs interleaved
    xc = torch.view_as_complex(x.float().reshape(*x.shape[:-1], -1, 2))
    shape = [1] * xc.ndim
    shape[-3], shape[-1] = xc.shape[-3], xc.shape[-1]
    return torch.view_as_real(xc * freqs_cis.view(*shape)).flatten(-2)


def rotary_tests(op, level):
    batch_seq = [(1, 32), (1, 128), (1, 256), (1, 512), (1, 2048), (1, 3 * 1024), (1, 4096), (1, 8192), (1, 16384),
                 (1, 128 * 1024), (64, 1), (32, 1), (15, 1), (8, 1), (1, 1)]
    heads = [(8, 1, 64), (8, 1, 128), (11, 3, 128), (71, 32, 64), (8, 1, 96), (8, 1, 256)]
    for batch, seq in batch_seq:
        for nh, nkv, hd in heads:
            if seq == 128 * 1024 and (nh, nkv, hd) != (8, 1, 128):
                continue  # as tt-metal: only that shape at 128K
            if seq == 1 and (nh > 32 or nkv > 32):
                continue  # decode holds the heads in one tile
            if level == "quick" and not ((batch, seq) in ((1, 256), (8, 1)) and hd in (64, 96)):
                continue
            if level == "subset" and seq > 4096:
                continue
            torch.manual_seed(0)
            decode = seq == 1
            max_seq = 128 * 1024 if decode else max(4096, seq)
            xs = [torch.rand(batch, nh, seq, hd) * 2 - 1, torch.rand(batch, nkv, seq, hd) * 2 - 1]
            freqs = precompute_freqs_cis(hd, max_seq * 2)
            pos = torch.arange(batch) if decode else torch.arange(seq)
            f = freqs[pos]
            cos = torch.stack([f.real, f.real], -1).flatten(-2)  # [n, hd], each pair's value twice
            sin = torch.stack([f.imag, f.imag], -1).flatten(-2)
            t0 = time.time()
            worst = 1.0
            for x in xs:
                if decode:  # [1, batch, heads, hd]; each user at its own position
                    xin = x.permute(2, 0, 1, 3)
                    c, s = cos.reshape(1, batch, 1, hd), sin.reshape(1, batch, 1, hd)
                    expect = apply_rotary_emb(xin, f)  # the users play the reference's sequence
                else:
                    xin = x
                    c, s = cos.reshape(1, 1, seq, hd), sin.reshape(1, 1, seq, hd)
                    expect = apply_rotary_emb(x.transpose(1, 2), f).transpose(1, 2)
                out = op("rotary-llama", xin, c, s, math_fidelity="HiFi4", math_approx_mode=True,
                         fp32_dest_acc_en=True if hd <= 128 else None, is_decode_mode=True if decode else None)
                worst = min(worst, comp_pcc(expect, out))
            report("rotary_embedding_llama", f"batch={batch} seq={seq} heads={nh}/{nkv} hd={hd} "
                   f"{'decode' if decode else 'prefill'}", "PCC >= 0.9997", f"{worst:.6f}", worst >= 0.9997,
                   time.time() - t0)


# --- fill_cache / update_cache --------------------------------------------------------------

def fill_cache_tests(op, level):
    users_list = [8, 32] if level != "quick" else [8]
    for seq_len in ([32, 512, 2048, 4096] if level == "full" else [32, 512] if level == "quick" else [32, 512, 4096]):
        for users in users_list:
            for heads in ([1, 2, 8] if level == "full" else [1, 8] if level == "subset" else [1]):
                for dtype in ("bfloat16", "bfloat8_b"):
                    torch.manual_seed(0)
                    cache = torch.randn(users, heads, 4096, 64).bfloat16().float()
                    got = cache
                    t0 = time.time()
                    for i in (0, users - 1):  # the first and last user (tt-metal fills every user)
                        x = torch.randn(1, heads, seq_len, 64).bfloat16().float()
                        got = op("fill-cache", got, x, batch_idx=i, dtype=dtype)
                        cache[i:i + 1, :, :seq_len] = x
                    if dtype == "bfloat16":
                        ok = torch.equal(cache, got)
                        val = "equal" if ok else "differs"
                        want = "equal"
                    else:
                        p = comp_pcc(cache, got)
                        ok, val, want = p >= 0.99, f"{p:.6f}", "PCC >= 0.99"
                    report("fill_cache", f"seq_len={seq_len} users={users} heads={heads} {dtype}", want, val, ok,
                           time.time() - t0)


def update_cache_tests(op, level):
    for cache_idx in ([0, 1, 127, 1057] if level != "quick" else [0, 127]):
        for users in ([8, 16, 32] if level == "full" else [8, 32] if level == "subset" else [8]):
            for offset in (0, 16):
                if users + offset > 32:
                    continue
                for heads in ([1, 2, 8] if level == "full" else [1, 8] if level == "subset" else [1]):
                    for in_dtype in ("bfloat16", "bfloat8_b"):
                        torch.manual_seed(0)
                        cache = torch.randn(users, heads, 4096, 64).bfloat16().float()
                        x = torch.randn(users, heads, 1, 64).bfloat16().float()
                        x_new = torch.cat([torch.zeros(offset, heads, 1, 64), x,
                                           torch.zeros(32 - users - offset, heads, 1, 64)], 0)
                        t0 = time.time()
                        got = op("update-cache", cache, x_new.permute(2, 1, 0, 3), update_idx=cache_idx,
                                 batch_offset=offset, dtypes=["bfloat16", in_dtype])
                        cache[:, :, cache_idx:cache_idx + 1] = x
                        part = got[:, :, cache_idx:cache_idx + 1]
                        if in_dtype == "bfloat16":
                            ok = torch.equal(cache, got) and torch.equal(x, part)
                            val, want = ("equal" if ok else "differs"), "equal (cache and row)"
                        else:
                            p1, p2 = comp_pcc(cache, got), comp_pcc(x, part)
                            ok, val, want = min(p1, p2) >= 0.99, f"{p1:.6f} / {p2:.6f}", "PCC >= 0.99 (cache / row)"
                        report("update_cache", f"idx={cache_idx} users={users} offset={offset} heads={heads} "
                               f"in={in_dtype} cache=bfloat16", want, val, ok, time.time() - t0)


def paged_update_cache_tests(op, level):
    """tt-metal's tests/ttnn/unit_tests/operations/test_paged_update_cache.py (stored version
    07b7c6be2d0579e23bda8e14a51590c45a2804c0): test_update_cache_decode (per-user positions
    cache_idx + 17 i, no page table; share_cache is not modelled) and test_paged_update_cache_decode
    (a shuffled paged cache through its page table; with one head, user 16 is skipped with -1)."""
    def check(want, got, x, slices, cache_dtype):
        if cache_dtype == "bfloat16":
            ok = torch.equal(want, got) and torch.equal(x, slices)
            return ok, "equal" if ok else "differs", "equal (cache and rows)"
        p1, p2 = comp_pcc(want, got), comp_pcc(x, slices)
        return min(p1, p2) >= 0.99, f"{p1:.6f} / {p2:.6f}", "PCC >= 0.99 (cache / rows)"

    users, heads, hd = 4, 8, 128
    for max_seq in ([2048, 32 * 1024] if level == "full" else [2048]):
        for cache_dtype in ("bfloat4_b", "bfloat8_b", "bfloat16"):
            if cache_dtype == "bfloat4_b" and max_seq == 2048:
                continue  # as tt-metal: bfloat4_b only sanity-checked at 32K
            if level == "quick" and cache_dtype != "bfloat8_b":
                continue
            torch.manual_seed(0)
            cache = torch.randn(users, heads, max_seq, hd).bfloat16().float()
            x = torch.randn(1, users, heads, hd).bfloat16().float()
            x_pad = torch.nn.functional.pad(x, (0, 0, 0, 32 - heads))
            idxs = [max_seq // 2 + i * 17 for i in range(users)]
            t0 = time.time()
            got = op("update-cache", cache, x_pad, cur_pos=idxs, dtypes=[cache_dtype, None])
            for i in range(users):
                cache[i, :, idxs[i]] = x[0, i]
            slices = torch.stack([got[i, :, idxs[i]] for i in range(users)]).unsqueeze(0)
            ok, val, want = check(cache, got, x, slices, cache_dtype)
            report("paged_update_cache", f"update_idxs={max_seq // 2}+17i users={users} heads={heads} hd={hd} "
                   f"max_seq_len={max_seq} cache={cache_dtype}", want, val, ok, time.time() - t0)

    users, hd, max_seq = 32, 128, 2048
    for block in (64, 128):
        for heads in (1, 8):
            for cache_idx in (0, 1, 127, 1057):
                for cache_dtype in ("bfloat16", "bfloat8_b"):
                    if level == "quick" and (block, heads, cache_idx) != (64, 1, 127):
                        continue
                    if level == "subset" and heads == 8 and cache_idx != 127:
                        continue
                    torch.manual_seed(0)
                    blocks_per_seq = max_seq // block
                    cache = torch.randn(users, heads, max_seq, hd).bfloat16().float()
                    paged = cache.reshape(users, heads, blocks_per_seq, block, hd).transpose(1, 2).reshape(
                        users * blocks_per_seq, heads, block, hd)
                    perm = torch.randperm(users * blocks_per_seq)
                    shuffled = paged[perm]
                    rev = torch.argsort(perm)
                    table = rev.reshape(users, blocks_per_seq)
                    x = torch.randn(1, users, heads, hd).bfloat16().float()
                    x_pad = torch.nn.functional.pad(x, (0, 0, 0, 32 - heads))
                    idxs = [cache_idx + i * 17 for i in range(users)]
                    if heads == 1:
                        idxs[users // 2] = -1
                    t0 = time.time()
                    got = op("update-cache", shuffled, x_pad, cur_pos=idxs, page_table=table.to(torch.int32),
                             dtypes=[cache_dtype, None])
                    back = got[rev].reshape(users, blocks_per_seq, heads, block, hd).transpose(1, 2).reshape(
                        users, heads, max_seq, hd)
                    for i in range(users):
                        if idxs[i] != -1:
                            cache[i, :, idxs[i]] = x[0, i]
                        else:
                            x[0, i] = cache[i, :, 0]  # a skipped user compares its untouched row 0
                    slices = torch.stack([back[i, :, max(idxs[i], 0)] for i in range(users)]).unsqueeze(0)
                    ok, val, want = check(cache, back, x, slices, cache_dtype)
                    report("paged_update_cache", f"paged block={block} cache_idx={cache_idx}+17i users={users} "
                           f"heads={heads} cache={cache_dtype}", want, val, ok, time.time() - t0)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mha", default="build/mha", help="the build's mha binary; its package BUILD/python/mha runs the ops")
    ap.add_argument("--threads", type=int, default=2)
    g = ap.add_mutually_exclusive_group()
    g.add_argument("--quick", action="store_true", help="a few cases of each test (what ctest runs)")
    g.add_argument("--full", action="store_true", help="every parameterisation (long: 32768-token caches)")
    ap.add_argument("--only", choices=["sdpa_decode", "rotary", "cache", "paged_update_cache"], help="one family")
    ap.add_argument("--tt-metal", choices=["2024", "latest"], help="the tt_metal profile of every op (default: tt-sim's, latest)")
    a = ap.parse_args()
    level = "quick" if a.quick else "full" if a.full else "subset"
    print("| test | case | tt-metal asserts | measured | result | s |\n|---|---|---|---|---|---|", flush=True)
    op = Ops(a.mha, a.threads, a.tt_metal)
    profile = op.profile()
    if a.only in (None, "sdpa_decode"):
        sdpa_decode_tests(op, level)
        if profile == "latest":  # the stored test's own masked, non-causal form
            sdpa_decode_tests(op, level, masked=True)
        paged_gqa_tests(op, level)
        sliding_window_tests(op, level)
    if a.only in (None, "rotary"):
        rotary_tests(op, level)
    if a.only in (None, "cache"):
        fill_cache_tests(op, level)
        update_cache_tests(op, level)
    if a.only in (None, "cache", "paged_update_cache"):
        paged_update_cache_tests(op, level)
    if FAILED:
        print(f"\n{len(FAILED)} case(s) failed", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
