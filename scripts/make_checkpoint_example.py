#!/usr/bin/python3
"""Writes data/checkpoint_example/: a tiny two-layer checkpoint in the layout
Hugging Face's save_pretrained gives a sharded model, for
configs/checkpoint_prefix_torch_mha.json.

  model.safetensors.index.json          {"metadata": {...}, "weight_map": {name: shard}}
  model-00001-of-00002.safetensors      embeddings, layer 0, layer 1's projections
  model-00002-of-00002.safetensors      layer 1's biases and output projection
  layer1_output.npy                     torch's output of layer 1 (weights as stored,
                                        widened) on the config's inputs, its reference

Each layer is a torch.nn.MultiheadAttention(8, 2) (torch.manual_seed(layer)) whose
state_dict() sits under "model.layers.L.self_attn."; projection weights are
stored as bfloat16, the output projection as float16, biases as float32, so a
run exercises the widening of both half formats. Layer 1 straddles the shards.
Run: /usr/bin/python3 scripts/make_checkpoint_example.py [OUT_DIR]
"""
import json
import os
import struct
import sys

import numpy as np
import torch

DTYPES = {torch.float32: "F32", torch.float16: "F16", torch.bfloat16: "BF16"}


def write_safetensors(path, tensors):
    """The safetensors layout: u64 header length, JSON header, data (8-byte aligned)."""
    header, data, offset = {}, b"", 0
    for name, t in tensors.items():
        raw = t.contiguous().view(torch.uint8).numpy().tobytes() if t.dtype != torch.float32 else t.numpy().tobytes()
        header[name] = {"dtype": DTYPES[t.dtype], "shape": list(t.shape), "data_offsets": [offset, offset + len(raw)]}
        data += raw
        offset += len(raw)
    text = json.dumps(header, separators=(",", ":"))
    text += " " * ((8 - len(text) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text.encode() + data)


def stored(name, t):
    if name.endswith("in_proj_weight"):
        return t.to(torch.bfloat16)
    if name.endswith("out_proj.weight"):
        return t.to(torch.float16)
    return t


def main():
    out_dir = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "data", "checkpoint_example")
    os.makedirs(out_dir, exist_ok=True)
    torch.manual_seed(100)
    shards = [{"model.embed_tokens.weight": torch.randn(16, 8)}, {}]
    layers = []
    for layer in range(2):
        torch.manual_seed(layer)
        mha = torch.nn.MultiheadAttention(8, 2, batch_first=True)
        for key, t in mha.state_dict().items():
            name = f"model.layers.{layer}.self_attn.{key}"
            shard = 1 if layer == 1 and ("bias" in key or "out_proj" in key) else 0
            shards[shard][name] = stored(name, t.detach())
            with torch.no_grad():
                t.copy_(shards[shard][name].float())  # what mha computes from: the stored values, widened
        layers.append(mha)
    files = [f"model-0000{i + 1}-of-00002.safetensors" for i in range(2)]
    weight_map = {}
    for f, tensors in zip(files, shards):
        write_safetensors(os.path.join(out_dir, f), tensors)
        weight_map.update({name: f for name in tensors})
    total = sum(t.numel() * t.element_size() for s in shards for t in s.values())
    with open(os.path.join(out_dir, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": total}, "weight_map": dict(sorted(weight_map.items()))}, f, indent=2)
        f.write("\n")
    # The config's inputs: {"seed": 0, "query"/"key"/"value": {"randn": [1, 5, 8]}}, drawn in order.
    torch.manual_seed(0)
    q, k, v = (torch.randn(1, 5, 8) for _ in range(3))
    with torch.no_grad():
        out, _ = layers[1](q, k, v)
    np.save(os.path.join(out_dir, "layer1_output.npy"), out.numpy())


if __name__ == "__main__":
    main()
