#!/usr/bin/python3
"""PyTorch as the oracle for `mha run`.

Reads the same JSON config as `mha run --config FILE` (--config/--out may
repeat in pairs), builds the variant's
seed module in PyTorch as the seed notebook writes it, and writes to --out:
  weights.safetensors  the module's state_dict (float32, as torch holds it)
  output.npy           the forward output
  attn_weights.npy     the attention weights, when the module returns them

--dtype float64 runs the module and its inputs in float64 (same float32
weights and inputs, widened), the oracle for mha's float64 reference backend;
--dtype once applies to every --config, or it repeats, one per --config.

Run with /usr/bin/python3 (torch 1.13 + numpy).
"""
import argparse
import json
import math
import os
import struct

import numpy as np
import torch
from torch import nn
import torch.nn.functional as F


# --- seed 000 / 003: Build an LLM From Scratch ------------------------------
# Seed 000's CausalAttention computes keys with W_query and throws away its
# masked_fill; mha runs the intended layer, so both are fixed here too.

class CausalAttention(nn.Module):
  def __init__(self, d_in, d_out, context_length, dropout, qkv_bias=False):
    super().__init__()
    self.d_out = d_out
    self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
    self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
    self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)
    self.dropout = nn.Dropout(dropout)
    self.mask = torch.triu(torch.ones(context_length, context_length), diagonal=1)

  def forward(self, x):
    b, num_tokens, d_in = x.shape
    keys = self.W_key(x)
    queries = self.W_query(x)
    values = self.W_value(x)
    attn_scores = queries @ keys.transpose(1, 2)
    attn_scores.masked_fill_(self.mask.bool()[:num_tokens, :num_tokens], -torch.inf)
    attn_weights = torch.softmax(attn_scores / keys.shape[-1]**0.5, dim=-1)
    attn_weights = self.dropout(attn_weights)
    return attn_weights @ values


class MultiHeadAttentionWrapper(nn.Module):
  def __init__(self, d_in, d_out, context_length, dropout, num_heads, qkv_bias=False):
    super().__init__()
    self.heads = nn.ModuleList(
      [CausalAttention(d_in, d_out, context_length, dropout, qkv_bias) for _ in range(num_heads)])

  def forward(self, x):
    return torch.cat([head(x) for head in self.heads], dim=-1)


class MultiHeadAttention(nn.Module):
  def __init__(self, d_in, d_out, context_length, dropout, num_heads, qkv_bias=False):
    super().__init__()
    self.d_out = d_out
    self.num_heads = num_heads
    self.head_dim = d_out // num_heads
    self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
    self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
    self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)
    self.out_proj = nn.Linear(d_out, d_out)
    self.dropout = nn.Dropout(dropout)
    self.mask = torch.triu(torch.ones(context_length, context_length), diagonal=1)

  def forward(self, x):
    b, num_tokens, d_in = x.shape
    keys = self.W_key(x).view(b, num_tokens, self.num_heads, self.head_dim).transpose(1, 2)
    queries = self.W_query(x).view(b, num_tokens, self.num_heads, self.head_dim).transpose(1, 2)
    values = self.W_value(x).view(b, num_tokens, self.num_heads, self.head_dim).transpose(1, 2)
    attn_scores = queries @ keys.transpose(2, 3)
    attn_scores.masked_fill_(self.mask.bool()[:num_tokens, :num_tokens], -torch.inf)
    attn_weights = torch.softmax(attn_scores / keys.shape[-1] ** 0.5, dim=-1)
    attn_weights = self.dropout(attn_weights)
    context_vec = torch.transpose((attn_weights @ values), 1, 2)
    context_vec = context_vec.contiguous().view(b, num_tokens, self.d_out)
    return self.out_proj(context_vec)


# Seed 003 spells the same modules with its own argument and weight names
# (W_q, output_projection) and registers the mask as a buffer, so exports of
# it carry a `mask` entry. The tests export these to check mha loads them.

class CausalAttention003(nn.Module):
    def __init__(self, dimension_inputs, dimension_outputs, context_length, dropout, qkv_bias=False):
        super().__init__()
        self.dimension_outputs = dimension_outputs
        self.W_q = nn.Linear(dimension_inputs, dimension_outputs, bias=qkv_bias)
        self.W_k = nn.Linear(dimension_inputs, dimension_outputs, bias=qkv_bias)
        self.W_v = nn.Linear(dimension_inputs, dimension_outputs, bias=qkv_bias)
        self.dropout = nn.Dropout(dropout)
        self.register_buffer("mask", torch.triu(torch.ones(context_length, context_length), diagonal=1))

    def forward(self, input_vectors):
        batch_size, number_of_tokens, dimension_inputs = input_vectors.shape
        queries = self.W_q(input_vectors)
        keys = self.W_k(input_vectors)
        values = self.W_v(input_vectors)
        attention_scores = queries @ keys.transpose(1, 2)
        attention_scores.masked_fill_(self.mask.bool()[:number_of_tokens, :number_of_tokens], -torch.inf)
        dimension_keys = keys.shape[-1]
        attention_weights = torch.softmax(attention_scores / (dimension_keys ** 0.5), dim=-1)
        attention_weights = self.dropout(attention_weights)
        return attention_weights @ values

class MultiHeadAttentionWrapper003(nn.Module):
    def __init__(self, dimensions_in, dimensions_out, context_length, dropout, num_heads, qkv_bias=False):
        super().__init__()
        self.heads = nn.ModuleList(
            [CausalAttention003(dimensions_in, dimensions_out, context_length, dropout, qkv_bias)
             for _ in range(num_heads)])

    def forward(self, x):
        return torch.cat([head(x) for head in self.heads], dim=-1)

class MultiHeadAttention003(nn.Module):
    def __init__(self, dimension_inputs, dimension_outputs, context_length, dropout, num_heads, qkv_bias=False):
        super().__init__()
        assert (dimension_outputs % num_heads == 0)
        self.dimension_outputs = dimension_outputs
        self.num_heads = num_heads
        self.head_dimension = dimension_outputs // num_heads
        self.W_query = nn.Linear(dimension_inputs, dimension_outputs, bias=qkv_bias)
        self.W_key = nn.Linear(dimension_inputs, dimension_outputs, bias=qkv_bias)
        self.W_value = nn.Linear(dimension_inputs, dimension_outputs, bias=qkv_bias)
        self.output_projection = nn.Linear(dimension_outputs, dimension_outputs)
        self.dropout = nn.Dropout(dropout)
        self.register_buffer("mask", torch.triu(torch.ones(context_length, context_length), diagonal=1))

    def forward(self, input_vectors):
        batch_size, number_of_tokens, dimension_inputs = input_vectors.shape
        queries = self.W_query(input_vectors)
        keys = self.W_key(input_vectors)
        values = self.W_value(input_vectors)
        split = (batch_size, number_of_tokens, self.num_heads, self.head_dimension)
        keys = keys.view(split).transpose(1, 2)
        values = values.view(split).transpose(1, 2)
        queries = queries.view(split).transpose(1, 2)
        attention_scores = queries @ keys.transpose(2, 3)
        attention_scores.masked_fill_(self.mask.bool()[:number_of_tokens, :number_of_tokens], -torch.inf)
        attention_weights = torch.softmax(attention_scores / (keys.shape[-1] ** 0.5), dim=-1)
        attention_weights = self.dropout(attention_weights)
        context_vectors = (attention_weights @ values).transpose(1, 2)
        context_vectors = context_vectors.contiguous().view(batch_size, number_of_tokens, self.dimension_outputs)
        return self.output_projection(context_vectors)


# --- seed 001: The AiEdge newsletter ----------------------------------------

class AiEdgeMultiHeadAttention(nn.Module):  # the seed's MultiHeadAttention
  def __init__(self, d_model, n_head):
    super().__init__()
    if d_model % n_head != 0:
      raise ValueError('d_model should be divisible by n_head ...')
    self.n_head = n_head
    self.d_model = d_model
    self.d_head = d_model // n_head
    self.Q = nn.Linear(d_model, d_model)
    self.K = nn.Linear(d_model, d_model)
    self.V = nn.Linear(d_model, d_model)
    self.O = nn.Linear(d_model, d_model)

  def forward(self, x):
    batch_size, seq_len, d_model = x.size()
    queries, keys, values = self.Q(x), self.K(x), self.V(x)
    shape = (batch_size, seq_len, self.n_head, self.d_head)
    keys = keys.reshape(shape).transpose(1, 2)
    queries = queries.reshape(shape).transpose(1, 2)
    values = values.reshape(shape).transpose(1, 2)
    scores = queries @ keys.transpose(-1, -2) / self.d_head ** 0.5
    self_attn = F.softmax(scores, dim=-1)
    out = (self_attn @ values).transpose(1, 2).reshape((batch_size, seq_len, d_model))
    return self.O(out)


class MultiHeadAttentionV2(nn.Module):
  def __init__(self, d_model, n_head):
    super().__init__()
    if d_model % n_head != 0:
      raise ValueError('d_model should be divisible by n_head ...')
    self.d_model = d_model
    self.n_head = n_head
    self.d_head = d_model // n_head
    self.qkv_linear = nn.Linear(d_model, d_model * 3)
    self.O = nn.Linear(d_model, d_model)

  def forward(self, x):
    batch_size, seq_len, d_model = x.size()
    qkv = self.qkv_linear(x)
    qkv = qkv.reshape((batch_size, seq_len, self.n_head, self.d_head * 3)).transpose(1, 2)
    queries, keys, values = qkv.chunk(3, dim=-1)
    scores = queries @ keys.transpose(-1, -2) / self.d_head ** 0.5
    self_attn = F.softmax(scores, dim=-1)
    out = (self_attn @ values).transpose(1, 2).reshape((batch_size, seq_len, d_model))
    return self.O(out)


# --- seed 002: the TT-NN tutorial, its ops written in torch ------------------

def multi_head_attention(hidden_states, attention_mask, query_weight, query_bias, key_weight, key_bias,
                         value_weight, value_bias, output_weight, output_bias, *, num_heads):
  batch_size, sequence_size, hidden_size = hidden_states.shape
  head_size = hidden_size // num_heads
  split = (batch_size, sequence_size, num_heads, head_size)
  query = (hidden_states @ query_weight + query_bias).reshape(split).permute(0, 2, 1, 3)
  key = (hidden_states @ key_weight + key_bias).reshape(split).permute(0, 2, 3, 1)
  value = (hidden_states @ value_weight + value_bias).reshape(split).permute(0, 2, 1, 3)
  attention_scores = query @ key
  attention_scores = attention_scores * (1 / (head_size**0.5))
  if attention_mask is not None:
    attention_scores += attention_mask
  attention_probs = torch.softmax(attention_scores, dim=-1)
  context_layer = (attention_probs @ value).permute(0, 2, 1, 3)
  context_layer = context_layer.reshape((batch_size, sequence_size, hidden_size))
  return context_layer @ output_weight + output_bias


def optimized_multi_head_attention(hidden_states, attention_mask, fused_qkv_weight, fused_qkv_bias,
                                   self_output_weight, self_output_bias, *, num_heads):
  batch_size, sequence_size, hidden_size = hidden_states.shape
  head_size = hidden_size // num_heads
  fused_qkv_output = hidden_states @ fused_qkv_weight + fused_qkv_bias
  # ttnn.transformer.split_query_key_value_and_split_heads: columns are
  # [Q all heads | K all heads | V all heads]; key comes out transposed.
  q, k, v = fused_qkv_output.split(hidden_size, dim=-1)
  split = (batch_size, sequence_size, num_heads, head_size)
  query = q.reshape(split).permute(0, 2, 1, 3)
  key = k.reshape(split).permute(0, 2, 3, 1)
  value = v.reshape(split).permute(0, 2, 1, 3)
  attention_scores = query @ key
  # ttnn.transformer.attention_softmax_: scale, add the mask, softmax.
  attention_scores = attention_scores * (1 / (head_size**0.5))
  if attention_mask is not None:
    attention_scores = attention_scores + attention_mask
  attention_probs = torch.softmax(attention_scores, dim=-1)
  context_layer = (attention_probs @ value).permute(0, 2, 1, 3)  # concatenate_heads
  context_layer = context_layer.reshape((batch_size, sequence_size, hidden_size))
  return context_layer @ self_output_weight + self_output_bias


# --- weights -----------------------------------------------------------------

# Seed 003 spells the book modules' layers differently; state_dict keys are
# mapped onto seed 000's so one class serves both.
SEED003_NAMES = {'W_q': 'W_query', 'W_k': 'W_key', 'W_v': 'W_value', 'output_projection': 'out_proj'}


def canonical_name(name):
  return '.'.join(SEED003_NAMES.get(part, part) for part in name.split('.'))


def load_weight_files(spec, kind):
  if kind == 'dir':
    return {f[:-4]: torch.from_numpy(np.load(os.path.join(spec, f)))
            for f in sorted(os.listdir(spec)) if f.endswith('.npy')}
  if spec.endswith('.npz'):
    with np.load(spec) as z:
      return {k: torch.from_numpy(z[k]) for k in z.files}
  if spec.endswith('.safetensors'):
    return read_safetensors(spec)
  raise SystemExit(f'{spec}: expected .safetensors or .npz')


def loaded_weights(cfg_w, base):
  kind = 'dir' if 'dir' in cfg_w else 'file'
  named = load_weight_files(os.path.join(base, cfg_w[kind]), kind)
  # Seed 003 registers its causal mask as a buffer; it is not a weight.
  return {canonical_name(k): v.float() for k, v in named.items() if k.split('.')[-1] != 'mask'}


def ttnn_init(cfg_w, hidden):
  """The separate ttnn weights, (in x out): nn.Linear init for "torch", seed 002's torch.rand for "rand"."""
  names = ['query', 'key', 'value', 'output']
  torch.manual_seed(cfg_w.get('seed', 0))
  w = {}
  if cfg_w['init'] == 'torch':
    for n in names:
      lin = nn.Linear(hidden, hidden)
      w[n + '_weight'] = lin.weight.detach().t().contiguous()
      w[n + '_bias'] = lin.bias.detach().clone()
  else:
    for n in names:
      w[n + '_weight'] = torch.rand(hidden, hidden)
      w[n + '_bias'] = torch.rand(hidden)
  return w


def build_module(make, cfg_w, base):
  """A seed nn.Module from torch.manual_seed(seed) + construction, or loaded."""
  if 'init' in cfg_w:
    if cfg_w['init'] != 'torch':
      raise SystemExit('weights.init: only "torch" for this variant')
    torch.manual_seed(cfg_w.get('seed', 0))
    return make()
  module = make()
  module.load_state_dict(loaded_weights(cfg_w, base), strict=True)
  return module


# --- Hugging Face LlamaAttention / MistralAttention --------------------------
# Written from transformers' modeling_llama.py (LlamaRotaryEmbedding,
# rotate_half, apply_rotary_pos_emb, repeat_kv, eager_attention_forward,
# LlamaAttention; revision 5dd4a63548857797727ae73eeb6a6e886ea02a3e) and
# masking_utils.py (causal_mask_function, sliding_window_overlay: a key is
# visible iff q_idx - sliding_window < kv_idx <= q_idx; revision
# 2ccc6cae21faaf11631efa5fb9054687ae5dc931). The transformers package is
# not installed here, so the module is restated with the same operations in
# the same order; the model-level mask is built as the models build it
# (finfo.min where masked).

def llama_rotate_half(x):
  x1 = x[..., : x.shape[-1] // 2]
  x2 = x[..., x.shape[-1] // 2:]
  return torch.cat((-x2, x1), dim=-1)


class LlamaRotaryEmbedding(nn.Module):
  def __init__(self, dim, base, exact_table=False):
    super().__init__()
    inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.int64).float() / dim))
    if exact_table:
      # mha's table: the same float32 steps, with the power and cos/sin
      # correctly rounded to float32 (torch's float32 pow/cos/sin may be
      # one ulp off them); the float64 oracle uses it so that mha's float64
      # reference can be held to float64 tolerances.
      e = (torch.arange(0, dim, 2, dtype=torch.int64).float() / dim).double()
      inv_freq = 1.0 / (torch.tensor(base, dtype=torch.float32).double() ** e).float()
    self.exact_table = exact_table
    self.register_buffer('inv_freq', inv_freq, persistent=False)

  @torch.no_grad()
  def forward(self, x, position_ids):
    inv_freq_expanded = self.inv_freq[None, :, None].float().expand(position_ids.shape[0], -1, 1)
    position_ids_expanded = position_ids[:, None, :].float()
    freqs = (inv_freq_expanded.float() @ position_ids_expanded.float()).transpose(1, 2)
    emb = torch.cat((freqs, freqs), dim=-1)
    if self.exact_table:
      cos, sin = emb.double().cos().float(), emb.double().sin().float()
    else:
      cos, sin = emb.cos(), emb.sin()
    return cos.to(dtype=x.dtype), sin.to(dtype=x.dtype)


def llama_apply_rotary_pos_emb(q, k, cos, sin, unsqueeze_dim=1):
  cos = cos.unsqueeze(unsqueeze_dim)
  sin = sin.unsqueeze(unsqueeze_dim)
  q_embed = (q * cos) + (llama_rotate_half(q) * sin)
  k_embed = (k * cos) + (llama_rotate_half(k) * sin)
  return q_embed, k_embed


def llama_repeat_kv(hidden_states, n_rep):
  batch, num_key_value_heads, slen, head_dim = hidden_states.shape
  if n_rep == 1:
    return hidden_states
  hidden_states = hidden_states[:, :, None, :, :].expand(batch, num_key_value_heads, n_rep, slen, head_dim)
  return hidden_states.reshape(batch, num_key_value_heads * n_rep, slen, head_dim)


class LlamaAttention(nn.Module):
  def __init__(self, hidden_size, num_attention_heads, num_key_value_heads, head_dim, rope_theta,
               qkv_bias, o_proj_bias, sliding_window, exact_table=False):
    super().__init__()
    self.head_dim = head_dim
    self.num_key_value_groups = num_attention_heads // num_key_value_heads
    self.scaling = head_dim ** -0.5
    self.sliding_window = sliding_window
    self.q_proj = nn.Linear(hidden_size, num_attention_heads * head_dim, bias=qkv_bias)
    self.k_proj = nn.Linear(hidden_size, num_key_value_heads * head_dim, bias=qkv_bias)
    self.v_proj = nn.Linear(hidden_size, num_key_value_heads * head_dim, bias=qkv_bias)
    self.o_proj = nn.Linear(num_attention_heads * head_dim, hidden_size, bias=o_proj_bias)
    self.rotary_emb = LlamaRotaryEmbedding(head_dim, rope_theta, exact_table)

  def causal_mask(self, dtype, bsz, q_len, attention_mask):
    """The 4-D additive mask the models hand their attention layers."""
    q = torch.arange(q_len)[:, None]
    kv = torch.arange(q_len)[None, :]
    allowed = kv <= q
    if self.sliding_window is not None:
      allowed = allowed & (kv > q - self.sliding_window)
    allowed = allowed[None, None].expand(bsz, 1, q_len, q_len)
    if attention_mask is not None:
      allowed = allowed & attention_mask.bool()[:, None, None, :]
    min_dtype = torch.finfo(dtype).min
    return torch.zeros(allowed.shape, dtype=dtype).masked_fill(~allowed, min_dtype)

  def forward(self, hidden_states, position_ids=None, attention_mask=None):
    bsz, q_len, _ = hidden_states.shape
    if position_ids is None:
      position_ids = torch.arange(q_len)[None, :]
    hidden_shape = (bsz, q_len, -1, self.head_dim)
    query_states = self.q_proj(hidden_states).view(hidden_shape).transpose(1, 2)
    key_states = self.k_proj(hidden_states).view(hidden_shape).transpose(1, 2)
    value_states = self.v_proj(hidden_states).view(hidden_shape).transpose(1, 2)
    cos, sin = self.rotary_emb(value_states, position_ids)
    query_states, key_states = llama_apply_rotary_pos_emb(query_states, key_states, cos, sin)
    # eager_attention_forward
    key_states = llama_repeat_kv(key_states, self.num_key_value_groups)
    value_states = llama_repeat_kv(value_states, self.num_key_value_groups)
    attn_weights = torch.matmul(query_states, key_states.transpose(2, 3)) * self.scaling
    attn_weights = attn_weights + self.causal_mask(query_states.dtype, bsz, q_len, attention_mask)
    # The module upcasts the softmax to float32 (a no-op at float32); the
    # float64 oracle keeps float64.
    up = torch.float64 if query_states.dtype == torch.float64 else torch.float32
    attn_weights = nn.functional.softmax(attn_weights, dim=-1, dtype=up).to(query_states.dtype)
    attn_output = torch.matmul(attn_weights, value_states)
    attn_output = attn_output.transpose(1, 2).contiguous()
    attn_output = attn_output.reshape(bsz, q_len, -1).contiguous()
    return self.o_proj(attn_output), attn_weights


# --- KV-cache decode (a config's "decode" section) ----------------------------
# Hugging Face style: a cache preallocated for prompt + tokens rows (as
# transformers' StaticCache), written at each call's cache_position with
# index_copy_ in the cache's dtype, read back at the activations' dtype; the
# mask is the causal / sliding-window rule at those positions (the models'
# finfo.min fill). The attention reads the cache up to the last written row
# (StaticCache attends to all max_len rows, the unwritten ones masked: the
# same values). A float32 cache under the float64 oracle keeps float64, as
# mha's float64 reference does; bfloat16 rounds through float32 first, as a
# float32 model's k.to(torch.bfloat16).

class StaticKVCache:
  def __init__(self, bsz, kv_heads, max_len, head_dim_k, head_dim_v, dtype, cache_dtype):
    store = torch.bfloat16 if cache_dtype == 'bfloat16' else dtype
    self.k = torch.zeros(bsz, kv_heads, max_len, head_dim_k, dtype=store)
    self.v = torch.zeros(bsz, kv_heads, max_len, head_dim_v, dtype=store)

  def update(self, k, v, cache_position):
    self.k.index_copy_(2, cache_position, k.float().to(self.k.dtype) if self.k.dtype == torch.bfloat16 else k)
    self.v.index_copy_(2, cache_position, v.float().to(self.v.dtype) if self.v.dtype == torch.bfloat16 else v)
    n = int(cache_position[-1]) + 1
    return self.k[:, :, :n], self.v[:, :, :n]


def decode_mask(cache_position, kv_len, window, dtype):
  q = cache_position[:, None]
  kv = torch.arange(kv_len)[None, :]
  allowed = kv <= q
  if window is not None:
    allowed = allowed & (kv > q - window)
  return torch.zeros(allowed.shape, dtype=dtype).masked_fill(~allowed, torch.finfo(dtype).min)[None, None]


def decode_loop(step, x, decode):
  """Prefill decode['prompt'] rows of x [B, L, E], then one row per call."""
  prompt, tokens = decode['prompt'], decode.get('tokens', 0)
  if x.shape[1] != prompt + tokens:
    raise SystemExit(f'decode: the input has {x.shape[1]} tokens, expected {prompt + tokens}')
  outs = [step(x[:, :prompt], torch.arange(prompt))]
  for t in range(prompt, prompt + tokens):
    outs.append(step(x[:, t:t + 1], torch.arange(t, t + 1)))
  return torch.cat(outs, dim=1)


def llama_decode(m, x, decode, dtype):
  bsz = x.shape[0]
  total = decode['prompt'] + decode.get('tokens', 0)
  kv_heads = m.k_proj.out_features // m.head_dim
  cache = StaticKVCache(bsz, kv_heads, total, m.head_dim, m.head_dim, dtype, decode.get('cache_dtype', 'float32'))

  def step(h, cache_position):
    q_len = h.shape[1]
    hidden_shape = (bsz, q_len, -1, m.head_dim)
    q = m.q_proj(h).view(hidden_shape).transpose(1, 2)
    k = m.k_proj(h).view(hidden_shape).transpose(1, 2)
    v = m.v_proj(h).view(hidden_shape).transpose(1, 2)
    cos, sin = m.rotary_emb(v, cache_position[None, :])
    q, k = llama_apply_rotary_pos_emb(q, k, cos, sin)
    k_all, v_all = cache.update(k, v, cache_position)
    k_all = llama_repeat_kv(k_all.to(dtype), m.num_key_value_groups)
    v_all = llama_repeat_kv(v_all.to(dtype), m.num_key_value_groups)
    w = torch.matmul(q, k_all.transpose(2, 3)) * m.scaling
    w = w + decode_mask(cache_position, k_all.shape[2], m.sliding_window, dtype)
    up = torch.float64 if dtype == torch.float64 else torch.float32
    w = nn.functional.softmax(w, dim=-1, dtype=up).to(dtype)
    o = torch.matmul(w, v_all).transpose(1, 2).reshape(bsz, q_len, -1)
    return m.o_proj(o)
  return decode_loop(step, x, decode)


def torch_mha_decode(m, x, decode, dtype):
  """nn.MultiheadAttention (causal, self-attention, batch-first x) one
  step at a time: its in_proj / out_proj with a preallocated cache."""
  bsz, _, e = x.shape
  heads, dh = m.num_heads, m.head_dim
  total = decode['prompt'] + decode.get('tokens', 0)
  cache = StaticKVCache(bsz, heads, total, dh, dh, dtype, decode.get('cache_dtype', 'float32'))
  wq, wk, wv = m.in_proj_weight.chunk(3)
  bq, bk, bv = m.in_proj_bias.chunk(3) if m.in_proj_bias is not None else (None, None, None)

  def step(h, cache_position):
    n = h.shape[1]
    split = lambda t: t.view(bsz, n, heads, dh).transpose(1, 2)
    q = split(nn.functional.linear(h, wq, bq))
    k, v = split(nn.functional.linear(h, wk, bk)), split(nn.functional.linear(h, wv, bv))
    k_all, v_all = cache.update(k, v, cache_position)
    w = torch.matmul(q, k_all.to(dtype).transpose(2, 3)) / math.sqrt(dh)
    w = torch.softmax(w + decode_mask(cache_position, k_all.shape[2], None, dtype), dim=-1)
    o = torch.matmul(w, v_all.to(dtype)).transpose(1, 2).reshape(bsz, n, e)
    return m.out_proj(o)
  return decode_loop(step, x, decode)


# --- variants: each returns (state_dict, forward(inputs, options, dtype[, decode])) ----

def param(p, *names, default=None):
  for n in names:
    if n in p:
      return p[n]
  if default is None:
    raise SystemExit(f'params.{names[0]}: missing')
  return default


def book_args(p):
  return (param(p, 'd_in', 'dimension_inputs', 'dimensions_in'), param(p, 'd_out', 'dimension_outputs', 'dimensions_out'),
          param(p, 'context_length'), param(p, 'dropout', default=0.0))


def module_variant(module):
  def forward(inputs, options, dtype):
    m = module.to(dtype).eval()
    return m(inputs['x'].to(dtype)), None
  return {k: v.detach().clone() for k, v in module.state_dict().items()}, forward


def variant_causal_attention(p, cfg_w, base):
  make = lambda: CausalAttention(*book_args(p), qkv_bias=param(p, 'qkv_bias', default=False))
  return module_variant(build_module(make, cfg_w, base))


def variant_mha_wrapper(p, cfg_w, base):
  make = lambda: MultiHeadAttentionWrapper(*book_args(p), param(p, 'num_heads'), qkv_bias=param(p, 'qkv_bias', default=False))
  return module_variant(build_module(make, cfg_w, base))


def variant_mha_causal(p, cfg_w, base):
  make = lambda: MultiHeadAttention(*book_args(p), param(p, 'num_heads'), qkv_bias=param(p, 'qkv_bias', default=False))
  return module_variant(build_module(make, cfg_w, base))


def variant_mha(p, cfg_w, base):
  make = lambda: AiEdgeMultiHeadAttention(param(p, 'd_model'), param(p, 'n_head'))
  return module_variant(build_module(make, cfg_w, base))


def variant_mha_fused_qkv(p, cfg_w, base):
  make = lambda: MultiHeadAttentionV2(param(p, 'd_model'), param(p, 'n_head'))
  return module_variant(build_module(make, cfg_w, base))


def ttnn_weights(p, cfg_w, base, fused):
  if 'init' not in cfg_w:
    return loaded_weights(cfg_w, base)
  w = ttnn_init(cfg_w, param(p, 'hidden_size'))
  if not fused:
    return w
  # The seed's pre-processing: concat on the last dim.
  return {'fused_qkv_weight': torch.cat([w['query_weight'], w['key_weight'], w['value_weight']], dim=-1),
          'fused_qkv_bias': torch.cat([w['query_bias'], w['key_bias'], w['value_bias']], dim=-1),
          'self_output_weight': w['output_weight'], 'self_output_bias': w['output_bias']}


def ttnn_variant(p, cfg_w, base, fused):
  w = ttnn_weights(p, cfg_w, base, fused)

  def forward(inputs, options, dtype):
    ww = {k: v.to(dtype) for k, v in w.items()}
    mask = inputs.get('attention_mask')
    mask = None if mask is None else mask.to(dtype)
    fn = optimized_multi_head_attention if fused else multi_head_attention
    return fn(inputs['x'].to(dtype), mask, **ww, num_heads=param(p, 'num_heads')), None
  return w, forward


def variant_ttnn_mha(p, cfg_w, base):
  return ttnn_variant(p, cfg_w, base, fused=False)


def variant_ttnn_mha_fused(p, cfg_w, base):
  return ttnn_variant(p, cfg_w, base, fused=True)


def variant_torch_mha(p, cfg_w, base):
  def make():
    return nn.MultiheadAttention(
      p['embed_dim'], p['num_heads'], dropout=p.get('dropout', 0.0), bias=p.get('bias', True),
      add_bias_kv=p.get('add_bias_kv', False), add_zero_attn=p.get('add_zero_attn', False),
      kdim=p.get('kdim'), vdim=p.get('vdim'), batch_first=p.get('batch_first', False))
  module = build_module(make, cfg_w, base)

  def forward(inputs, options, dtype, decode=None):
    m = module.to(dtype).eval()
    cast = lambda t: None if t is None else (t if t.dtype == torch.bool else t.to(dtype))
    q, k, v = (inputs[n].to(dtype) for n in ('query', 'key', 'value'))
    if decode is not None:
      if not options.get('is_causal', False) or not (torch.equal(q, k) and torch.equal(q, v)) or q.dim() != 3:
        raise SystemExit('decode: torch_mha needs is_causal and one batched tensor as query, key and value')
      first = p.get('batch_first', False)
      out = torch_mha_decode(m, q if first else q.transpose(0, 1), decode, dtype)
      return (out if first else out.transpose(0, 1)), None
    attn_mask = cast(inputs.get('attn_mask'))
    if options.get('is_causal', False):
      # torch 1.13 has no is_causal: seed 004 builds the mask by hand.
      seq = 1 if p.get('batch_first', False) and q.dim() == 3 else 0
      attn_mask = torch.triu(torch.ones(q.shape[seq], k.shape[seq]), 1).bool()
    return m(q, k, v, key_padding_mask=cast(inputs.get('key_padding_mask')),
             need_weights=options.get('need_weights', True), attn_mask=attn_mask,
             average_attn_weights=options.get('average_attn_weights', True))
  return {k: v.detach().clone() for k, v in module.state_dict().items()}, forward


def variant_llama_attention(p, cfg_w, base):
  heads = p['num_attention_heads']
  head_dim = p.get('head_dim') or p['hidden_size'] // heads
  # Qwen2Attention (modeling_qwen2.py) hard-codes bias=True on q/k/v and
  # bias=False on o_proj, and applies sliding_window only when the config's
  # use_sliding_window is set; Llama's attention_bias sets all four.
  qwen2 = p.get('model_type') == 'qwen2'
  qkv_bias = p.get('qkv_bias', True if qwen2 else p.get('attention_bias', False))
  o_proj_bias = p.get('o_proj_bias', False if qwen2 else p.get('attention_bias', False))
  window = p.get('sliding_window') if p.get('use_sliding_window', not qwen2) else None
  def make(exact_table=False):
    return LlamaAttention(p['hidden_size'], heads, p.get('num_key_value_heads', heads), head_dim,
                          float(p.get('rope_theta', 10000.0)), qkv_bias, o_proj_bias, window, exact_table)
  module = build_module(make, cfg_w, base)

  def forward(inputs, options, dtype, decode=None):
    # The float64 run is the oracle for mha's float64 reference: the same
    # module with mha's correctly rounded float32 rotary table.
    m = module
    if dtype == torch.float64:
      m = make(exact_table=True)
      m.load_state_dict(module.state_dict())
    m = m.to(dtype).eval()
    if decode is not None:
      return llama_decode(m, inputs['x'].to(dtype), decode, dtype), None
    pos = inputs.get('position_ids')
    mask = inputs.get('attention_mask')
    out, weights = m(inputs['x'].to(dtype), None if pos is None else pos.long(), mask)
    return out, (weights if options.get('need_weights', False) else None)
  return {k: v.detach().clone() for k, v in module.state_dict().items()}, forward


# --- inputs and files --------------------------------------------------------

def load_tensor(spec):
  path, _, key = spec.partition('.npz:')
  if key:
    with np.load(path + '.npz') as z:
      return torch.from_numpy(z[key])
  return torch.from_numpy(np.load(spec))


def build_inputs(cfg_in, base):
  """Files, or rand/randn from torch.manual_seed(inputs.seed) in config order,
  as mha draws them (torch's default CPU generator)."""
  torch.manual_seed(cfg_in.get('seed', 0))
  inputs = {}
  for name, spec in cfg_in.items():
    if name == 'seed':
      continue
    if isinstance(spec, str):
      inputs[name] = load_tensor(os.path.join(base, spec))
    elif 'rand' in spec:
      inputs[name] = torch.rand(spec['rand'])
    else:
      inputs[name] = torch.randn(spec['randn'])
  return inputs


ST_DTYPES = {torch.float32: 'F32', torch.float64: 'F64', torch.float16: 'F16', torch.bfloat16: 'BF16'}
NP_FROM_ST = {'F32': '<f4', 'F64': '<f8', 'F16': '<f2'}


def write_safetensors(path, named):
  """The safetensors layout by hand: u64 header size, JSON header, data."""
  header, blobs, offset = {}, [], 0
  for name, t in named.items():
    a = t.detach().contiguous().numpy()
    data = a.astype(a.dtype.newbyteorder('<')).tobytes()
    header[name] = {'dtype': ST_DTYPES[t.dtype], 'shape': list(t.shape), 'data_offsets': [offset, offset + len(data)]}
    blobs.append(data)
    offset += len(data)
  text = json.dumps(header, separators=(',', ':')).encode()
  text += b' ' * (-len(text) % 8)
  with open(path, 'wb') as f:
    f.write(struct.pack('<Q', len(text)))
    f.write(text)
    for b in blobs:
      f.write(b)


def read_safetensors(path):
  with open(path, 'rb') as f:
    n = struct.unpack('<Q', f.read(8))[0]
    header = json.loads(f.read(n))
    data = f.read()
  out = {}
  for name, h in header.items():
    if name == '__metadata__':
      continue
    a, b = h['data_offsets']
    arr = np.frombuffer(data[a:b], dtype=NP_FROM_ST[h['dtype']]).reshape(h['shape'])
    out[name] = torch.from_numpy(arr.copy())
  return out


def run_config(config, out, dtype):
  with open(config) as f:
    cfg = json.load(f)
  base = os.path.dirname(os.path.abspath(config))
  options = cfg.get('options', {})
  if options.get('training', False):
    raise SystemExit(f'{config}: options.training: dropout draws are not reproducible here')
  make = globals().get('variant_' + cfg['variant'])
  if make is None:
    raise SystemExit(f"{config}: variant: unknown '{cfg['variant']}'")
  state_dict, forward = make(cfg.get('params', {}), cfg.get('weights', {'init': 'torch', 'seed': 0}), base)
  inputs = build_inputs(cfg.get('inputs', {}), base)
  with torch.no_grad():
    if 'decode' in cfg:
      if cfg['variant'] not in ('llama_attention', 'torch_mha'):
        raise SystemExit(f"{config}: decode: written here for llama_attention and torch_mha only")
      output, weights = forward(inputs, options, dtype, decode=cfg['decode'])
    else:
      output, weights = forward(inputs, options, dtype)
  os.makedirs(out, exist_ok=True)
  write_safetensors(os.path.join(out, 'weights.safetensors'), state_dict)
  np.save(os.path.join(out, 'output.npy'), output.numpy())
  if weights is not None:
    np.save(os.path.join(out, 'attn_weights.npy'), weights.numpy())


def main():
  ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
  # Repeatable in pairs, because importing torch costs seconds and test
  # suites run many small configs.
  ap.add_argument('--config', required=True, action='append')
  ap.add_argument('--out', required=True, action='append')
  # Once for every --config, or once per --config: both dtypes in one
  # process import torch once.
  ap.add_argument('--dtype', choices=['float32', 'float64'], action='append')
  args = ap.parse_args()
  if len(args.config) != len(args.out):
    ap.error('give one --out per --config')
  dtypes = args.dtype or ['float32']
  if len(dtypes) == 1:
    dtypes = dtypes * len(args.config)
  if len(dtypes) != len(args.config):
    ap.error('give --dtype once, or once per --config')
  for config, out, dtype in zip(args.config, args.out, dtypes):
    run_config(config, out, torch.float64 if dtype == 'float64' else torch.float32)


if __name__ == '__main__':
  main()
