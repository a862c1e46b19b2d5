#!/usr/bin/python3
"""Writes tiny random Hugging Face model folders, one per family mha reads, in
the layout save_pretrained gives them (config.json + safetensors), for
`mha run --hf`, `mha inspect` and the tests (tests/hf/):

  llama         Llama: rotary embedding without scaling
  llama31       Llama 3.1 style: llama3 rope_scaling, head_dim given
  mistral       a sliding window on every layer
  qwen2         q/k/v biases, a window from max_window_layers on
  qwen2_yarn    q/k/v biases, YaRN spelled {"type": "yarn"}
  qwen3         QK RMSNorm, head_dim independent of hidden / heads, sliding
                layers from max_window_layers on
  qwen3_sharded as qwen3, bfloat16, two shards with model.safetensors.index.json
                (a layer straddles them), layer_types written out
  gemma2        softcap, query_pre_attn_scalar, sliding and full alternating
  gemma3_text   (1 + w) QK-norm, local rope base on sliding layers, linear
                scaling on global ones, sliding_window_pattern 3
  gemma3_mm     Gemma 3 multimodal: text_config omitting defaults, tensors
                under language_model.model.layers.N beside a vision tower
  gpt_oss       sinks, biases, YaRN with truncate false, MXFP4 expert tensors
                (U8) in the same file
  phi3          fused qkv_proj, partial_rotary_factor 0.75, a window
  deepseek_v3   multi-head latent attention: q_a/q_b with q_a_layernorm,
                kv_a_proj_with_mqa, kv_a_layernorm, kv_b_proj; YaRN x40 with
                mscale = mscale_all_dim (as DeepSeek-V3's), interleaved rope,
                unequal widths (qk_nope 16, qk_rope 32, v 24, kv_lora 32), a
                multi-token-prediction layer past num_hidden_layers
  kimi_k2       model_type kimi_k2 (DeepSeek-V3's layout): q_lora_rank null
                (one q_proj), attention_bias, rope_interleave absent (true),
                mscale 1 and mscale_all_dim 0.8
  hf_cache      llama in the Hugging Face cache's layout: models--mha--tiny/
                snapshots/REV/* symlinked to blobs/SHA256 (the model folder is
                hf_cache/models--mha--tiny/snapshots/REV)

data/hf_qwen3_tiny is qwen3_sharded and data/hf_gpt_oss_tiny is gpt_oss, as
this script writes them (configs/hf_*.json run them).

Run: /usr/bin/python3 scripts/make_hf_example.py OUT_DIR [NAME ...]
(all names when none given). Every folder is drawn from its own seed, so a
folder is the same bytes on every run.
"""
import hashlib
import json
import os
import struct
import sys

import numpy as np


def bf16_bits(a):
    """float32 -> bfloat16 bits, round to nearest even (as torch's .to(bfloat16))."""
    u = np.ascontiguousarray(a, dtype=np.float32).view(np.uint32).astype(np.uint64)
    u = (u + 0x7FFF + ((u >> 16) & 1)) >> 16
    return u.astype(np.uint16)


def write_safetensors(path, tensors):
    """tensors: list of (name, array, dtype) with dtype F32, BF16 or U8. The
    format: u64 little-endian header length, JSON header, raw data."""
    header, chunks, offset = {"__metadata__": {"format": "pt"}}, [], 0
    for name, a, dtype in tensors:
        if dtype == "BF16":
            raw = bf16_bits(a).tobytes()
        elif dtype == "F32":
            raw = np.ascontiguousarray(a, dtype="<f4").tobytes()
        elif dtype == "U8":
            raw = np.ascontiguousarray(a, dtype=np.uint8).tobytes()
        else:
            raise ValueError(dtype)
        header[name] = {"dtype": dtype, "shape": list(a.shape), "data_offsets": [offset, offset + len(raw)]}
        chunks.append(raw)
        offset += len(raw)
    text = json.dumps(header, separators=(",", ":"))
    text += " " * ((8 - len(text) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text.encode() + b"".join(chunks))


def linear(rng, out, inp):
    """nn.Linear's range: uniform in +-1/sqrt(in)."""
    b = 1.0 / np.sqrt(inp)
    return rng.uniform(-b, b, size=(out, inp)).astype(np.float32)


def attention_tensors(rng, cfg, prefix, family):
    """One layer's self_attn tensors as the family's module names them."""
    hidden, heads = cfg["hidden_size"], cfg["num_attention_heads"]
    kv = cfg.get("num_key_value_heads", heads)
    hd = cfg.get("head_dim") or hidden // heads
    qkv_bias = family in ("qwen2", "gpt_oss") or cfg.get("attention_bias", False)
    o_bias = family == "gpt_oss" or (family != "qwen2" and cfg.get("attention_bias", False))
    t = {}
    if family in ("deepseek_v3", "kimi_k2"):
        return {prefix + k: v for k, v in mla_tensors(rng, cfg).items()}
    if family == "phi3":
        t["qkv_proj.weight"] = linear(rng, (heads + 2 * kv) * hd, hidden)
    else:
        t["q_proj.weight"] = linear(rng, heads * hd, hidden)
        t["k_proj.weight"] = linear(rng, kv * hd, hidden)
        t["v_proj.weight"] = linear(rng, kv * hd, hidden)
        if qkv_bias:
            for n, w in (("q_proj", heads * hd), ("k_proj", kv * hd), ("v_proj", kv * hd)):
                t[n + ".bias"] = rng.uniform(-0.2, 0.2, size=(w,)).astype(np.float32)
    t["o_proj.weight"] = linear(rng, hidden, heads * hd)
    if o_bias:
        t["o_proj.bias"] = rng.uniform(-0.2, 0.2, size=(hidden,)).astype(np.float32)
    if family in ("qwen3", "gemma3"):
        center = 0.0 if family == "gemma3" else 1.0  # Gemma's norms scale by (1 + w)
        t["q_norm.weight"] = (center + 0.3 * rng.standard_normal(hd)).astype(np.float32)
        t["k_norm.weight"] = (center + 0.3 * rng.standard_normal(hd)).astype(np.float32)
    if family == "gpt_oss":
        t["sinks"] = rng.standard_normal(heads).astype(np.float32)
    return {prefix + k: v for k, v in t.items()}


def mla_tensors(rng, cfg):
    """DeepseekV3Attention's tensors; norms away from 1 so that they matter."""
    hidden, heads, bias = cfg["hidden_size"], cfg["num_attention_heads"], cfg.get("attention_bias", False)
    kl, dn, dr, dv = cfg["kv_lora_rank"], cfg["qk_nope_head_dim"], cfg["qk_rope_head_dim"], cfg["v_head_dim"]
    t = {}
    if cfg.get("q_lora_rank") is None:
        t["q_proj.weight"] = linear(rng, heads * (dn + dr), hidden)
    else:
        ql = cfg["q_lora_rank"]
        t["q_a_proj.weight"] = linear(rng, ql, hidden)
        t["q_a_layernorm.weight"] = (1.0 + 0.3 * rng.standard_normal(ql)).astype(np.float32)
        t["q_b_proj.weight"] = linear(rng, heads * (dn + dr), ql)
    t["kv_a_proj_with_mqa.weight"] = linear(rng, kl + dr, hidden)
    t["kv_a_layernorm.weight"] = (1.0 + 0.3 * rng.standard_normal(kl)).astype(np.float32)
    t["kv_b_proj.weight"] = linear(rng, heads * (dn + dv), kl)
    t["o_proj.weight"] = linear(rng, hidden, heads * dv)
    if bias:
        for n, w in (("q_a_proj", cfg.get("q_lora_rank")), ("kv_a_proj_with_mqa", kl + dr), ("o_proj", hidden)):
            if w is not None:
                t[n + ".bias"] = rng.uniform(-0.2, 0.2, size=(w,)).astype(np.float32)
    return t


def layer_rest(rng, cfg, prefix):
    """The rest of a decoder layer (norms, MLP): present as in real folders, unread."""
    hidden, inter = cfg["hidden_size"], cfg.get("intermediate_size", 2 * cfg["hidden_size"])
    return {prefix + "input_layernorm.weight": np.ones(hidden, np.float32),
            prefix + "post_attention_layernorm.weight": np.ones(hidden, np.float32),
            prefix + "mlp.up_proj.weight": linear(rng, inter, hidden),
            prefix + "mlp.down_proj.weight": linear(rng, hidden, inter)}


def model_tensors(rng, cfg, family, stem="model."):
    t = {stem + "embed_tokens.weight": rng.standard_normal((cfg["vocab_size"], cfg["hidden_size"])).astype(np.float32)}
    for i in range(cfg["num_hidden_layers"]):
        t.update(attention_tensors(rng, cfg, f"{stem}layers.{i}.self_attn.", family))
        t.update(layer_rest(rng, cfg, f"{stem}layers.{i}."))
    t[stem + "norm.weight"] = np.ones(cfg["hidden_size"], np.float32)
    for i in range(cfg["num_hidden_layers"], cfg["num_hidden_layers"] + cfg.get("num_nextn_predict_layers", 0)):
        # DeepSeek-V3's multi-token-prediction layer: a decoder layer plus its own projections.
        t.update(attention_tensors(rng, cfg, f"{stem}layers.{i}.self_attn.", family))
        t.update(layer_rest(rng, cfg, f"{stem}layers.{i}."))
        t[f"{stem}layers.{i}.eh_proj.weight"] = linear(rng, cfg["hidden_size"], 2 * cfg["hidden_size"])
        t[f"{stem}layers.{i}.enorm.weight"] = np.ones(cfg["hidden_size"], np.float32)
        t[f"{stem}layers.{i}.hnorm.weight"] = np.ones(cfg["hidden_size"], np.float32)
    return t


def base(model_type, arch, **kw):
    cfg = {"architectures": [arch], "model_type": model_type, "hidden_size": 64, "intermediate_size": 32,
           "num_attention_heads": 4, "num_key_value_heads": 2, "num_hidden_layers": 2, "vocab_size": 32,
           "rms_norm_eps": 1e-6, "max_position_embeddings": 4096, "tie_word_embeddings": False,
           "torch_dtype": "float32", "transformers_version": "4.56.0"}
    cfg.update(kw)
    return cfg


CONFIGS = {
    "llama": base("llama", "LlamaForCausalLM", rope_theta=500000.0, attention_bias=False, mlp_bias=False,
                  hidden_act="silu", rope_scaling=None),
    "llama31": base("llama", "LlamaForCausalLM", head_dim=16, rope_theta=500000.0, attention_bias=False, mlp_bias=False,
                  hidden_act="silu", max_position_embeddings=131072,
                  rope_scaling={"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                                "original_max_position_embeddings": 64, "rope_type": "llama3"}),
    "mistral": base("mistral", "MistralForCausalLM", head_dim=16, rope_theta=1000000.0, sliding_window=5),
    "qwen2": base("qwen2", "Qwen2ForCausalLM", rope_theta=1000000.0, use_sliding_window=True, sliding_window=5,
                  max_window_layers=1),
    "qwen2_yarn": base("qwen2", "Qwen2ForCausalLM", rope_theta=1000000.0, use_sliding_window=False,
                       sliding_window=4096, max_window_layers=2,
                       rope_scaling={"type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32}),
    "qwen3": base("qwen3", "Qwen3ForCausalLM", head_dim=32, num_hidden_layers=3, rope_theta=1000000.0,
                  attention_bias=False, use_sliding_window=True, sliding_window=5, max_window_layers=1),
    "gemma2": base("gemma2", "Gemma2ForCausalLM", head_dim=32, num_hidden_layers=4, query_pre_attn_scalar=24,
                   attn_logit_softcapping=5.0, final_logit_softcapping=30.0, sliding_window=4, rope_theta=10000.0,
                   hidden_activation="gelu_pytorch_tanh", attention_bias=False, cache_implementation="hybrid"),
    "gemma3_text": base("gemma3_text", "Gemma3ForCausalLM", head_dim=32, num_hidden_layers=4, query_pre_attn_scalar=32,
                        sliding_window=4, sliding_window_pattern=3, rope_theta=1000000.0, rope_local_base_freq=10000.0,
                        rope_scaling={"factor": 8.0, "rope_type": "linear"}, attn_logit_softcapping=None,
                        final_logit_softcapping=None, attention_bias=False),
    "gpt_oss": base("gpt_oss", "GptOssForCausalLM", head_dim=32, attention_bias=True, sliding_window=4,
                    layer_types=["sliding_attention", "full_attention"], rope_theta=150000.0,
                    max_position_embeddings=131072, num_local_experts=2, num_experts_per_tok=1, experts_per_token=1,
                    swiglu_limit=7.0, router_aux_loss_coef=0.9, output_router_logits=False,
                    rope_scaling={"rope_type": "yarn", "factor": 32.0, "beta_fast": 32.0, "beta_slow": 1.0,
                                  "truncate": False, "original_max_position_embeddings": 64},
                    quantization_config={"quant_method": "mxfp4", "modules_to_not_convert": ["model.layers.*.self_attn"]}),
    "phi3": base("phi3", "Phi3ForCausalLM", num_key_value_heads=4, partial_rotary_factor=0.75, sliding_window=6,
                 rope_theta=10000.0, rope_scaling=None, original_max_position_embeddings=4096, embd_pdrop=0.0,
                 resid_pdrop=0.0, attention_dropout=0.0),
    "deepseek_v3": base("deepseek_v3", "DeepseekV3ForCausalLM", num_key_value_heads=4, q_lora_rank=24, kv_lora_rank=32,
                        qk_nope_head_dim=16, qk_rope_head_dim=32, v_head_dim=24, rope_theta=10000.0,
                        rope_interleave=True, attention_bias=False, num_nextn_predict_layers=1,
                        first_k_dense_replace=1, n_routed_experts=4, num_experts_per_tok=2, n_shared_experts=1,
                        moe_intermediate_size=16, n_group=2, topk_group=1, routed_scaling_factor=2.5,
                        max_position_embeddings=163840,
                        rope_scaling={"type": "yarn", "factor": 40, "beta_fast": 32, "beta_slow": 1, "mscale": 1.0,
                                      "mscale_all_dim": 1.0, "original_max_position_embeddings": 64}),
    "kimi_k2": base("kimi_k2", "DeepseekV3ForCausalLM", num_key_value_heads=4, q_lora_rank=None, kv_lora_rank=32,
                    qk_nope_head_dim=32, qk_rope_head_dim=32, v_head_dim=32, rope_theta=50000.0, attention_bias=True,
                    num_nextn_predict_layers=0, max_position_embeddings=131072,
                    rope_scaling={"type": "yarn", "factor": 32.0, "beta_fast": 1.0, "beta_slow": 1.0, "mscale": 1.0,
                                  "mscale_all_dim": 0.8, "original_max_position_embeddings": 64}),
}


def save(folder, cfg, tensors, dtype="F32"):
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
    write_safetensors(os.path.join(folder, "model.safetensors"),
                      [(n, a, "U8" if a.dtype == np.uint8 else dtype) for n, a in tensors.items()])


def make_family(out, name, seed):
    cfg = dict(CONFIGS[name])
    family = {"gemma3_text": "gemma3", "llama31": "llama", "qwen2_yarn": "qwen2"}.get(name, name)
    rng = np.random.default_rng(seed)
    t = model_tensors(rng, cfg, family)
    if name == "gpt_oss":  # MXFP4 experts: packed 4-bit blocks and scales, U8
        for i in range(cfg["num_hidden_layers"]):
            t[f"model.layers.{i}.mlp.experts.gate_up_proj_blocks"] = rng.integers(0, 256, (2, 192, 2, 16), dtype=np.uint8)
            t[f"model.layers.{i}.mlp.experts.gate_up_proj_scales"] = rng.integers(120, 130, (2, 192, 2), dtype=np.uint8)
    save(os.path.join(out, name), cfg, t)


def make_gemma3_mm(out, seed):
    rng = np.random.default_rng(seed)
    # text_config as save_pretrained writes it: keys at their defaults left
    # out (query_pre_attn_scalar 256, rope_local_base_freq, sliding_window_pattern 6).
    text = {"model_type": "gemma3_text", "hidden_size": 64, "intermediate_size": 32, "num_hidden_layers": 6,
            "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 32, "sliding_window": 4,
            "rope_scaling": {"factor": 8.0, "rope_type": "linear"}, "vocab_size": 32}
    cfg = {"architectures": ["Gemma3ForConditionalGeneration"], "model_type": "gemma3", "text_config": text,
           "vision_config": {"model_type": "siglip_vision_model", "hidden_size": 32, "num_attention_heads": 2,
                             "num_hidden_layers": 1, "image_size": 28, "patch_size": 14},
           "mm_tokens_per_image": 4, "boi_token_index": 30, "eoi_token_index": 31, "image_token_index": 29,
           "transformers_version": "4.50.0"}
    t = model_tensors(rng, text, "gemma3", stem="language_model.model.")
    v = "vision_tower.vision_model.encoder.layers.0.self_attn."
    for n in ("q_proj", "k_proj", "v_proj", "out_proj"):
        t[v + n + ".weight"] = linear(rng, 32, 32)
        t[v + n + ".bias"] = np.zeros(32, np.float32)
    t["multi_modal_projector.mm_input_projection_weight"] = linear(rng, 32, 64)
    save(os.path.join(out, "gemma3_mm"), cfg, t)


def make_sharded(out, seed):
    cfg = dict(CONFIGS["qwen3"], torch_dtype="bfloat16",
               layer_types=["full_attention", "sliding_attention", "sliding_attention"])
    rng = np.random.default_rng(seed)
    t = model_tensors(rng, cfg, "qwen3")
    folder = os.path.join(out, "qwen3_sharded")
    os.makedirs(folder, exist_ok=True)
    names = list(t)
    cut = names.index("model.layers.1.self_attn.v_proj.weight")  # layer 1's attention straddles the shards
    shards = [names[:cut], names[cut:]]
    weight_map = {}
    for i, part in enumerate(shards):
        file = f"model-0000{i + 1}-of-00002.safetensors"
        write_safetensors(os.path.join(folder, file), [(n, t[n], "BF16") for n in part])
        weight_map.update({n: file for n in part})
    with open(os.path.join(folder, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": sum(a.size * 2 for a in t.values())}, "weight_map": weight_map}, f, indent=2)
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)


def make_hf_cache(out, seed):
    """huggingface_hub's cache: blobs named by their sha256, snapshots/REV/FILE -> ../../blobs/SHA."""
    staging = os.path.join(out, "hf_cache", ".staging")
    make_family(staging, "llama", seed)
    repo = os.path.join(out, "hf_cache", "models--mha--tiny")
    rev = "0123456789abcdef0123456789abcdef01234567"
    for d in ("blobs", os.path.join("snapshots", rev), "refs"):
        os.makedirs(os.path.join(repo, d), exist_ok=True)
    for file in ("config.json", "model.safetensors"):
        src = os.path.join(staging, "llama", file)
        data = open(src, "rb").read()
        sha = hashlib.sha256(data).hexdigest()
        with open(os.path.join(repo, "blobs", sha), "wb") as f:
            f.write(data)
        link = os.path.join(repo, "snapshots", rev, file)
        if os.path.lexists(link):
            os.remove(link)
        os.symlink(os.path.join("..", "..", "blobs", sha), link)
        os.remove(src)
    os.rmdir(os.path.join(staging, "llama"))
    os.rmdir(staging)
    with open(os.path.join(repo, "refs", "main"), "w") as f:
        f.write(rev)


MAKERS = {name: (lambda out, seed, n=name: make_family(out, n, seed)) for name in CONFIGS}
MAKERS.update({"gemma3_mm": make_gemma3_mm, "qwen3_sharded": make_sharded, "hf_cache": make_hf_cache})


def main():
    if len(sys.argv) < 2 or sys.argv[1] in ("-h", "--help"):
        print(__doc__)
        return 0 if len(sys.argv) >= 2 else 2
    out = sys.argv[1]
    names = sys.argv[2:] or list(MAKERS)
    for n in names:
        if n not in MAKERS:
            print(f"make_hf_example.py: unknown folder {n!r} (expected one of {', '.join(MAKERS)})", file=sys.stderr)
            return 2
    for n in names:
        MAKERS[n](out, 1000 + sorted(MAKERS).index(n))
    return 0


if __name__ == "__main__":
    sys.exit(main())
