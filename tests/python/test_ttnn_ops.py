"""Every op through mha.ttnn equals `mha op` bit for bit on the same inputs
and settings; device tensors keep their bits between calls; arguments
tt-sim does not model are refused by name."""
import pytest
import torch

import mha
import mha.ttnn as ttnn
from conftest import assert_same_bits

FORMATS = ["bfloat16", "bfloat8_b", "bfloat4_b", "float32"]


def dev_tensor(device, x, dtype=ttnn.bfloat16, layout=ttnn.TILE_LAYOUT):
    return ttnn.from_torch(x, dtype=dtype, layout=layout, device=device)


def out_of(t):
    return ttnn.to_torch(t).float()


@pytest.mark.parametrize("fmt", FORMATS)
def test_reupload_is_bit_exact(device, fmt):
    """A device tensor's values converted to tiles again are the same values:
    what lets a tensor carry its device bits from one op to the next."""
    torch.manual_seed(1)
    dtype = getattr(ttnn, fmt)
    for shape in [(3, 50, 70), (64, 64), (1, 2, 33, 129)]:
        x = torch.randn(shape) * torch.exp(torch.randn(shape) * 3)  # exponents spread across each face row
        t = dev_tensor(device, x, dtype)
        again = mha.op("to-device", t.values(), dtype=fmt)
        assert_same_bits(again, t.values())


def test_from_torch_equals_to_device_op(device, cli):
    x = torch.randn(2, 40, 72)
    for fmt in FORMATS:
        t = dev_tensor(device, x, getattr(ttnn, fmt))
        assert_same_bits(out_of(t), cli.op("to-device", x, dtypes=[fmt]))
    assert ttnn.to_torch(dev_tensor(device, x)).dtype == torch.bfloat16
    assert ttnn.to_torch(dev_tensor(device, x, ttnn.bfloat8_b)).dtype == torch.float32


def test_matmul_and_at(device, cli):
    torch.manual_seed(2)
    a, b = torch.randn(2, 64, 96), torch.randn(96, 64)
    ta, tb = dev_tensor(device, a), dev_tensor(device, b)
    want = cli.op("matmul", a, b, dtypes=["bfloat16", "bfloat16"])
    assert_same_bits(out_of(ttnn.matmul(ta, tb)), want)
    assert_same_bits(out_of(ta @ tb), want)
    # block floats, a core grid, an output dtype, a compute kernel config
    qa, qb = dev_tensor(device, a, ttnn.bfloat8_b), dev_tensor(device, b, ttnn.bfloat4_b)
    cfg = ttnn.WormholeComputeKernelConfig(math_fidelity=ttnn.MathFidelity.HiFi2, math_approx_mode=False,
                                           fp32_dest_acc_en=True, packer_l1_acc=False)
    got = ttnn.matmul(qa, qb, dtype=ttnn.bfloat16, core_grid=ttnn.CoreGrid(y=2, x=4), compute_kernel_config=cfg)
    want = cli.op("matmul", a, b, dtypes=["bfloat8_b", "bfloat4_b"], output_dtype="bfloat16", core_grid=[2, 4],
                  math_fidelity="HiFi2", math_approx_mode=False, fp32_dest_acc_en=True, packer_l1_acc=False)
    assert got.dtype is ttnn.bfloat16
    assert_same_bits(out_of(got), want)


def test_linear_with_bias(device, cli):
    torch.manual_seed(3)
    x, w, b = torch.randn(1, 96, 64), torch.randn(64, 128), torch.randn(128)
    got = ttnn.linear(dev_tensor(device, x), dev_tensor(device, w), bias=dev_tensor(device, b.reshape(1, -1)),
                      dtype=ttnn.bfloat8_b, core_grid=ttnn.CoreGrid(y=2, x=2), memory_config=ttnn.L1_MEMORY_CONFIG)
    want = cli.op("linear", x, w, b.reshape(1, -1), output_dtype="bfloat8_b", core_grid=[2, 2], memory_config="L1")
    assert got.dtype is ttnn.bfloat8_b
    assert_same_bits(out_of(got), want)


def test_rms_norm(device, cli):
    """Qwen3's QK-norm call: bf16 heads, a bf16 ROW_MAJOR weight [1, 1, dh/32, 32],
    tt_transformers' HiFi2 / exact / fp32 Dst config."""
    torch.manual_seed(9)
    x, w = torch.randn(1, 4, 40, 64), torch.rand(1, 1, 2, 32) + 0.5
    cfg = ttnn.WormholeComputeKernelConfig(math_fidelity=ttnn.MathFidelity.HiFi2, math_approx_mode=False,
                                           fp32_dest_acc_en=True, packer_l1_acc=True)
    got = ttnn.rms_norm(dev_tensor(device, x), epsilon=1e-6,
                        weight=dev_tensor(device, w, layout=ttnn.ROW_MAJOR_LAYOUT), compute_kernel_config=cfg)
    want = cli.op("rms-norm", x, w, epsilon=1e-6, math_fidelity="HiFi2", math_approx_mode=False,
                  fp32_dest_acc_en=True, packer_l1_acc=True)
    assert_same_bits(out_of(got), want)
    with pytest.raises(mha.Error, match="residual_input_tensor"):
        ttnn.rms_norm(dev_tensor(device, x), residual_input_tensor=dev_tensor(device, x))


def test_eltwise(device, cli):
    torch.manual_seed(4)
    a, m = torch.randn(2, 4, 64, 64), torch.randn(2, 1, 1, 64)
    ta, tm = dev_tensor(device, a), dev_tensor(device, m)
    assert_same_bits(out_of(ttnn.add(ta, tm)), cli.op("add", a, m))
    assert_same_bits(out_of(ta + tm), cli.op("add", a, m))
    s = ta
    s += tm  # the notebook's `attention_scores += attention_mask`
    assert_same_bits(out_of(s), cli.op("add", a, m))
    assert_same_bits(out_of(ttnn.multiply(ta, tm)), cli.op("multiply", a, m))
    assert_same_bits(out_of(ta * 0.125), cli.op("multiply", a, scalar=0.125))
    assert_same_bits(out_of(ttnn.softmax(ta, dim=-1)), cli.op("softmax", a))
    assert_same_bits(out_of(ttnn.exp(ta)), cli.op("exp", a))
    assert_same_bits(out_of(ttnn.exp(ta, fast_and_approximate_mode=True)), cli.op("exp", a, math_approx_mode=True))
    pos = a.abs() + 0.5
    assert_same_bits(out_of(ttnn.reciprocal(dev_tensor(device, pos, ttnn.float32))),
                     cli.op("reciprocal", pos, dtypes=["float32"]))


def test_chained_ops_keep_device_bits(device, cli):
    """matmul to bfloat8_b, then softmax of that device tensor, equals `mha op
    matmul` then `mha op softmax` on its output file read as bfloat8_b."""
    torch.manual_seed(5)
    a, b = torch.randn(1, 64, 64), torch.randn(64, 96)
    mm = ttnn.matmul(dev_tensor(device, a), dev_tensor(device, b), dtype=ttnn.bfloat8_b)
    got = ttnn.softmax(mm)
    step1 = cli.op("matmul", a, b, output_dtype="bfloat8_b")
    want = cli.op("softmax", step1, dtypes=["bfloat8_b"])
    assert got.dtype is ttnn.bfloat8_b
    assert_same_bits(out_of(got), want)


@pytest.mark.parametrize("fmt", ["bfloat16", "float32"])
def test_ops_pass_their_tiles_on(device, cli, fmt):
    """An op's output reaches the next op as the tiles it left, without its
    values read back, and that equals `mha op` on those values: a shape with
    tile padding, which exp fills on the device (exp(0) = 1)."""
    torch.manual_seed(6)
    a = torch.randn(2, 40, 70)
    e = ttnn.exp(dev_tensor(device, a, getattr(ttnn, fmt)))
    s = ttnn.softmax(e)
    got = ttnn.add(s, e)
    assert e._values is None and s._values is None  # never read back
    want_e = cli.op("exp", a, dtypes=[fmt])
    want_s = cli.op("softmax", want_e, dtypes=[fmt])
    assert_same_bits(out_of(got), cli.op("add", want_s, want_e, dtypes=[fmt, fmt]))
    assert tuple(got.shape) == (2, 40, 70)


def test_sdpa_prefill(device, cli):
    torch.manual_seed(6)
    q, k, v = torch.randn(1, 4, 128, 64), torch.randn(1, 2, 128, 64), torch.randn(1, 2, 128, 64)
    grid = device.compute_with_storage_grid_size()
    pc = ttnn.SDPAProgramConfig(compute_with_storage_grid_size=grid, q_chunk_size=64, k_chunk_size=32,
                                exp_approx_mode=False)
    cfg = ttnn.WormholeComputeKernelConfig(math_fidelity=ttnn.MathFidelity.HiFi4, math_approx_mode=False,
                                           fp32_dest_acc_en=True, packer_l1_acc=False)
    tq, tk, tv = dev_tensor(device, q), dev_tensor(device, k, ttnn.bfloat8_b), dev_tensor(device, v, ttnn.bfloat8_b)
    got = ttnn.transformer.scaled_dot_product_attention(tq, tk, tv, is_causal=True, program_config=pc,
                                                        compute_kernel_config=cfg)
    want = cli.op("sdpa", q, k, v, dtypes=["bfloat16", "bfloat8_b", "bfloat8_b"], k_chunk_size=32,
                  exp_approx_mode=False, core_grid=[grid.y, grid.x], q_chunk_size=64, is_causal=True,
                  math_fidelity="HiFi4", math_approx_mode=False, fp32_dest_acc_en=True, packer_l1_acc=False)
    assert_same_bits(out_of(got), want)
    mask = torch.where(torch.rand(1, 1, 128, 128) < 0.2, -1e9, 0.0)
    got = ttnn.transformer.scaled_dot_product_attention(tq, tk, tv, attn_mask=dev_tensor(device, mask),
                                                        is_causal=False, scale=0.1)
    want = cli.op("sdpa", q, k, v, mask, dtypes=["bfloat16", "bfloat8_b", "bfloat8_b", "bfloat16"], is_causal=False,
                  scale=0.1)
    assert_same_bits(out_of(got), want)


def _paged(x, table, block):
    """x [b, nkv, S, d] stored in the blocks table [b, S / block] names (others zero)."""
    b, nkv, S, d = x.shape
    cache = torch.zeros(int(table.max()) + 2, nkv, block, d)
    for u in range(b):
        for j in range(S // block):
            cache[table[u, j]] = x[u, :, j * block:(j + 1) * block]
    return cache


def test_chunked_sdpa(device, cli):
    """Prefill of positions 128..191 against a shuffled paged cache: equal to
    `mha op chunked-sdpa`, and to those rows of causal SDPA over the sequence."""
    torch.manual_seed(9)
    b, nqh, nkv, S, d, block, start, s = 2, 4, 2, 192, 64, 32, 128, 64
    q, k, v = torch.randn(b, nqh, S, d), torch.randn(b, nkv, S, d), torch.randn(b, nkv, S, d)
    table = torch.randperm(b * S // block).reshape(b, S // block).to(torch.int32)
    kp, vp = _paged(k, table, block), _paged(v, table, block)
    grid = device.compute_with_storage_grid_size()
    pc = ttnn.SDPAProgramConfig(compute_with_storage_grid_size=grid, q_chunk_size=32, k_chunk_size=64)
    cfg = ttnn.WormholeComputeKernelConfig(math_fidelity=ttnn.MathFidelity.HiFi4, math_approx_mode=False,
                                           fp32_dest_acc_en=True, packer_l1_acc=False)
    tq = dev_tensor(device, q[:, :, start:start + s])
    tk, tv = dev_tensor(device, kp, ttnn.bfloat8_b), dev_tensor(device, vp, ttnn.bfloat8_b)
    tpt = ttnn.from_torch(table, device=device)
    got = ttnn.transformer.chunked_scaled_dot_product_attention(tq, tk, tv, tpt, start, program_config=pc,
                                                                compute_kernel_config=cfg)
    settings = dict(q_chunk_size=32, k_chunk_size=64, exp_approx_mode=True, core_grid=[grid.y, grid.x],
                    math_fidelity="HiFi4", math_approx_mode=False, fp32_dest_acc_en=True, packer_l1_acc=False)
    want = cli.op("chunked-sdpa", q[:, :, start:start + s], kp, vp, dtypes=["bfloat16", "bfloat8_b", "bfloat8_b"],
                  page_table=table.numpy(), chunk_start_idx=start, **settings)
    assert_same_bits(out_of(got), want)
    full = ttnn.transformer.scaled_dot_product_attention(
        dev_tensor(device, q), dev_tensor(device, k, ttnn.bfloat8_b), dev_tensor(device, v, ttnn.bfloat8_b),
        program_config=pc, compute_kernel_config=cfg)
    assert_same_bits(out_of(got), out_of(full)[:, :, start:start + s])
    # TT-NN's checks: an int32 page table; a start in whole q and k chunks.
    with pytest.raises(mha.Error, match="int32"):
        ttnn.transformer.chunked_scaled_dot_product_attention(
            tq, tk, tv, ttnn.from_torch(table, dtype=ttnn.uint32, device=device), start)
    with pytest.raises(mha.Error, match="not a multiple of k_chunk_size 64"):
        ttnn.transformer.chunked_scaled_dot_product_attention(tq, tk, tv, tpt, 96, program_config=pc)


def test_sdpa_decode_contiguous_and_paged(device, cli):
    torch.manual_seed(7)
    b, nh, nkv, S, d, block = 2, 8, 2, 256, 64, 64
    q, k, v = torch.randn(1, b, nh, d), torch.randn(b, nkv, S, d), torch.randn(b, nkv, S, d)
    pos = [100, 255]
    tq = dev_tensor(device, q)
    tk, tv = dev_tensor(device, k, ttnn.bfloat8_b), dev_tensor(device, v, ttnn.bfloat8_b)
    got = ttnn.transformer.scaled_dot_product_attention_decode(tq, tk, tv, cur_pos=pos)
    want = cli.op("sdpa-decode", q, k, v, dtypes=["bfloat16", "bfloat8_b", "bfloat8_b"], cur_pos=pos)
    assert_same_bits(out_of(got), want)
    cur = ttnn.from_torch(torch.tensor(pos, dtype=torch.int32), device=device)
    assert_same_bits(out_of(ttnn.transformer.scaled_dot_product_attention_decode(tq, tk, tv, cur_pos_tensor=cur)),
                     want)
    # paged: the same cache in shuffled blocks
    blocks = S // block
    table = torch.randperm(b * blocks).reshape(b, blocks).to(torch.int32)
    kp, vp = torch.empty(b * blocks, nkv, block, d), torch.empty(b * blocks, nkv, block, d)
    for u in range(b):
        for j in range(blocks):
            kp[table[u, j]], vp[table[u, j]] = k[u, :, j * block:(j + 1) * block], v[u, :, j * block:(j + 1) * block]
    got = ttnn.transformer.paged_scaled_dot_product_attention_decode(
        tq, dev_tensor(device, kp, ttnn.bfloat8_b), dev_tensor(device, vp, ttnn.bfloat8_b),
        page_table_tensor=ttnn.from_torch(table, device=device), cur_pos_tensor=cur)
    want = cli.op("sdpa-decode", q, kp, vp, dtypes=["bfloat16", "bfloat8_b", "bfloat8_b"], cur_pos=pos,
                  page_table=table.numpy())
    assert_same_bits(out_of(got), want)


def test_decode_non_causal_with_mask_at_latest(cli):
    """is_causal=False with attn_mask: tt_metal latest's decode (the 2024 profile refuses it)."""
    torch.manual_seed(13)
    q, k, v = torch.randn(1, 2, 8, 64), torch.randn(2, 1, 128, 64), torch.randn(2, 1, 128, 64)
    mask = torch.zeros(2, 1, 8, 128)
    mask[..., 100:] = float("-inf")
    cfg = ttnn.SDPAProgramConfig(compute_with_storage_grid_size=ttnn.CoreCoord(8, 8), q_chunk_size=32,
                                 k_chunk_size=64)
    for profile in ["latest", "2024"]:
        dev = ttnn.open_device(device_id=0, options={"tt_metal": profile})
        try:
            args = [dev_tensor(dev, x) for x in (q, k, v)]
            call = lambda: ttnn.transformer.scaled_dot_product_attention_decode(  # noqa: E731
                *args, is_causal=False, attn_mask=dev_tensor(dev, mask), program_config=cfg)
            if profile == "2024":
                with pytest.raises(mha.Error, match="modelled at tt_metal latest only"):
                    call()
                continue
            want = cli.op("sdpa-decode", q, k, v, mask, is_causal=False, k_chunk_size=64, tt_metal="latest",
                          core_grid=[8, 8])
            assert_same_bits(out_of(call()), want)
        finally:
            ttnn.close_device(dev)


@pytest.mark.parametrize("device_params", [{"options": {"tt_metal": "2024"}}], indirect=True)
def test_flash_mla_prefill_and_decode(device, cli):
    """ttnn.transformer.flash_mla_prefill and (paged_)flash_multi_latent_attention_decode
    equal `mha op flash-mla-prefill` / `flash-mla-decode`: V is K's first
    head_dim_v columns; a separate V is refused by name. At tt_metal 2024, the
    one profile flash MLA is modelled at (latest, the default, refuses it)."""
    torch.manual_seed(11)
    q, k = torch.randn(1, 4, 64, 96), torch.randn(1, 1, 64, 96)
    tk = dev_tensor(device, k, ttnn.bfloat8_b)
    got = ttnn.transformer.flash_mla_prefill(dev_tensor(device, q), tk, head_dim_v=64)
    want = cli.op("flash-mla-prefill", q, k, dtypes=["bfloat16", "bfloat8_b"], head_dim_v=64, tt_metal="2024")
    assert tuple(want.shape) == (1, 4, 64, 64)
    assert_same_bits(out_of(got), want)
    qd, kd, pos = torch.randn(1, 2, 16, 96), torch.randn(2, 1, 128, 96), [5, 100]
    tqd, tkd = dev_tensor(device, qd), dev_tensor(device, kd, ttnn.bfloat8_b)
    got = ttnn.transformer.flash_multi_latent_attention_decode(tqd, tkd, head_dim_v=64, cur_pos=pos)
    want = cli.op("flash-mla-decode", qd, kd, dtypes=["bfloat16", "bfloat8_b"], cur_pos=pos, head_dim_v=64,
                  tt_metal="2024")
    assert_same_bits(out_of(got), want)
    table = torch.tensor([[3, 0, 6, 1], [2, 7, 4, 5]], dtype=torch.int32)
    kp = torch.empty(8, 1, 32, 96)
    for u in range(2):
        for j in range(4):
            kp[table[u, j]] = kd[u, :, j * 32:(j + 1) * 32]
    cur = ttnn.from_torch(torch.tensor(pos, dtype=torch.int32), device=device)
    paged = ttnn.transformer.paged_flash_multi_latent_attention_decode(
        tqd, dev_tensor(device, kp, ttnn.bfloat8_b), head_dim_v=64, page_table_tensor=ttnn.from_torch(table, device=device),
        cur_pos_tensor=cur)
    assert_same_bits(out_of(paged), cli.op("flash-mla-decode", qd, kp, dtypes=["bfloat16", "bfloat8_b"], cur_pos=pos,
                                           page_table=table.numpy(), head_dim_v=64, tt_metal="2024"))
    with pytest.raises(mha.Error, match="input_tensor_v"):
        ttnn.transformer.flash_multi_latent_attention_decode(tqd, tkd, tkd, head_dim_v=64, cur_pos=pos)
    # Chunked: positions 64..127 of user 0's sequence against the paged cache.
    qc = torch.randn(2, 4, 64, 96)
    got = ttnn.transformer.chunked_flash_mla_prefill(dev_tensor(device, qc), dev_tensor(device, kp, ttnn.bfloat8_b), 64,
                                                     ttnn.from_torch(table, device=device), 64)
    want = cli.op("chunked-flash-mla-prefill", qc, kp, dtypes=["bfloat16", "bfloat8_b"], page_table=table.numpy(),
                  chunk_start_idx=64, head_dim_v=64, tt_metal="2024")
    assert_same_bits(out_of(got), want)


def test_cache_ops_write_in_place(device, cli):
    torch.manual_seed(8)
    cache, x = torch.randn(4, 2, 128, 64), torch.randn(1, 2, 4, 64)
    tc = dev_tensor(device, cache, ttnn.bfloat8_b)
    ttnn.update_cache(tc, dev_tensor(device, x), 37)
    want = cli.op("update-cache", cache, x, dtypes=["bfloat8_b", "bfloat16"], update_idx=37)
    assert_same_bits(out_of(tc), want)
    # paged_update_cache on the cache just written: its device bits carried over
    xu = torch.randn(1, 4, 2, 64)
    ttnn.experimental.paged_update_cache(tc, dev_tensor(device, xu), update_idxs=[5, -1, 64, 127])
    want2 = cli.op("update-cache", want, xu, dtypes=["bfloat8_b", "bfloat16"], cur_pos=[5, -1, 64, 127])
    assert_same_bits(out_of(tc), want2)
    # fill_cache: one user's rows
    xf = torch.randn(1, 2, 64, 64)
    ttnn.fill_cache(tc, dev_tensor(device, xf, ttnn.bfloat8_b), 2)
    want3 = cli.op("fill-cache", want2, xf, dtypes=["bfloat8_b", "bfloat8_b"], batch_idx=2)
    assert_same_bits(out_of(tc), want3)


def test_paged_fill_cache_is_fill_cache_through_the_table(device, cli):
    torch.manual_seed(9)
    blocks, nkv, block, d = 8, 2, 32, 64
    cache, x = torch.randn(blocks, nkv, block, d), torch.randn(1, nkv, 96, d)
    table = torch.tensor([[7, 2, 5, 0], [1, 3, 4, 6]], dtype=torch.int32)
    tc = dev_tensor(device, cache, ttnn.bfloat8_b)
    ttnn.experimental.paged_fill_cache(tc, dev_tensor(device, x, ttnn.bfloat8_b), ttnn.from_torch(table), batch_idx=0)
    got = out_of(tc)
    xq = cli.op("to-device", x, dtypes=["bfloat8_b"])
    cq = cli.op("to-device", cache, dtypes=["bfloat8_b"])
    for j, blk in enumerate([7, 2, 5]):
        assert_same_bits(got[blk], xq[0, :, j * block:(j + 1) * block])
    for blk in [0, 1, 3, 4, 6]:
        assert_same_bits(got[blk], cq[blk])


def test_rotary_embedding_llama(device, cli):
    torch.manual_seed(10)
    x, cos, sin = torch.randn(1, 4, 64, 64), torch.randn(1, 1, 64, 64), torch.randn(1, 1, 64, 64)
    trans = torch.zeros(1, 1, 32, 32)
    trans[..., torch.arange(0, 32, 2), torch.arange(1, 32, 2)] = 1
    trans[..., torch.arange(1, 32, 2), torch.arange(0, 32, 2)] = -1
    cfg = ttnn.WormholeComputeKernelConfig(math_fidelity=ttnn.MathFidelity.HiFi4, math_approx_mode=True,
                                           fp32_dest_acc_en=True, packer_l1_acc=True)
    got = ttnn.experimental.rotary_embedding_llama(dev_tensor(device, x), dev_tensor(device, cos),
                                                   dev_tensor(device, sin), dev_tensor(device, trans),
                                                   compute_kernel_config=cfg)
    want = cli.op("rotary-llama", x, cos, sin, trans, is_decode_mode=False, math_fidelity="HiFi4",
                  math_approx_mode=True, fp32_dest_acc_en=True, packer_l1_acc=True)
    assert_same_bits(out_of(got), want)


def test_fused_qk_rotary_and_fused_cache_update(device, cli):
    """tt_transformers' decode calls: Q's and K's rotations in one op, both caches in one op."""
    torch.manual_seed(12)
    q, k = torch.randn(1, 2, 8, 64), torch.randn(1, 2, 2, 64)
    cos, sin = torch.randn(1, 2, 1, 64), torch.randn(1, 2, 1, 64)
    trans = torch.zeros(1, 1, 32, 32)
    trans[..., torch.arange(0, 32, 2), torch.arange(1, 32, 2)] = 1
    trans[..., torch.arange(1, 32, 2), torch.arange(0, 32, 2)] = -1
    qo, ko = ttnn.experimental.rotary_embedding_llama_fused_qk(
        dev_tensor(device, q), dev_tensor(device, k), dev_tensor(device, cos), dev_tensor(device, sin),
        dev_tensor(device, trans))
    assert_same_bits(out_of(qo), cli.op("rotary-llama", q, cos, sin, trans, is_decode_mode=True))
    assert_same_bits(out_of(ko), cli.op("rotary-llama", k, cos, sin, trans, is_decode_mode=True))
    ck, cv, xk, xv = torch.randn(4, 2, 64, 64), torch.randn(4, 2, 64, 64), torch.randn(1, 2, 8, 64), torch.randn(1, 2, 8, 64)
    table = torch.tensor([[3, 0], [1, 2]], dtype=torch.int32)
    tk, tv = dev_tensor(device, ck, ttnn.bfloat8_b), dev_tensor(device, cv, ttnn.bfloat8_b)
    ttnn.experimental.paged_fused_update_cache(tk, dev_tensor(device, xk), tv, dev_tensor(device, xv),
                                               update_idxs=[70, 5], page_table=ttnn.from_torch(table))
    for got, cache, x in ((tk, ck, xk), (tv, cv, xv)):
        want = cli.op("update-cache", cache, x, dtypes=["bfloat8_b", "bfloat16"], cur_pos=[70, 5],
                      page_table=table.numpy())
        assert_same_bits(out_of(got), want)


def test_data_movement(device, cli):
    torch.manual_seed(11)
    x = torch.randn(2, 64, 3 * 4 * 32)
    for fmt in ["bfloat16", "bfloat8_b"]:
        t = dev_tensor(device, x, getattr(ttnn, fmt))
        xv = out_of(t)
        q, k, v = ttnn.transformer.split_query_key_value_and_split_heads(t, num_heads=4)
        heads = xv.reshape(2, 64, 3, 4, 32)
        want_q = heads[:, :, 0].permute(0, 2, 1, 3)
        want_k = heads[:, :, 1].permute(0, 2, 3, 1)
        if fmt == "bfloat16":  # bf16 moves exactly
            assert_same_bits(out_of(q), want_q)
            assert_same_bits(out_of(k), want_k)
        else:  # repacked as the device's move kernels do: exact bfloat8_b values, within one
            # step of the new face row's shared exponent (7 magnitude bits) of the moved values
            assert q.dtype is ttnn.bfloat8_b
            got = out_of(q)
            assert_same_bits(mha.op("to-device", got, dtype="bfloat8_b"), got)
            rows = want_q.reshape(-1, 16)
            step = torch.exp2(torch.floor(torch.log2(rows.abs().amax(dim=1, keepdim=True))) - 6)
            assert bool(((got.reshape(-1, 16) - rows).abs() <= step).all())
        ctx = ttnn.transformer.concatenate_heads(q)
        assert tuple(ctx.shape) == (2, 64, 128)
        r = ttnn.reshape(ttnn.permute(t, (0, 2, 1)), (2, -1))
        assert tuple(r.shape) == (2, 64 * 384)
    p = ttnn.permute(dev_tensor(device, x), (0, 2, 1))
    assert_same_bits(out_of(p), cli.op("to-device", x).transpose(0, 2, 1))


def test_not_modelled_arguments_are_refused_by_name(device):
    a = dev_tensor(device, torch.randn(64, 64))
    sharded = ttnn.MemoryConfig(ttnn.TensorMemoryLayout.HEIGHT_SHARDED, ttnn.BufferType.L1)
    with pytest.raises(ttnn.NotModelled, match="sharded memory_config"):
        ttnn.matmul(a, a, memory_config=sharded)
    with pytest.raises(ttnn.NotModelled, match="sub_device_id"):
        ttnn.matmul(a, a, sub_device_id=1)
    with pytest.raises(mha.Error, match="TILE_LAYOUT"):
        ttnn.from_torch(torch.randn(4, 4), dtype=ttnn.bfloat8_b)
    ttnn.deallocate(a)
    with pytest.raises(mha.Error, match="deallocated"):
        ttnn.softmax(a)


def test_rand_draws_torch_generator_rounded_like_from_torch(device):
    torch.manual_seed(0)
    t = ttnn.rand((4, 64), dtype=ttnn.bfloat16, device=device)
    torch.manual_seed(0)
    assert_same_bits(ttnn.to_torch(t).float(), torch.rand(4, 64).bfloat16().float())
    a = ttnn.to_torch(ttnn.rand((8, 8), device=device, seed=5)).float()
    b = ttnn.to_torch(ttnn.rand((8, 8), device=device, seed=5)).float()
    assert_same_bits(a, b)
    assert float(a.min()) >= 0 and float(a.max()) < 1


def test_llama_head_ops(device):
    """tt_transformers' head split and concatenation: bf16 values move exactly."""
    torch.manual_seed(12)
    nh, nkv, d, s = 8, 2, 32, 64
    x = torch.randn(1, 1, s, (nh + 2 * nkv) * d).bfloat16().float()
    q, k, v = ttnn.experimental.nlp_create_qkv_heads(dev_tensor(device, x), num_heads=nh, num_kv_heads=nkv,
                                                     transpose_k_heads=False)
    parts = x[0, 0].split([nh * d, nkv * d, nkv * d], dim=-1)
    want = [p.reshape(s, n, d).permute(1, 0, 2).unsqueeze(0) for p, n in zip(parts, (nh, nkv, nkv))]
    for got, w in zip((q, k, v), want):
        assert_same_bits(out_of(got), w)
    back = ttnn.experimental.nlp_concat_heads(q)
    assert_same_bits(out_of(back), x[..., :nh * d])
