#!/usr/bin/python3
"""An independent float64 oracle of one decoder layer's self-attention of a
Hugging Face model folder, written from transformers' source (main branch as
of 2025: models/{llama,mistral,qwen2,qwen3,gemma2,gemma3,gpt_oss,phi3}/
modeling_*.py and configuration_*.py, modeling_rope_utils.py with YaRN's
`truncate`, masking_utils.py's sliding_window_overlay; models/deepseek_v3/
modeling_deepseek_v3.py at commit 00b676f8f0489b88652a31d70751cc540dd06305
for DeepSeek-V3's multi-head latent attention, which kimi_k2 folders share). It shares no code with
mha: it reads config.json and the safetensors bytes itself (numpy only).

  hf_oracle.py DIR LAYER X.npy OUT.npy

X [B, L, hidden] (the layer's input hidden states, positions 0..L-1); OUT
gets the attention module's output [B, L, hidden] in float64. The rotary
tables follow the modules: inv_freq, angles and cos / sin in float32 (each
float32 op taken as the correctly rounded result, as torch's are within an
ulp), used at float64 by the float64 activations.
"""
import json
import math
import os
import struct
import sys

import numpy as np

f32 = np.float32

# The config classes' defaults for keys a config may omit.
DEFAULTS = {
    "gemma3_text": {"hidden_size": 2304, "num_attention_heads": 8, "num_key_value_heads": 4, "head_dim": 256,
                    "rope_theta": 1e6, "rope_local_base_freq": 10000.0, "query_pre_attn_scalar": 256,
                    "sliding_window": 4096, "sliding_window_pattern": 6, "attn_logit_softcapping": None,
                    "rms_norm_eps": 1e-6, "attention_bias": False, "max_position_embeddings": 131072},
    "gemma2": {"head_dim": 256, "query_pre_attn_scalar": 256, "attn_logit_softcapping": 50.0, "sliding_window": 4096,
               "rope_theta": 10000.0, "attention_bias": False},
    "gpt_oss": {"head_dim": 64, "sliding_window": 128, "rope_theta": 150000.0, "attention_bias": True},
    "qwen3": {"rope_theta": 10000.0, "attention_bias": False, "use_sliding_window": False, "max_window_layers": 28,
              "rms_norm_eps": 1e-6},
    "qwen2": {"rope_theta": 10000.0, "use_sliding_window": False, "max_window_layers": 28},
    "deepseek_v3": {"hidden_size": 7168, "num_attention_heads": 128, "q_lora_rank": 1536, "kv_lora_rank": 512,
                    "qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "v_head_dim": 128, "rope_theta": 10000.0,
                    "rope_interleave": True, "attention_bias": False, "max_position_embeddings": 4096},
}


def read_config(folder):
    cfg = json.load(open(os.path.join(folder, "config.json")))
    if "text_config" in cfg:
        text = dict(cfg["text_config"])
        text.setdefault("model_type", "gemma3_text" if cfg["model_type"] == "gemma3" else None)
        cfg = text
    mt = cfg["model_type"]
    mt = {"gemma3": "gemma3_text", "kimi_k2": "deepseek_v3"}.get(mt, mt)
    full = dict(DEFAULTS.get(mt, {}))
    full.update({k: v for k, v in cfg.items()})
    full["model_type"] = mt
    return full


DTYPES = {"F32": np.float32, "F16": np.float16, "F64": np.float64, "U8": np.uint8}


def read_safetensors(path):
    data = open(path, "rb").read()
    n = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8:8 + n])
    out = {}
    for name, h in header.items():
        if name == "__metadata__":
            continue
        a, b = h["data_offsets"]
        raw = data[8 + n + a:8 + n + b]
        if h["dtype"] == "BF16":
            u = np.frombuffer(raw, dtype="<u2").astype(np.uint32) << 16
            t = u.view(np.float32)
        else:
            t = np.frombuffer(raw, dtype=DTYPES[h["dtype"]])
        out[name] = t.reshape(h["shape"])
    return out


def read_tensors(folder):
    index = os.path.join(folder, "model.safetensors.index.json")
    if os.path.exists(index):
        out = {}
        for shard in sorted(set(json.load(open(index))["weight_map"].values())):
            out.update(read_safetensors(os.path.join(folder, shard)))
        return out
    return read_safetensors(os.path.join(folder, "model.safetensors"))


def layer_weights(tensors, layer):
    needle = f"layers.{layer}.self_attn."
    found = {}
    for name, t in tensors.items():
        at = name.find(needle)
        if at >= 0 and "vision" not in name[:at]:
            found[name[at + len(needle):]] = t.astype(np.float64)
    return found


def is_sliding(cfg, layer):
    mt = cfg["model_type"]
    if cfg.get("layer_types"):
        return cfg["layer_types"][layer] == "sliding_attention"
    if mt in ("gemma2", "gpt_oss"):
        return bool((layer + 1) % 2)
    if mt == "gemma3_text":
        return bool((layer + 1) % cfg.get("sliding_window_pattern", 6))
    if mt in ("qwen2", "qwen3"):
        return bool(cfg.get("use_sliding_window")) and cfg.get("sliding_window") is not None and \
            layer >= cfg.get("max_window_layers", 28)
    return cfg.get("sliding_window") is not None  # mistral, phi3: every layer


def head_dim(cfg):
    if cfg["model_type"] == "deepseek_v3":  # DeepseekV3Config: head_dim is the rotary width
        return cfg["qk_rope_head_dim"]
    return cfg.get("head_dim") or cfg["hidden_size"] // cfg["num_attention_heads"]


def default_inv_freq(base, dim):
    e = (np.arange(0, dim, 2).astype(f32) / f32(dim)).astype(f32)
    p = np.array([f32(float(f32(base)) ** float(x)) for x in e], dtype=f32)
    return (f32(1.0) / p).astype(f32)


def llama3_inv_freq(inv, s):
    factor, lo, hi, old = f32(s["factor"]), s["low_freq_factor"], s["high_freq_factor"], s["original_max_position_embeddings"]
    low_wl, high_wl = old / lo, old / hi
    wavelen = (f32(2 * math.pi) / inv).astype(f32)
    inv_l = np.where(wavelen > low_wl, (inv / factor).astype(f32), inv).astype(f32)
    smooth = ((f32(old) / wavelen - f32(lo)) / f32(hi - lo)).astype(f32)
    smoothed = ((f32(1) - smooth) * inv_l / factor + smooth * inv_l).astype(f32)
    medium = ~(wavelen < high_wl) & ~(wavelen > low_wl)
    return np.where(medium, smoothed, inv_l).astype(f32)


def yarn_inv_freq(base, dim, s, max_pos):
    factor = s["factor"]
    orig = s.get("original_max_position_embeddings") or max_pos
    beta_fast, beta_slow = s.get("beta_fast") or 32, s.get("beta_slow") or 1

    def corr_dim(rot):
        return (dim * math.log(orig / (rot * 2 * math.pi))) / (2 * math.log(base))

    low, high = corr_dim(beta_fast), corr_dim(beta_slow)
    if s.get("truncate", True):
        low, high = math.floor(low), math.ceil(high)
    low, high = max(low, 0), min(high, dim - 1)
    if low == high:
        high += 0.001
    pos = np.array([f32(float(f32(base)) ** float(x)) for x in (np.arange(0, dim, 2).astype(f32) / f32(dim)).astype(f32)],
                   dtype=f32)
    extra = (f32(1) / pos).astype(f32)
    inter = (f32(1) / (f32(factor) * pos).astype(f32)).astype(f32)
    ramp = np.clip(((np.arange(dim // 2).astype(f32) - f32(low)) / f32(high - low)).astype(f32), 0, 1).astype(f32)
    ef = (f32(1) - ramp).astype(f32)
    return (inter * (f32(1) - ef) + extra * ef).astype(f32)


def yarn_attention_factor(s):
    factor = s["factor"]

    def mscale(scale, m=1):
        return 1.0 if scale <= 1 else 0.1 * m * math.log(scale) + 1.0

    if s.get("attention_factor") is not None:
        return s["attention_factor"]
    if s.get("mscale") and s.get("mscale_all_dim"):
        return mscale(factor, s["mscale"]) / mscale(factor, s["mscale_all_dim"])
    return mscale(factor)


def rope_tables(cfg, layer, L):
    """cos, sin [L, rotary_dim] (float32 values) for positions 0..L-1."""
    mt, hd = cfg["model_type"], head_dim(cfg)
    dim = int(hd * cfg.get("partial_rotary_factor", 1.0))
    base, scaling = cfg.get("rope_theta", 10000.0), cfg.get("rope_scaling")
    if mt == "gemma3_text" and is_sliding(cfg, layer):  # the local rotary embedding: its own base, no scaling
        base, scaling = cfg.get("rope_local_base_freq", 10000.0), None
    if mt == "gpt_oss" and "rope_scaling" not in cfg:
        scaling = {"rope_type": "yarn", "factor": 32.0, "beta_fast": 32.0, "beta_slow": 1.0, "truncate": False,
                   "original_max_position_embeddings": 4096}
    kind = (scaling or {}).get("rope_type", (scaling or {}).get("type", "default"))
    af = 1.0
    if kind == "yarn":
        inv = yarn_inv_freq(base, dim, scaling, cfg.get("max_position_embeddings", 2048))
        af = yarn_attention_factor(scaling)
    else:
        inv = default_inv_freq(base, dim)
        if kind == "linear":
            inv = (inv / f32(scaling["factor"])).astype(f32)
        elif kind == "llama3":
            inv = llama3_inv_freq(inv, scaling)
    ang = (np.arange(L).astype(f32)[:, None] * inv[None, :]).astype(f32)
    cos = np.cos(ang.astype(np.float64)).astype(f32)
    sin = np.sin(ang.astype(np.float64)).astype(f32)
    if af != 1.0:
        cos, sin = (cos * f32(af)).astype(f32), (sin * f32(af)).astype(f32)
    cos, sin = np.concatenate([cos, cos], -1), np.concatenate([sin, sin], -1)
    return cos.astype(np.float64), sin.astype(np.float64)


def rotate(x, cos, sin):
    """apply_rotary_pos_emb with rotate_half, on the leading cos.shape[-1] dims."""
    d = cos.shape[-1]
    r, keep = x[..., :d], x[..., d:]
    half = d // 2
    rh = np.concatenate([-r[..., half:], r[..., :half]], -1)
    return np.concatenate([r * cos + rh * sin, keep], -1)


def rms_norm(x, w, eps, offset_one):
    y = x / np.sqrt(np.mean(x * x, -1, keepdims=True) + eps)
    return y * (1.0 + w) if offset_one else y * w


def linear_(x, w, b):
    y = x @ w.T
    return y + b if b is not None else y


def yarn_get_mscale(scale, mscale):
    return 1.0 if scale <= 1 else 0.1 * mscale * math.log(scale) + 1.0


def mla_attention(cfg, W, layer, x):
    """DeepseekV3Attention.forward, eager attention, no cache."""
    H, B, L = cfg["num_attention_heads"], x.shape[0], x.shape[1]
    dn, dr, dv, kl = cfg["qk_nope_head_dim"], cfg["qk_rope_head_dim"], cfg["v_head_dim"], cfg["kv_lora_rank"]
    eps = 1e-6  # DeepseekV3RMSNorm(q_lora_rank) / (kv_lora_rank): the default eps, not rms_norm_eps
    if cfg.get("q_lora_rank") is None:
        q = linear_(x, W["q_proj.weight"], None)
    else:
        qa = linear_(x, W["q_a_proj.weight"], W.get("q_a_proj.bias"))
        q = linear_(rms_norm(qa, W["q_a_layernorm.weight"], eps, False), W["q_b_proj.weight"], None)
    q = q.reshape(B, L, H, dn + dr).transpose(0, 2, 1, 3)
    q_pass, q_rot = q[..., :dn], q[..., dn:]
    ckv = linear_(x, W["kv_a_proj_with_mqa.weight"], W.get("kv_a_proj_with_mqa.bias"))
    k_pass, k_rot = ckv[..., :kl], ckv[..., kl:]
    kv = linear_(rms_norm(k_pass, W["kv_a_layernorm.weight"], eps, False), W["kv_b_proj.weight"], None)
    kv = kv.reshape(B, L, H, dn + dv).transpose(0, 2, 1, 3)
    k_pass, v = kv[..., :dn], kv[..., dn:]
    k_rot = k_rot.reshape(B, 1, L, dr)
    cos, sin = rope_tables(cfg, layer, L)
    if cfg.get("rope_interleave", True):  # apply_rotary_pos_emb_interleave: de-interleave, then rotate halves
        q_rot = q_rot.reshape(B, H, L, dr // 2, 2).swapaxes(-1, -2).reshape(B, H, L, dr)
        k_rot = k_rot.reshape(B, 1, L, dr // 2, 2).swapaxes(-1, -2).reshape(B, 1, L, dr)
    q_rot, k_rot = rotate(q_rot, cos, sin), rotate(k_rot, cos, sin)
    k_rot = np.broadcast_to(k_rot, (B, H, L, dr))
    query, key = np.concatenate([q_pass, q_rot], -1), np.concatenate([k_pass, k_rot], -1)
    scaling = (dn + dr) ** -0.5
    s_cfg = cfg.get("rope_scaling")
    if s_cfg is not None and s_cfg.get("mscale_all_dim", 0):
        m = yarn_get_mscale(s_cfg["factor"], s_cfg["mscale_all_dim"])
        scaling = scaling * m * m
    s = (query @ key.transpose(0, 1, 3, 2)) * scaling
    i, j = np.arange(L)[:, None], np.arange(L)[None, :]
    s = np.where(j <= i, s, -np.inf)
    e = np.exp(s - s.max(-1, keepdims=True))
    ctx = ((e / e.sum(-1, keepdims=True)) @ v).transpose(0, 2, 1, 3).reshape(B, L, H * dv)
    return linear_(ctx, W["o_proj.weight"], W.get("o_proj.bias"))


def attention(cfg, W, layer, x):
    mt, hd = cfg["model_type"], head_dim(cfg)
    if mt == "deepseek_v3":
        return mla_attention(cfg, W, layer, x)
    H = cfg["num_attention_heads"]
    Hkv = cfg.get("num_key_value_heads") or H
    B, L, _ = x.shape
    if mt == "phi3":
        qkv = linear_(x, W["qkv_proj.weight"], W.get("qkv_proj.bias"))
        q, k, v = qkv[..., :H * hd], qkv[..., H * hd:(H + Hkv) * hd], qkv[..., (H + Hkv) * hd:]
    else:
        q = linear_(x, W["q_proj.weight"], W.get("q_proj.bias"))
        k = linear_(x, W["k_proj.weight"], W.get("k_proj.bias"))
        v = linear_(x, W["v_proj.weight"], W.get("v_proj.bias"))
    q = q.reshape(B, L, H, hd).transpose(0, 2, 1, 3)
    k = k.reshape(B, L, Hkv, hd).transpose(0, 2, 1, 3)
    v = v.reshape(B, L, Hkv, hd).transpose(0, 2, 1, 3)
    if mt in ("qwen3", "gemma3_text"):
        eps, one = cfg.get("rms_norm_eps", 1e-6), mt == "gemma3_text"
        q, k = rms_norm(q, W["q_norm.weight"], eps, one), rms_norm(k, W["k_norm.weight"], eps, one)
    cos, sin = rope_tables(cfg, layer, L)
    q, k = rotate(q, cos, sin), rotate(k, cos, sin)
    k, v = np.repeat(k, H // Hkv, axis=1), np.repeat(v, H // Hkv, axis=1)
    gemma = mt in ("gemma2", "gemma3_text")
    scaling = cfg["query_pre_attn_scalar"] ** -0.5 if gemma else hd ** -0.5
    s = (q @ k.transpose(0, 1, 3, 2)) * scaling
    cap = cfg.get("attn_logit_softcapping") if gemma else None
    if cap:
        s = np.tanh(s / cap) * cap
    i, j = np.arange(L)[:, None], np.arange(L)[None, :]
    allowed = j <= i
    if is_sliding(cfg, layer) and cfg.get("sliding_window") is not None:
        allowed &= (i - j) < cfg["sliding_window"]
    s = np.where(allowed, s, -np.inf)
    if mt == "gpt_oss":
        sinks = np.broadcast_to(W["sinks"].reshape(1, H, 1, 1), (B, H, L, 1))
        c = np.concatenate([s, sinks], -1)
        c = np.exp(c - c.max(-1, keepdims=True))
        p = (c / c.sum(-1, keepdims=True))[..., :-1]
    else:
        e = np.exp(s - s.max(-1, keepdims=True))
        p = e / e.sum(-1, keepdims=True)
    ctx = (p @ v).transpose(0, 2, 1, 3).reshape(B, L, H * hd)
    return linear_(ctx, W["o_proj.weight"], W.get("o_proj.bias"))


def main():
    folder, layer, xs, out = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
    cfg = read_config(folder)
    W = layer_weights(read_tensors(folder), layer)
    x = np.load(xs).astype(np.float64)
    np.save(out, attention(cfg, W, layer, x))


if __name__ == "__main__":
    main()
