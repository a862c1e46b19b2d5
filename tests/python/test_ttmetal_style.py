"""tt-metal's decode-time op tests, written as tt-metal writes them (the
versions scripts/ttmetal_decode_tests.py follows: test_scaled_dot_product_
attention_decode.py, test_rotary_embedding_llama.py, test_update_cache.py,
test_paged_update_cache.py), and its chunked-prefill SDPA test, run through
the mha.ttnn.testing plugin: only
the imports differ (`import mha.ttnn as ttnn`, the helpers from
mha.ttnn.testing) and the shapes are cut to a test suite's minutes. The
bounds are the ones tt-metal asserts."""
import pytest
import torch

import mha.ttnn as ttnn
from mha.ttnn.testing import comp_allclose, comp_pcc


def nearest_n(x, n):
    return ((x + n - 1) // n) * n


def get_chunk_size(s):
    if s <= 128:
        return 32
    if s <= 256:
        return 256
    return 512


def scaled_dot_product_attention(q, k, v, attn_mask, scale):
    """torch.nn.functional.scaled_dot_product_attention (torch >= 2.0; Debian's torch is 1.13)."""
    return torch.softmax(q @ k.transpose(-1, -2) * scale + attn_mask, dim=-1) @ v


def run_test_sdpa_decode_single_iter(device, b, nh, nkv, s, d, dtype, grid_size, q_dtype=ttnn.bfloat16):
    compute_grid_size = device.compute_with_storage_grid_size()
    if grid_size[0] > compute_grid_size.x or grid_size[1] > compute_grid_size.y:
        pytest.skip(f"Need {grid_size} grid size to run this test but core grid is {compute_grid_size}")
    padded_num_heads = nearest_n(nh, n=32)
    torch.manual_seed(1234)
    compute_kernel_config = ttnn.WormholeComputeKernelConfig(
        math_fidelity=ttnn.MathFidelity.HiFi4, math_approx_mode=False, fp32_dest_acc_en=False, packer_l1_acc=False)
    dram_memcfg = ttnn.DRAM_MEMORY_CONFIG

    K = torch.randn(b, nkv, s, d)
    V = torch.randn(b, nkv, s, d)
    tt_K = ttnn.from_torch(K, device=device, dtype=dtype, layout=ttnn.TILE_LAYOUT, memory_config=dram_memcfg)
    tt_V = ttnn.from_torch(V, device=device, dtype=dtype, layout=ttnn.TILE_LAYOUT, memory_config=dram_memcfg)

    start_idx = s // 2
    scale = d ** -0.5
    k_chunk_size = get_chunk_size(start_idx)
    program_config = ttnn.SDPAProgramConfig(compute_with_storage_grid_size=ttnn.CoreCoord(*grid_size),
                                            q_chunk_size=padded_num_heads, k_chunk_size=k_chunk_size,
                                            exp_approx_mode=False)
    padded_layer_len = nearest_n(start_idx, n=k_chunk_size)

    Q = torch.randn(1, b, padded_num_heads, d)
    tt_Q = ttnn.from_torch(Q[:, :, :nh], device=device, dtype=q_dtype, layout=ttnn.TILE_LAYOUT,
                           memory_config=dram_memcfg)
    tt_back = ttnn.transformer.scaled_dot_product_attention_decode(
        tt_Q, tt_K, tt_V, cur_pos=[start_idx - 1 for _ in range(b)], scale=scale, program_config=program_config,
        compute_kernel_config=compute_kernel_config, memory_config=dram_memcfg)
    tt_back = ttnn.to_torch(tt_back)[:, :, :nh, :]

    Q_slice = Q[:, :, :nh, :].permute(1, 2, 0, 3)  # b, nh, 1, d
    K_slice = K[:, :, :padded_layer_len, :].repeat_interleave(nh // nkv, dim=1)
    V_slice = V[:, :, :padded_layer_len, :].repeat_interleave(nh // nkv, dim=1)
    attn_mask = torch.zeros((b, nh, 1, padded_layer_len))
    attn_mask[:, :, :, start_idx:] = torch.finfo(torch.float32).min
    expect = scaled_dot_product_attention(Q_slice, K_slice, V_slice, attn_mask, scale=scale)
    expect = expect.squeeze(2).unsqueeze(0)

    min_pcc = 0.99
    if grid_size[0] * grid_size[1] // b == 1:
        min_pcc = 0.90
    if q_dtype == ttnn.bfloat8_b:
        min_pcc = 0.98
    min_pcc = 0.97 if dtype == ttnn.bfloat4_b else min_pcc
    out_pass, out_pcc = comp_pcc(expect, tt_back.float(), min_pcc)
    assert out_pass, out_pcc


@pytest.mark.parametrize("dtype, q_dtype", [[ttnn.bfloat16, ttnn.bfloat16], [ttnn.bfloat8_b, ttnn.bfloat16],
                                            [ttnn.bfloat4_b, ttnn.bfloat16]],
                         ids=["all_bfp16", "kv_bfp8", "kv_bfp4"])
@pytest.mark.parametrize("b, nh, nkv, s, d, grid_size", ([8, 8, 1, 2048, 128, (8, 8)],))
def test_sdpa_decode(device, b, nh, nkv, s, d, dtype, grid_size, q_dtype):
    run_test_sdpa_decode_single_iter(device, b, nh, nkv, s, d, dtype, grid_size, q_dtype)


# --- rotary_embedding_llama --------------------------------------------------------------

def precompute_freqs(dim, end, theta=10000.0):
    freqs = 1.0 / (theta ** (torch.arange(0, dim, 2)[: (dim // 2)].float() / dim))
    t = torch.arange(end, dtype=torch.float32)
    freqs = torch.outer(t, freqs).float()
    return torch.cos(freqs), torch.sin(freqs)


def gather_cos_sin(position_ids, cos, sin):
    position_id_expanded = position_ids.unsqueeze(1).expand(-1, cos.shape[-1])
    cos = cos.gather(0, position_id_expanded)
    sin = sin.gather(0, position_id_expanded)
    cos = torch.stack([cos, cos], dim=-1).flatten(-2).unsqueeze(0).unsqueeze(0)
    sin = torch.stack([sin, sin], dim=-1).flatten(-2).unsqueeze(0).unsqueeze(0)
    return cos, sin


def get_rot_transformation_mat(dhead):
    rot_emb_matrix = torch.zeros(1, 1, dhead, dhead)
    rot_emb_matrix[..., torch.arange(0, dhead, 2), torch.arange(1, dhead, 2)] = 1
    rot_emb_matrix[..., torch.arange(1, dhead, 2), torch.arange(0, dhead, 2)] = -1
    return rot_emb_matrix


def apply_rotary_emb(xq, cos, sin):  # interleaved pairs: (x0, x1) -> (x0 c - x1 s, x1 c + x0 s)
    x0, x1 = xq[..., 0::2], xq[..., 1::2]
    c, s = cos[..., 0::2], sin[..., 0::2]
    return torch.stack([x0 * c - x1 * s, x1 * c + x0 * s], dim=-1).flatten(-2)


@pytest.mark.parametrize("batch, seq_len", ((1, 128), (1, 256)))
@pytest.mark.parametrize("n_heads, n_kv_heads, head_dim", ((8, 1, 64), (8, 1, 128)))
def test_rotary_embedding_llama(device, batch, seq_len, n_heads, n_kv_heads, head_dim):
    torch.manual_seed(0)
    max_seq_len = max(4096, seq_len)
    inp = [torch.rand(batch, n_heads, seq_len, head_dim) * 2 - 1,
           torch.rand(batch, n_kv_heads, seq_len, head_dim) * 2 - 1]
    cos, sin = precompute_freqs(head_dim, max_seq_len * 2)
    cos, sin = gather_cos_sin(torch.arange(seq_len), cos, sin)
    tt_cos = ttnn.from_torch(cos, device=device, dtype=ttnn.bfloat16, layout=ttnn.TILE_LAYOUT)
    tt_sin = ttnn.from_torch(sin, device=device, dtype=ttnn.bfloat16, layout=ttnn.TILE_LAYOUT)
    trans_mat = ttnn.from_torch(get_rot_transformation_mat(32), device=device, dtype=ttnn.bfloat16,
                                layout=ttnn.TILE_LAYOUT)
    compute_kernel_config = ttnn.WormholeComputeKernelConfig(math_fidelity=ttnn.MathFidelity.HiFi4,
                                                             math_approx_mode=True, fp32_dest_acc_en=(head_dim <= 128),
                                                             packer_l1_acc=True)
    for x in inp:
        tt_x = ttnn.from_torch(x, device=device, dtype=ttnn.bfloat16, layout=ttnn.TILE_LAYOUT)
        tt_out = ttnn.experimental.rotary_embedding_llama(tt_x, tt_cos, tt_sin, trans_mat,
                                                          compute_kernel_config=compute_kernel_config)
        expect = apply_rotary_emb(x, cos, sin)
        does_pass, pcc_message = comp_pcc(expect, ttnn.to_torch(tt_out).float(), 0.9997)
        assert does_pass, pcc_message


# --- update_cache / paged_update_cache ------------------------------------------------------

@pytest.mark.parametrize("head_dim", [64])
@pytest.mark.parametrize("max_seq_len", [512])
@pytest.mark.parametrize("num_users", [8, 16])
@pytest.mark.parametrize("num_heads", [1, 4])
@pytest.mark.parametrize("input_dtype", [ttnn.bfloat16, ttnn.bfloat8_b])
@pytest.mark.parametrize("cache_idx", [0, 127, 300])
@pytest.mark.parametrize("batch_offset", [0, 16])
@pytest.mark.parametrize("cache_dtype", [ttnn.bfloat16, ttnn.bfloat8_b])
def test_update_cache_decode(device, cache_idx, head_dim, max_seq_len, num_users, batch_offset, num_heads,
                             input_dtype, cache_dtype):
    if num_users + batch_offset > 32:
        pytest.skip("Batch offset + num_users must be <= 32")
    torch.manual_seed(0)
    cache = torch.randn([num_users, num_heads, max_seq_len, head_dim]).bfloat16().float()
    cachett = ttnn.from_torch(cache, dtype=cache_dtype, layout=ttnn.TILE_LAYOUT, device=device)
    x = torch.randn([num_users, num_heads, 1, head_dim]).bfloat16().float()
    x_new = x.clone().permute(2, 1, 0, 3)  # [1, heads, users, head_dim]
    x_pad = torch.nn.functional.pad(x_new, (0, 0, batch_offset, 32 - num_users - batch_offset), "constant", 0)
    xt = ttnn.from_torch(x_pad, dtype=input_dtype, layout=ttnn.TILE_LAYOUT, device=device)
    if input_dtype == ttnn.bfloat16 and cache_dtype == input_dtype:
        x = x.to(torch.bfloat16).float()
    cachett = ttnn.update_cache(cachett, xt, cache_idx, batch_offset=batch_offset)
    cache[0:num_users, 0:num_heads, cache_idx:cache_idx + 1, 0:x.shape[-1]] = x

    tt_got_back = ttnn.to_torch(cachett).float()
    tt_updated_slice = tt_got_back[0:num_users, 0:num_heads, cache_idx:cache_idx + 1, 0:x.shape[-1]]
    if input_dtype == ttnn.bfloat16 and cache_dtype == input_dtype:
        eq_cache, output_cache = comp_allclose(cache, tt_got_back, 0, 0)  # checks the entire kv cache
        eq_update, output_update = comp_allclose(x, tt_updated_slice, 0, 0)  # checks the updated parts
    else:
        eq_cache, output_cache = comp_pcc(cache, tt_got_back)
        eq_update, output_update = comp_pcc(x, tt_updated_slice)
    assert eq_cache and eq_update, f"{output_cache}; {output_update}"


@pytest.mark.parametrize("num_users", [8])
@pytest.mark.parametrize("num_heads", [1, 8])
@pytest.mark.parametrize("cache_dtype", [ttnn.bfloat16, ttnn.bfloat8_b])
def test_paged_update_cache(device, num_users, num_heads, cache_dtype):
    torch.manual_seed(0)
    max_seq_len, head_dim = 256, 64
    cache = torch.randn([num_users, num_heads, max_seq_len, head_dim]).bfloat16().float()
    cachett = ttnn.from_torch(cache, dtype=cache_dtype, layout=ttnn.TILE_LAYOUT, device=device)
    x = torch.randn([1, num_users, num_heads, head_dim]).bfloat16().float()
    xt = ttnn.from_torch(x, dtype=ttnn.bfloat16, layout=ttnn.TILE_LAYOUT, device=device)
    update_idxs = [(7 * i + 3) % max_seq_len for i in range(num_users)]
    ttnn.experimental.paged_update_cache(cachett, xt, update_idxs=update_idxs)
    for i, idx in enumerate(update_idxs):
        cache[i, :, idx, :] = x[0, i]
    got = ttnn.to_torch(cachett).float()
    if cache_dtype == ttnn.bfloat16:
        eq, output = comp_allclose(cache, got, 0, 0)
    else:
        eq, output = comp_pcc(cache, got)
    assert eq, output


def fa_rand(*shape):
    normal_1 = torch.randn(shape)
    normal_2 = torch.randn(shape) * 10
    bernoulli = torch.bernoulli(torch.full(shape, 0.001))
    return normal_1 + normal_2 * bernoulli


def run_test_chunked_sdpa(device, b, nh, nkv, s, d, q_chunk_size, k_chunk_size, prefill_chunk_size, page_block_size,
                          q_dtype, k_dtype):
    """tt-metal's run_test_chunked_sdpa (tests/ttnn/unit_tests/operations/sdpa, the version with
    exp_approx_mode=False and TT-NN's default compute config), with from_torch where it builds
    ttnn.Tensor(torch_tensor, dtype) directly and the float64-free reference of this file."""
    program_config = ttnn.SDPAProgramConfig(compute_with_storage_grid_size=device.compute_with_storage_grid_size(),
                                            q_chunk_size=q_chunk_size, k_chunk_size=k_chunk_size,
                                            exp_approx_mode=False)
    compute_kernel_config = ttnn.WormholeComputeKernelConfig(math_fidelity=ttnn.MathFidelity.HiFi2,
                                                             math_approx_mode=True, fp32_dest_acc_en=False,
                                                             packer_l1_acc=False)
    Q, K, V = fa_rand(b, nh, s, d), fa_rand(b, nkv, s, d), fa_rand(b, nkv, s, d)
    K_repeated = torch.cat([K[:, i:i + 1].repeat(1, nh // nkv, 1, 1) for i in range(nkv)], dim=1)
    V_repeated = torch.cat([V[:, i:i + 1].repeat(1, nh // nkv, 1, 1) for i in range(nkv)], dim=1)
    causal = torch.triu(torch.full((s, s), float("-inf")), diagonal=1)
    gt = scaled_dot_product_attention(Q, K_repeated, V_repeated, causal, d ** -0.5)
    num_prefill_chunks = s // prefill_chunk_size
    max_num_blocks_per_seq = s // page_block_size
    max_num_blocks = b * max_num_blocks_per_seq
    permutation = torch.randperm(max_num_blocks)
    page_table = torch.argsort(permutation).reshape(b, max_num_blocks_per_seq)

    def page_cache(cache):
        paged = cache.reshape(b, nkv, max_num_blocks_per_seq, page_block_size, d).transpose(1, 2)
        return paged.reshape(max_num_blocks, nkv, page_block_size, d)[permutation]

    tt_paged_K = ttnn.from_torch(page_cache(K), dtype=k_dtype, layout=ttnn.TILE_LAYOUT, device=device)
    tt_paged_V = ttnn.from_torch(page_cache(V), dtype=k_dtype, layout=ttnn.TILE_LAYOUT, device=device)
    page_table_tt = ttnn.from_torch(page_table, dtype=ttnn.int32, device=device)
    for chunk_idx in range(num_prefill_chunks):
        Q_chunk = Q[:, :, chunk_idx * prefill_chunk_size:(chunk_idx + 1) * prefill_chunk_size]
        tt_Q_chunk = ttnn.from_torch(Q_chunk, dtype=q_dtype, layout=ttnn.TILE_LAYOUT, device=device)
        chunk_start_idx = chunk_idx * prefill_chunk_size
        tt_back = ttnn.transformer.chunked_scaled_dot_product_attention(
            tt_Q_chunk, tt_paged_K, tt_paged_V, page_table_tt, chunk_start_idx, program_config=program_config,
            compute_kernel_config=compute_kernel_config)
        tt_back = ttnn.to_torch(tt_back).float()
        gt_chunk = gt[:, :, chunk_idx * prefill_chunk_size:(chunk_idx + 1) * prefill_chunk_size]
        out_pass, out_pcc = comp_pcc(gt_chunk, tt_back, 0.998)
        assert out_pass, out_pcc


@pytest.mark.parametrize("q_dtype", [ttnn.bfloat16])
@pytest.mark.parametrize("k_dtype", [ttnn.bfloat8_b])
@pytest.mark.parametrize("q_chunk_size, k_chunk_size", [(128, 128), (128, 256)])
@pytest.mark.parametrize("prefill_chunk_size", [512])
@pytest.mark.parametrize("page_block_size", [64])
@pytest.mark.parametrize("b, nh, nkv, s, d", [[1, 8, 1, 1024, 128]])  # Llama2-70B's heads; s cut from 16K
def test_sdpa_chunked(device, b, nh, nkv, s, d, q_chunk_size, k_chunk_size, prefill_chunk_size, page_block_size,
                      q_dtype, k_dtype):
    torch.manual_seed(1234)
    run_test_chunked_sdpa(device, b, nh, nkv, s, d, q_chunk_size, k_chunk_size, prefill_chunk_size, page_block_size,
                          q_dtype, k_dtype)
