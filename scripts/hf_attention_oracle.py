"""The attention layers of today's Hugging Face decoders, restated from
transformers' source (main of 2025, the revision whose yarn has `truncate`:
modeling_rope_utils.py, models/qwen3, gemma2, gemma3, gpt_oss, phi3,
deepseek_v3 and llama), as the independent oracle of mha's AttentionSpec
features: QK RMSNorm (plain and Gemma's 1 + w), logit softcapping with
query_pre_attn_scalar, attention sinks, partial and interleaved rotary, and
the default / linear / llama3 / yarn rope scalings.

  hf_attention_oracle.py DIR...

reads each DIR/case.json and DIR/*.npy (written by tests/parity/
hf_features_parity_test.cpp) and writes DIR/out64.npy, the module run in
float64, and DIR/out32.npy, the module as written in float32.

The float64 run keeps float64 throughout, RMSNorm included (the modules
upcast to float32 only to protect half precision), except for the rotary
table, which the modules build in float32 whatever the activations' dtype
(the inv_freq buffer and `.float()` in the rotary embedding's forward): it
uses the same float32 steps with the power and cos/sin correctly rounded
(torch's float32 pow/cos/sin may be one ulp off), so that a float64
backend can be held to float64 tolerances. The float32 run is the module
as written, with that same table: one ulp of a float32 inv_freq (torch's
pow is not always correctly rounded) turns into 1e-3 radians at position
20000, which would measure the table, not the float32 arithmetic.
"""
import json
import math
import sys

import numpy as np
import torch
from torch import nn


# ---- modeling_rope_utils.py: inv_freq and attention_scaling -------------

def rope_parameters(r, exact):
  """_compute_{default,linear_scaling,llama3,yarn}_parameters for rotary width dim."""
  base, dim = r['rope_theta'], r['rotary_dim']
  exponent = torch.arange(0, dim, 2, dtype=torch.int64).float() / dim
  if exact:
    pos_freqs = (torch.tensor(base, dtype=torch.float32).double() ** exponent.double()).float()
  else:
    pos_freqs = base ** exponent
  inv_freq = 1.0 / pos_freqs
  attention_factor = 1.0
  kind = r['rope_type']
  if kind == 'linear':
    inv_freq = inv_freq / r['factor']
  elif kind == 'llama3':
    factor, low_freq_factor, high_freq_factor = r['factor'], r['low_freq_factor'], r['high_freq_factor']
    old_context_len = r['original_max_position_embeddings']
    low_freq_wavelen = old_context_len / low_freq_factor
    high_freq_wavelen = old_context_len / high_freq_factor
    wavelen = 2 * math.pi / inv_freq
    inv_freq_llama = torch.where(wavelen > low_freq_wavelen, inv_freq / factor, inv_freq)
    smooth_factor = (old_context_len / wavelen - low_freq_factor) / (high_freq_factor - low_freq_factor)
    smoothed_inv_freq = (1 - smooth_factor) * inv_freq_llama / factor + smooth_factor * inv_freq_llama
    is_medium_freq = ~(wavelen < high_freq_wavelen) * ~(wavelen > low_freq_wavelen)
    inv_freq = torch.where(is_medium_freq, smoothed_inv_freq, inv_freq_llama)
  elif kind == 'yarn':
    factor = r['factor']
    attention_factor = r.get('attention_factor')
    if attention_factor is None:
      attention_factor = 0.1 * math.log(factor) + 1.0 if factor > 1 else 1.0  # get_mscale(factor)
    beta_fast, beta_slow = r.get('beta_fast') or 32, r.get('beta_slow') or 1
    original = r['original_max_position_embeddings']
    truncate = r.get('truncate', True)

    def find_correction_dim(num_rotations):
      return (dim * math.log(original / (num_rotations * 2 * math.pi))) / (2 * math.log(base))

    low, high = find_correction_dim(beta_fast), find_correction_dim(beta_slow)
    if truncate:
      low, high = math.floor(low), math.ceil(high)
    low, high = max(low, 0), min(high, dim - 1)
    if low == high:
      high += 0.001
    ramp = torch.clamp((torch.arange(dim // 2, dtype=torch.float32) - low) / (high - low), 0, 1)
    inv_freq_extrapolation_factor = 1 - ramp
    inv_freq_interpolation = 1.0 / (factor * pos_freqs)
    inv_freq_extrapolation = 1.0 / pos_freqs
    inv_freq = (inv_freq_interpolation * (1 - inv_freq_extrapolation_factor)
                + inv_freq_extrapolation * inv_freq_extrapolation_factor)
  return inv_freq, attention_factor


def rotary_cos_sin(r, position_ids, exact):
  """LlamaRotaryEmbedding.forward: float32 angles, cos/sin times attention_scaling."""
  inv_freq, attention_scaling = rope_parameters(r, exact)
  inv = inv_freq[None, :, None].float().expand(position_ids.shape[0], -1, 1)
  freqs = (inv @ position_ids[:, None, :].float()).transpose(1, 2)
  emb = torch.cat((freqs, freqs), dim=-1)
  if exact:
    cos, sin = emb.double().cos().float(), emb.double().sin().float()
  else:
    cos, sin = emb.cos(), emb.sin()
  return cos * attention_scaling, sin * attention_scaling


def rotate_half(x):
  x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2:]
  return torch.cat((-x2, x1), dim=-1)


def apply_rotary(x, cos, sin, interleaved):
  """Phi-3's partial apply_rotary_pos_emb (rotate the first cos.shape[-1]
  dims, pass the rest), with DeepSeek-V3's de-interleaving when asked."""
  cos, sin = cos.unsqueeze(1).to(x.dtype), sin.unsqueeze(1).to(x.dtype)
  rotary_dim = cos.shape[-1]
  x_rot, x_pass = x[..., :rotary_dim], x[..., rotary_dim:]
  if interleaved:
    b, h, s, d = x_rot.shape
    x_rot = x_rot.reshape(b, h, s, d // 2, 2).transpose(4, 3).reshape(b, h, s, d)
  return torch.cat([x_rot * cos + rotate_half(x_rot) * sin, x_pass], dim=-1)


def rms_norm(x, weight, eps, offset_one):
  """Qwen3RMSNorm (weight * normed), or Gemma3RMSNorm (normed * (1 + weight))."""
  normed = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)
  return normed * (1.0 + weight) if offset_one else weight * normed


def repeat_kv(x, n_rep):
  b, g, s, d = x.shape
  return x[:, :, None].expand(b, g, n_rep, s, d).reshape(b, g * n_rep, s, d)


def attention(case, t, dtype, exact):
  """eager_attention_forward of Gemma 2 (softcap) and gpt-oss (sinks) around
  Qwen3's / Gemma 3's q_norm and k_norm, in `dtype`."""
  x = t['x'].to(dtype)
  b, L, _ = x.shape
  H, Hkv, dh = case['num_heads'], case['num_kv_heads'], case['head_dim']

  def linear(name, inp):
    bias = t.get('b' + name)
    return nn.functional.linear(inp, t['w' + name].to(dtype), None if bias is None else bias.to(dtype))

  q = linear('q', x).view(b, L, H, dh)
  k = linear('k', x).view(b, L, Hkv, dh)
  v = linear('v', x).view(b, L, Hkv, dh).transpose(1, 2)
  norm = case.get('qk_norm')
  if norm:
    q = rms_norm(q, t['q_norm'].to(dtype), norm['eps'], norm['offset_one'])
    k = rms_norm(k, t['k_norm'].to(dtype), norm['eps'], norm['offset_one'])
  q, k = q.transpose(1, 2), k.transpose(1, 2)
  rope = case.get('rope')
  if rope:
    pos = t['pos'] if 'pos' in t else torch.arange(L)[None, :]
    cos, sin = rotary_cos_sin(rope, pos, exact)
    q, k = apply_rotary(q, cos, sin, rope['interleaved']), apply_rotary(k, cos, sin, rope['interleaved'])
  k, v = repeat_kv(k, H // Hkv), repeat_kv(v, H // Hkv)
  scaling = (case.get('query_pre_attn_scalar') or dh) ** -0.5
  w = torch.matmul(q, k.transpose(2, 3)) * scaling
  softcap = case.get('attn_logit_softcapping')
  if softcap:
    w = torch.tanh(w / softcap) * softcap
  i, j = torch.arange(L)[:, None], torch.arange(L)[None, :]
  allowed = j <= i
  if case.get('sliding_window'):
    allowed = allowed & (j > i - case['sliding_window'])
  w = w + torch.zeros(L, L, dtype=dtype).masked_fill(~allowed, torch.finfo(dtype).min)
  if 'sinks' in t:
    sinks = t['sinks'].to(dtype).reshape(1, -1, 1, 1).expand(b, -1, L, -1)
    combined = torch.cat([w, sinks], dim=-1)
    combined = combined - combined.max(dim=-1, keepdim=True).values
    w = nn.functional.softmax(combined, dim=-1, dtype=combined.dtype)[..., :-1]
  else:
    w = nn.functional.softmax(w, dim=-1, dtype=dtype)
  ctx = torch.matmul(w, v).transpose(1, 2).reshape(b, L, H * dh)
  return linear('o', ctx)


def main():
  for folder in sys.argv[1:]:  # several cases per run: importing torch costs seconds
    case = json.load(open(folder + '/case.json'))
    t = {name: torch.from_numpy(np.load(f'{folder}/{name}.npy')) for name in case['tensors']}
    with torch.no_grad():
      np.save(folder + '/out64.npy', attention(case, t, torch.float64, True).numpy())
      np.save(folder + '/out32.npy', attention(case, t, torch.float32, True).numpy())


if __name__ == '__main__':
  main()
