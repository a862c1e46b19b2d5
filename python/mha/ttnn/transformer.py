"""ttnn.transformer on tt-sim: the head split / concatenation (data
movement), attention_softmax_ (scale, mask, softmax: the ops the fused seed
pipeline runs), and SDPA prefill, chunked prefill and decode (`mha op sdpa`,
`chunked-sdpa`, `sdpa-decode`), and their multi-head latent attention forms
(`flash-mla-prefill`, `flash-mla-decode`: V read from K's first head_dim_v
columns)."""
from .. import Error
from .._arrays import torch_module
from .operations import add, moved, multiply, run_op, softmax
from .tensor import Tensor, require_device
from .types import ROW_MAJOR_LAYOUT, SDPAProgramConfig, not_modelled


def split_query_key_value_and_split_heads(input_tensor, kv_input_tensor=None, *, num_heads, num_kv_heads=None,
                                          transpose_key=True, memory_config=None):
    """[b, s, (nh + 2 nkv) dh] -> q [b, nh, s, dh], k [b, nkv, dh, s]
    (transpose_key) or [b, nkv, s, dh], v [b, nkv, s, dh]."""
    op = "transformer.split_query_key_value_and_split_heads"
    require_device(op, input_tensor)
    nkv = num_kv_heads or num_heads
    x = input_tensor.values()
    if x.dim() != 3:
        raise Error(f"ttnn.{op}: expected input [batch, seq, hidden], found {tuple(x.shape)}")
    if kv_input_tensor is not None:
        q_part, kv = x, kv_input_tensor.values()
        width = q_part.shape[-1] // num_heads
        k_part, v_part = kv.split(kv.shape[-1] // 2, dim=-1)
    else:
        width = x.shape[-1] // (num_heads + 2 * nkv)
        if width * (num_heads + 2 * nkv) != x.shape[-1]:
            raise Error(f"ttnn.{op}: hidden {x.shape[-1]} is not (num_heads + 2 num_kv_heads) x head_size")
        q_part, k_part, v_part = x.split([num_heads * width, nkv * width, nkv * width], dim=-1)
    b = x.shape[0]

    def heads(part, n):
        return part.reshape(b, part.shape[1], n, width).permute(0, 2, 1, 3)

    q = moved(op, input_tensor, heads(q_part, num_heads), memory_config, program=f"ttnn.{op}")
    k_vals = heads(k_part, nkv)
    k = moved(op, input_tensor, k_vals.transpose(-2, -1) if transpose_key else k_vals, memory_config,
              program="ttnn.permute")
    v = moved(op, input_tensor, heads(v_part, nkv), memory_config, program="ttnn.permute")
    return q, k, v


def concatenate_heads(input_tensor, *, memory_config=None):
    """[b, nh, s, dh] -> [b, s, nh dh]."""
    op = "transformer.concatenate_heads"
    require_device(op, input_tensor)
    v = input_tensor.values()
    if v.dim() != 4:
        raise Error(f"ttnn.{op}: expected [batch, heads, seq, head_size], found {tuple(v.shape)}")
    b, h, s, d = v.shape
    return moved(op, input_tensor, v.permute(0, 2, 1, 3).reshape(b, s, h * d), memory_config, program=f"ttnn.{op}")


def attention_softmax_(input_tensor, *, head_size=None, attention_mask=None, program_config=None, causal_mask=False,
                       memory_config=None):
    """Scale by 1/sqrt(head_size), add the mask, softmax over the last dim:
    the three device operations the fused seed pipeline runs (tt-sim's
    ttnn.multiply, ttnn.add, ttnn.softmax). In place: input_tensor holds the
    result afterwards, as in TT-NN."""
    if causal_mask:
        not_modelled("transformer.attention_softmax_", "causal_mask=True")
    if program_config is not None:
        not_modelled("transformer.attention_softmax_", "the argument program_config")
    x = input_tensor
    if head_size is not None:
        x = multiply(x, 1.0 / (head_size ** 0.5))
    if attention_mask is not None:
        x = add(x, attention_mask)
    out = softmax(x, dim=-1, memory_config=memory_config)
    input_tensor._assign(out._values, out._tiles)
    input_tensor.dtype = out.dtype
    return input_tensor


def attention_softmax(input_tensor, *, head_size=None, attention_mask=None, program_config=None, causal_mask=False,
                      memory_config=None):
    x = Tensor(input_tensor.values(), input_tensor.dtype, input_tensor.layout, input_tensor._device,
               input_tensor.memory_config_)
    return attention_softmax_(x, head_size=head_size, attention_mask=attention_mask, program_config=program_config,
                              causal_mask=causal_mask, memory_config=memory_config)


def _program(op, program_config, decode):
    if program_config is None:
        return {}
    if not isinstance(program_config, SDPAProgramConfig):
        raise Error(f"ttnn.{op}: program_config: expected a ttnn.SDPAProgramConfig")
    if program_config.sub_core_grids is not None:
        not_modelled(op, "program_config.sub_core_grids")
    grid = program_config.compute_with_storage_grid_size
    p = {"k_chunk_size": program_config.k_chunk_size, "exp_approx_mode": bool(program_config.exp_approx_mode),
         "core_grid": [grid.y, grid.x]}
    if decode:
        p["max_cores_per_head_batch"] = program_config.max_cores_per_head_batch
    else:
        p["q_chunk_size"] = program_config.q_chunk_size
    return p


def _sink(attention_sink):
    if attention_sink is None:
        return None
    v = attention_sink.values() if isinstance(attention_sink, Tensor) else torch_module().as_tensor(attention_sink)
    return [float(x) for x in v.reshape(-1).tolist()]


def scaled_dot_product_attention(input_tensor_q, input_tensor_k, input_tensor_v, *, attn_mask=None, is_causal=True,
                                 scale=None, sliding_window_size=None, memory_config=None, program_config=None,
                                 compute_kernel_config=None, attention_sink=None):
    op = "transformer.scaled_dot_product_attention"
    params = _program(op, program_config, decode=False)
    params.update({"is_causal": bool(is_causal), "scale": scale, "sliding_window_size": sliding_window_size,
                   "attention_sink": _sink(attention_sink)})
    tensors = [input_tensor_q, input_tensor_k, input_tensor_v] + ([attn_mask] if attn_mask is not None else [])
    return run_op(op, "sdpa", tensors, memory_config=memory_config, compute_kernel_config=compute_kernel_config,
                  params={k: v for k, v in params.items() if v is not None})


def _positions(op, cur_pos, cur_pos_tensor):
    if cur_pos_tensor is not None:
        return [int(x) for x in cur_pos_tensor.values().reshape(-1).tolist()]
    if not cur_pos:
        raise Error(f"ttnn.{op}: expected cur_pos (a list) or cur_pos_tensor")
    return [int(x) for x in cur_pos]


def _decode(op, q, k, v, page_table, is_causal, attn_mask, cur_pos, cur_pos_tensor, attention_sink, scale,
            sliding_window_size, memory_config, program_config, compute_kernel_config, head_dim_v=None):
    """SDPA decode, or with head_dim_v its use_mla form (V is K's first
    head_dim_v columns; a separate V tensor is not modelled). is_causal=False
    (no positions) and attn_mask run at tt_metal latest; the 2024 profile
    refuses them in one line (the decode device operation)."""
    if head_dim_v is not None and v is not None:
        not_modelled(op, "a separate input_tensor_v (V read from K is what is modelled)")
    params = _program(op, program_config, decode=True)
    params.update({"cur_pos": _positions(op, cur_pos, cur_pos_tensor) if is_causal else None,
                   "is_causal": None if is_causal else False, "scale": scale,
                   "sliding_window_size": sliding_window_size, "attention_sink": _sink(attention_sink),
                   "head_dim_v": head_dim_v})
    if page_table is not None:
        params["page_table"] = page_table.values().tolist()
    name, tensors = ("flash-mla-decode", [q, k]) if head_dim_v is not None else ("sdpa-decode", [q, k, v])
    if attn_mask is not None:
        tensors.append(attn_mask)
    return run_op(op, name, tensors, memory_config=memory_config, compute_kernel_config=compute_kernel_config,
                  params={key: val for key, val in params.items() if val is not None})


def scaled_dot_product_attention_decode(input_tensor_q, input_tensor_k, input_tensor_v, *, is_causal=True,
                                        attn_mask=None, cur_pos=None, cur_pos_tensor=None, attention_sink=None,
                                        scale=None, sliding_window_size=None, memory_config=None, program_config=None,
                                        compute_kernel_config=None):
    return _decode("transformer.scaled_dot_product_attention_decode", input_tensor_q, input_tensor_k, input_tensor_v,
                   None, is_causal, attn_mask, cur_pos, cur_pos_tensor, attention_sink, scale, sliding_window_size,
                   memory_config, program_config, compute_kernel_config)


def paged_scaled_dot_product_attention_decode(input_tensor_q, input_tensor_k, input_tensor_v, *, page_table_tensor,
                                              is_causal=True, attn_mask=None, cur_pos_tensor=None, attention_sink=None,
                                              scale=None, sliding_window_size=None, memory_config=None,
                                              program_config=None, compute_kernel_config=None):
    return _decode("transformer.paged_scaled_dot_product_attention_decode", input_tensor_q, input_tensor_k,
                   input_tensor_v, page_table_tensor, is_causal, attn_mask, None, cur_pos_tensor, attention_sink,
                   scale, sliding_window_size, memory_config, program_config, compute_kernel_config)


def chunked_scaled_dot_product_attention(input_tensor_q, input_tensor_k, input_tensor_v, page_table_tensor,
                                         chunk_start_idx, *, scale=None, memory_config=None, program_config=None,
                                         compute_kernel_config=None):
    """Prefill of a query chunk (the positions chunk_start_idx.. of each
    user) against the paged K/V cache, causal: `mha op chunked-sdpa`."""
    op = "transformer.chunked_scaled_dot_product_attention"
    require_device(op, page_table_tensor)
    if page_table_tensor.dtype.name != "int32":
        raise Error(f"ttnn.{op}: the page table must be int32 (TT-NN's check), found {page_table_tensor.dtype.name}")
    if page_table_tensor.layout != ROW_MAJOR_LAYOUT:
        raise Error(f"ttnn.{op}: the page table must be row major (TT-NN's check), found {page_table_tensor.layout.name}")
    if isinstance(chunk_start_idx, bool) or not isinstance(chunk_start_idx, int):
        raise Error(f"ttnn.{op}: chunk_start_idx: expected an int, found {chunk_start_idx!r}")
    params = _program(op, program_config, decode=False)
    params.update({"scale": scale, "chunk_start_idx": chunk_start_idx,
                   "page_table": page_table_tensor.values().tolist()})
    return run_op(op, "chunked-sdpa", [input_tensor_q, input_tensor_k, input_tensor_v], memory_config=memory_config,
                  compute_kernel_config=compute_kernel_config,
                  params={k: v for k, v in params.items() if v is not None})


def flash_mla_prefill(input_tensor_q, input_tensor_k, head_dim_v, *, attn_mask=None, is_causal=True, scale=None,
                      memory_config=None, program_config=None, compute_kernel_config=None):
    """Multi-head latent attention prefill: SDPA with V = K's first
    head_dim_v columns, read from K's tiles (`mha op flash-mla-prefill`)."""
    op = "transformer.flash_mla_prefill"
    params = _program(op, program_config, decode=False)
    params.update({"head_dim_v": int(head_dim_v), "is_causal": bool(is_causal), "scale": scale})
    tensors = [input_tensor_q, input_tensor_k] + ([attn_mask] if attn_mask is not None else [])
    return run_op(op, "flash-mla-prefill", tensors, memory_config=memory_config,
                  compute_kernel_config=compute_kernel_config,
                  params={k: v for k, v in params.items() if v is not None})


def chunked_flash_mla_prefill(input_tensor_q, input_tensor_k, head_dim_v, page_table_tensor, chunk_start_idx, *,
                              scale=None, memory_config=None, program_config=None, compute_kernel_config=None):
    """Chunked prefill over the paged latent cache with V = K's first
    head_dim_v columns: `mha op chunked-flash-mla-prefill`."""
    op = "transformer.chunked_flash_mla_prefill"
    require_device(op, page_table_tensor)
    if page_table_tensor.dtype.name != "int32":
        raise Error(f"ttnn.{op}: the page table must be int32 (TT-NN's check), found {page_table_tensor.dtype.name}")
    if isinstance(chunk_start_idx, bool) or not isinstance(chunk_start_idx, int):
        raise Error(f"ttnn.{op}: chunk_start_idx: expected an int, found {chunk_start_idx!r}")
    params = _program(op, program_config, decode=False)
    params.update({"scale": scale, "chunk_start_idx": chunk_start_idx, "head_dim_v": int(head_dim_v),
                   "page_table": page_table_tensor.values().tolist()})
    return run_op(op, "chunked-flash-mla-prefill", [input_tensor_q, input_tensor_k], memory_config=memory_config,
                  compute_kernel_config=compute_kernel_config,
                  params={k: v for k, v in params.items() if v is not None})


def flash_multi_latent_attention_decode(input_tensor_q, input_tensor_k, input_tensor_v=None, *, head_dim_v,
                                        is_causal=True, attn_mask=None, cur_pos=None, cur_pos_tensor=None,
                                        attention_sink=None, scale=None, sliding_window_size=None, memory_config=None,
                                        program_config=None, compute_kernel_config=None):
    return _decode("transformer.flash_multi_latent_attention_decode", input_tensor_q, input_tensor_k, input_tensor_v,
                   None, is_causal, attn_mask, cur_pos, cur_pos_tensor, attention_sink, scale, sliding_window_size,
                   memory_config, program_config, compute_kernel_config, int(head_dim_v))


def paged_flash_multi_latent_attention_decode(input_tensor_q, input_tensor_k, input_tensor_v=None, *, head_dim_v,
                                              page_table_tensor, is_causal=True, attn_mask=None, cur_pos_tensor=None,
                                              attention_sink=None, scale=None, sliding_window_size=None,
                                              memory_config=None, program_config=None, compute_kernel_config=None):
    return _decode("transformer.paged_flash_multi_latent_attention_decode", input_tensor_q, input_tensor_k,
                   input_tensor_v, page_table_tensor, is_causal, attn_mask, None, cur_pos_tensor, attention_sink,
                   scale, sliding_window_size, memory_config, program_config, compute_kernel_config, int(head_dim_v))
