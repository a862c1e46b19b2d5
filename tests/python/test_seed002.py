"""Seed 002's notebook, as a script with `import ttnn` replaced by `import
mha.ttnn as ttnn`, runs at its own shape to its own `assert torch.allclose`,
and its two outputs equal bit for bit what `mha run` gives through
configs/seed002_tt_ttnn_mha.json and seed002_tt_ttnn_mha_fused.json on the
same inputs and weights.

The notebook asks for a CoreGrid(y=8, x=12), which a Wormhole n150's 8 x 8
grid refuses (tt-sim as TT-NN); it runs on ARCH_NAME=blackhole (10 x 13),
and the configs run with the same device and grid."""
import json
import os
import runpy

import mha
from conftest import SOURCE_DIR, assert_same_bits

HERE = os.path.dirname(os.path.abspath(__file__))


def load(name):
    with open(os.path.join(SOURCE_DIR, "configs", name)) as f:
        return json.load(f)


def test_seed002_notebook_equals_mha_run(monkeypatch):
    monkeypatch.setenv("ARCH_NAME", "blackhole")
    g = runpy.run_path(os.path.join(HERE, "seed002_notebook.py"))  # runs to its assert
    ttnn = g["ttnn"]

    def host(name):
        return ttnn.to_torch(g[name]).float()

    inputs = {"x": host("hidden_states"), "attention_mask": host("attention_mask")}
    plain = load("seed002_tt_ttnn_mha.json")
    plain["backend"]["device"] = "blackhole"
    weights = {n: host(n) for n in ("query_weight", "query_bias", "key_weight", "key_bias", "value_weight",
                                    "value_bias")}
    weights["output_weight"] = host("output_weight")
    weights["output_bias"] = host("output_bias").reshape(-1)
    res = mha.run(plain, inputs=inputs, weights=weights)
    assert_same_bits(res.output, host("output"))

    fused = load("seed002_tt_ttnn_mha_fused.json")
    fused["backend"].update({"device": "blackhole", "core_grid": [8, 12]})
    fused_weights = {"fused_qkv_weight": host("qkv_weight"), "fused_qkv_bias": host("qkv_bias").reshape(-1),
                     "self_output_weight": host("output_weight"),
                     "self_output_bias": host("output_bias").reshape(-1)}
    res = mha.run(fused, inputs=inputs, weights=fused_weights)
    assert_same_bits(res.output, host("optimized_output"))
