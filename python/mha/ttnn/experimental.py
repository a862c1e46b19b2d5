"""ttnn.experimental on tt-sim: the llama-style head ops (data movement),
rotary_embedding_llama (`mha op rotary-llama`) and the paged cache ops
(`mha op update-cache`, `mha op paged-fill-cache`)."""
from .. import Error
from .operations import moved, run_op
from .tensor import Tensor, require_device
from .types import TILE_LAYOUT, not_modelled


def nlp_create_qkv_heads(input_tensor, input_tensor_kv=None, *, num_heads, num_kv_heads=None, transpose_k_heads=True,
                         memory_config=None, output_tensors=None):
    """[b, 1, s, (nh + 2 nkv) dh] -> q [b, nh, s, dh], k [b, nkv, dh, s]
    (transpose_k_heads) or [b, nkv, s, dh], v [b, nkv, s, dh]."""
    op = "experimental.nlp_create_qkv_heads"
    if output_tensors is not None:
        not_modelled(op, "the argument output_tensors")
    require_device(op, input_tensor)
    nkv = num_kv_heads or num_heads
    x = input_tensor.values()
    if x.dim() != 4 or x.shape[1] != 1:
        raise Error(f"ttnn.{op}: expected input [batch, 1, seq, hidden], found {tuple(x.shape)}")
    if input_tensor_kv is not None:
        kv = input_tensor_kv.values()
        d = x.shape[-1] // num_heads
        q_part, (k_part, v_part) = x, kv.split(kv.shape[-1] // 2, dim=-1)
    else:
        d = x.shape[-1] // (num_heads + 2 * nkv)
        if d * (num_heads + 2 * nkv) != x.shape[-1]:
            raise Error(f"ttnn.{op}: hidden {x.shape[-1]} is not (num_heads + 2 num_kv_heads) x head_dim")
        q_part, k_part, v_part = x.split([num_heads * d, nkv * d, nkv * d], dim=-1)
    b, s = x.shape[0], x.shape[2]

    def heads(part, n):
        return part.reshape(b, s, n, d).permute(0, 2, 1, 3)

    k_vals = heads(k_part, nkv)
    return (moved(op, input_tensor, heads(q_part, num_heads), memory_config),
            moved(op, input_tensor, k_vals.transpose(-2, -1) if transpose_k_heads else k_vals, memory_config),
            moved(op, input_tensor, heads(v_part, nkv), memory_config))


def nlp_concat_heads(input_tensor, *, memory_config=None):
    """[b, nh, s, dh] -> [b, 1, s, nh dh]."""
    op = "experimental.nlp_concat_heads"
    require_device(op, input_tensor)
    v = input_tensor.values()
    if v.dim() != 4:
        raise Error(f"ttnn.{op}: expected [batch, heads, seq, head_dim], found {tuple(v.shape)}")
    b, h, s, d = v.shape
    return moved(op, input_tensor, v.permute(0, 2, 1, 3).reshape(b, 1, s, h * d), memory_config)


def rotary_embedding_llama(input_tensor, cos_cache, sin_cache, trans_mat, is_decode_mode=False, memory_config=None,
                           compute_kernel_config=None):
    return run_op("experimental.rotary_embedding_llama", "rotary-llama", [input_tensor, cos_cache, sin_cache, trans_mat],
                  memory_config=memory_config, compute_kernel_config=compute_kernel_config,
                  params={"is_decode_mode": bool(is_decode_mode)})


def rotary_embedding_llama_fused_qk(q_input_tensor, k_input_tensor, cos_cache, sin_cache, trans_mat,
                                    compute_kernel_config=None, row_major_QK=False):  # noqa: N803
    """Q's and K's decode rotations in one program (`mha op rotary-llama-fused-qk`): (q_out, k_out)."""
    op = "experimental.rotary_embedding_llama_fused_qk"
    if row_major_QK:
        not_modelled(op, "row_major_QK=True")
    both = run_op(op, "rotary-llama-fused-qk", [q_input_tensor, k_input_tensor, cos_cache, sin_cache, trans_mat],
                  compute_kernel_config=compute_kernel_config)
    nh = q_input_tensor.values().shape[2]
    v = both.values()
    return tuple(Tensor(part.contiguous(), both.dtype, TILE_LAYOUT, both._device, src.memory_config_)
                 for part, src in ((v[:, :, :nh], q_input_tensor), (v[:, :, nh:], k_input_tensor)))


def _update_params(op, update_idxs, update_idxs_tensor, share_cache, page_table, batch_offset, mesh_coords):
    """paged_update_cache's arguments (and the fused op's) as the op's params,
    refusing in one line what tt-sim does not model."""
    if share_cache:
        not_modelled(op, "share_cache=True")
    if mesh_coords is not None:
        not_modelled(op, "the argument mesh_coords")
    if batch_offset:
        not_modelled(op, f"batch_offset={batch_offset}")
    if update_idxs_tensor is not None:
        pos = [int(x) for x in update_idxs_tensor.values().reshape(-1).tolist()]
    elif update_idxs:
        pos = [int(x) for x in update_idxs]
    else:
        raise Error(f"ttnn.{op}: expected update_idxs (a list) or update_idxs_tensor")
    params = {"cur_pos": pos}
    if page_table is not None:
        params["page_table"] = page_table.values().tolist()
    return params


def paged_fused_update_cache(cache_tensor1, input_tensor1, cache_tensor2, input_tensor2, *, update_idxs=None,
                             update_idxs_tensor=None, share_cache=None, page_table=None, batch_offset=0,
                             compute_kernel_config=None, mesh_coords=None):
    """Both caches updated in one program (`mha op paged-fused-update-cache`), in place."""
    op = "experimental.paged_fused_update_cache"
    params = _update_params(op, update_idxs, update_idxs_tensor, share_cache, page_table, batch_offset, mesh_coords)
    out = run_op(op, "paged-fused-update-cache", [cache_tensor1, input_tensor1, cache_tensor2, input_tensor2],
                 compute_kernel_config=compute_kernel_config, params=params)
    both = out.values()
    cache_tensor1._assign(both[0].contiguous())
    cache_tensor2._assign(both[1].contiguous())
    return cache_tensor1, cache_tensor2


def _write_back(cache, out):
    """The cache ops write the cache in place, as on the device."""
    cache._assign(out._values, out._tiles)
    return cache


def paged_update_cache(cache_tensor, input_tensor, *, update_idxs=None, update_idxs_tensor=None, share_cache=None,
                       page_table=None, batch_offset=0, compute_kernel_config=None, mesh_coords=None):
    op = "experimental.paged_update_cache"
    params = _update_params(op, update_idxs, update_idxs_tensor, share_cache, page_table, batch_offset, mesh_coords)
    out = run_op(op, "update-cache", [cache_tensor, input_tensor], compute_kernel_config=compute_kernel_config,
                 params=params)
    return _write_back(cache_tensor, out)


def paged_fill_cache(cache_tensor, input_tensor, page_table, *, batch_idx=0, batch_idx_tensor=None):
    """User batch_idx's rows of input [1, nkv, s, dh] copied into the blocks its page table row
    names (cache [blocks, nkv, block_size, dh]), tile by tile: `mha op paged-fill-cache`. The input
    must already be in the cache's dtype (TT-NN's rule)."""
    if batch_idx_tensor is not None:
        batch_idx = int(batch_idx_tensor.values().reshape(-1)[0])
    out = run_op("experimental.paged_fill_cache", "paged-fill-cache", [cache_tensor, input_tensor],
                 params={"batch_idx": int(batch_idx), "page_table": page_table.values().tolist()})
    return _write_back(cache_tensor, out)


def _cache_op(op, cache_tensor, input_tensor, params, compute_kernel_config=None):
    out = run_op(op, "update-cache" if op == "update_cache" else "fill-cache", [cache_tensor, input_tensor],
                 compute_kernel_config=compute_kernel_config, params=params)
    return _write_back(cache_tensor, out)


def update_cache(cache, input, update_idx, batch_offset=0, *, compute_kernel_config=None):  # noqa: A002
    """ttnn.update_cache: input [1, nkv, users, dh] written at row update_idx."""
    return _cache_op("update_cache", cache, input, {"update_idx": int(update_idx), "batch_offset": int(batch_offset)},
                     compute_kernel_config)


def fill_cache(cache_tensor, input_tensor, batch_idx, update_idx=0):
    """ttnn.fill_cache: input [1, nkv, s, dh] into user batch_idx's rows."""
    return _cache_op("fill_cache", cache_tensor, input_tensor, {"batch_idx": int(batch_idx),
                                                               "update_idx": int(update_idx)})


