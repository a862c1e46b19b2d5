#!/usr/bin/python3
"""Writes the fuzz seed corpora in tests/fuzz/corpus/ (small, valid files that
start each fuzzer at the formats' interesting paths). Run with Debian's
/usr/bin/python3 (numpy); the output is committed, so this only needs
re-running when a seed is added."""
import glob
import io
import json
import os
import shutil
import struct

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
OUT = os.path.join(HERE, "corpus")


def npy_bytes(a, fortran=False):
    b = io.BytesIO()
    np.lib.format.write_array(b, np.asfortranarray(a) if fortran else a, version=None)
    return b.getvalue()


def npz_bytes(compressed, **arrays):
    b = io.BytesIO()
    (np.savez_compressed if compressed else np.savez)(b, **arrays)
    return b.getvalue()


def safetensors_bytes(tensors, metadata=None):
    header, data, off = {}, b"", 0
    for name, (dtype, shape, raw) in tensors.items():
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [off, off + len(raw)]}
        data += raw
        off += len(raw)
    if metadata is not None:
        header["__metadata__"] = metadata
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    return struct.pack("<Q", len(h)) + h + data


def write(target, name, data):
    d = os.path.join(OUT, target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def main():
    shutil.rmtree(OUT, ignore_errors=True)
    a23 = np.arange(6, dtype=np.float32).reshape(2, 3) - 2.5
    npys = {
        "f4_c.npy": npy_bytes(a23),
        "f8_fortran.npy": npy_bytes(np.arange(12, dtype=np.float64).reshape(3, 2, 2), fortran=True),
        "i2_big_endian.npy": npy_bytes(np.arange(5, dtype=">i2")),
        "b1.npy": npy_bytes(np.array([[True, False], [False, True]])),
        "u1_scalar.npy": npy_bytes(np.array(7, dtype=np.uint8)),
        "f2_empty.npy": npy_bytes(np.zeros((0, 3), dtype=np.float16)),
        "u4_unit_dims.npy": npy_bytes(np.arange(4, dtype=np.uint32).reshape(1, 2, 1, 2, 1), fortran=True),
    }
    # a version 2.0 file (4-byte header length)
    b = io.BytesIO()
    np.lib.format.write_array(b, np.arange(3, dtype=np.int64), version=(2, 0))
    npys["i8_v2.npy"] = b.getvalue()
    for n, d in npys.items():
        write("npy", n, d)

    write("npz", "stored.npz", npz_bytes(False, x=a23, mask=np.array([True, False])))
    write("npz", "deflated.npz", npz_bytes(True, w=np.zeros((4, 4), np.float32), b=np.arange(4, dtype=np.int16)))
    write("npz", "one.npz", npz_bytes(True, x=np.arange(3, dtype=np.float64)))

    sts = {
        "f32.safetensors": safetensors_bytes({"w": ("F32", [2, 3], a23.tobytes())}),
        "mixed.safetensors": safetensors_bytes(
            {"b": ("BF16", [2], b"\x80\x3f\x00\x40"), "i": ("I64", [1], struct.pack("<q", -5)),
             "e": ("BOOL", [0], b"")}, {"format": "pt"}),
        "f16_3d.safetensors": safetensors_bytes({"x": ("F16", [1, 2, 1], np.ones(2, np.float16).tobytes())}),
    }
    for n, d in sts.items():
        write("safetensors", n, d)

    for path in sorted(glob.glob(os.path.join(ROOT, "configs", "*.json"))):
        with open(path, "rb") as f:
            write("config", os.path.basename(path), f.read())
    write("config", "suite.json", json.dumps(
        [{"variant": "mha", "backend": "tt-sim", "batch": 1, "seq": 4, "hidden": 8, "heads": 2, "causal": True,
          "backend_options": {"kernels": "auto"}}]).encode())

    # compare: byte 0 selects formats/options, bytes 1-2 the reference length
    def pair(sel, ref, out):
        return bytes([sel]) + struct.pack("<H", len(ref)) + ref + out

    close = a23 + np.float32(1e-6)
    write("compare", "npy_npy.bin", pair(0x00, npys["f4_c.npy"], npy_bytes(close)))
    write("compare", "npy_npy_checks.bin", pair(0x80 | 0x40, npys["f4_c.npy"], npy_bytes(a23 * 2)))
    write("compare", "npz_st_bf16.bin",
          pair(1 + 3 * 2 + (2 << 4), npz_bytes(False, x=a23), sts["f32.safetensors"]))
    nan = a23.copy()
    nan[0, 1] = np.nan
    nan[1, 2] = np.inf
    write("compare", "st_npy_nan.bin", pair(2 + (3 << 4) + 0x40, sts["f32.safetensors"], npy_bytes(nan)))
    write_loading_seeds()


def write_loading_seeds():
    """checkpoint, decode_parallel and llama_params (issue 22's targets)."""
    # checkpoint: first line the prefix, then the index (shards: fuzz_checkpoint.cpp)
    layer0 = {"model.layers.0.attn." + n: "model-00001-of-00003.safetensors"
              for n in ("in_proj_weight", "in_proj_bias", "out_proj.weight", "out_proj.bias")}
    def index(wm, meta=True):
        return json.dumps({"metadata": {"total_size": 0}, "weight_map": wm} if meta else {"weight_map": wm}).encode()
    write("checkpoint", "prefix.bin", b"model.layers.0.attn.\n" + index(layer0))
    write("checkpoint", "no_prefix.bin", b"\n" + index(layer0, False))
    write("checkpoint", "wrong_shape_extra.bin", b"model.layers.1.attn.\n" + index(
        dict(layer0, **{"model.layers.1.attn.out_proj.weight": "model-00002-of-00003.safetensors",
                        "model.layers.1.attn.extra": "model-00002-of-00003.safetensors"})))
    write("checkpoint", "fifo_and_bad.bin", b"model.layers.0.attn.\n" + index(
        dict(layer0, **{"model.layers.0.attn.out_proj.weight": "fifo.safetensors",
                        "model.layers.0.attn.in_proj_bias": "model-00003-of-00003.safetensors"})))
    write("checkpoint", "escape.bin", b"model.\n" + index({"model.x": "../x.safetensors", "model.y": 5}))

    # decode_parallel: keys beside a small llama_attention config
    for n, d in {
        "decode.json": {"decode": {"prompt": 4, "tokens": 3, "cache_dtype": "bfloat16", "depth": 16}},
        "decode_overflow.json": {"decode": {"prompt": 9223372036854775807, "tokens": 9223372036854775807}},
        "ring.json": {"parallel": {"sequence": 3}, "decode": {"prompt": 15}},
        "ring_one.json": {"parallel": {"sequence": 1}},
        "heads.json": {"parallel": {"heads": 2}},
    }.items():
        write("decode_parallel", n, json.dumps(d).encode())

    # llama_params: params objects, the overflowing ones included
    for n, d in {
        "small.json": {"hidden_size": 8, "num_attention_heads": 2, "num_key_value_heads": 1, "rope_theta": 500000.0,
                       "attention_bias": True, "sliding_window": 4},
        "head_dim.json": {"hidden_size": 16, "num_attention_heads": 4, "head_dim": 6, "sliding_window": None},
        "overflow.json": {"hidden_size": 64, "num_attention_heads": 4294967296, "num_key_value_heads": 4294967296,
                          "head_dim": 4294967296},
        "huge.json": {"hidden_size": 64, "num_attention_heads": 1048576, "head_dim": 1048576},
        # issue 29's families: a layer of each, with the keys their configs carry
        "qwen3.json": {"model_type": "qwen3", "hidden_size": 16, "num_attention_heads": 2, "num_key_value_heads": 1,
                       "head_dim": 12, "use_sliding_window": True, "sliding_window": 3, "max_window_layers": 1,
                       "layer_idx": 1, "num_hidden_layers": 2, "rms_norm_eps": 1e-6},
        "gemma3.json": {"model_type": "gemma3_text", "hidden_size": 16, "num_attention_heads": 2,
                        "num_key_value_heads": 1, "head_dim": 8, "query_pre_attn_scalar": 8, "sliding_window": 4,
                        "sliding_window_pattern": 3, "layer_idx": 2, "rope_local_base_freq": 10000.0,
                        "rope_scaling": {"rope_type": "linear", "factor": 8.0}, "attn_logit_softcapping": 30.0},
        "gpt_oss.json": {"model_type": "gpt_oss", "hidden_size": 16, "num_attention_heads": 2, "num_key_value_heads": 1,
                         "head_dim": 8, "sliding_window": 4, "layer_types": ["sliding_attention", "full_attention"],
                         "num_hidden_layers": 2, "layer_idx": 0,
                         "rope_scaling": {"rope_type": "yarn", "factor": 32.0, "beta_fast": 32.0, "beta_slow": 1.0,
                                          "truncate": False, "original_max_position_embeddings": 4096}},
        "phi3.json": {"model_type": "phi3", "hidden_size": 16, "num_attention_heads": 2, "num_key_value_heads": 2,
                      "partial_rotary_factor": 0.75, "sliding_window": 5},
        "llama31.json": {"hidden_size": 16, "num_attention_heads": 2, "rope_theta": 500000.0,
                         "rope_scaling": {"type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                                          "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}},
    }.items():
        write("llama_params", n, json.dumps(d).encode())


if __name__ == "__main__":
    main()
