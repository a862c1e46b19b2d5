#!/usr/bin/python3
r"""What a call through mha.ttnn costs against the same work inside `mha run`.

Seed 002's two pipelines at the notebook's shape (8 x 384 x 1024, 16 heads), written as the
notebook writes them (tests/python/seed002_notebook.py's multi_head_attention and
optimized_multi_head_attention, bound to mha.ttnn), against `mha.run` of the seed configs that run
the same pipelines (configs/seed002_tt_ttnn_mha.json, seed002_tt_ttnn_mha_fused.json) on the same
inputs and weights, at the configs' tt_metal profile (2024) and on Blackhole (the notebook's
CoreGrid(y=8, x=12) needs its 10 x 13 grid).

Both sides are the process's CPU time (user + sys), so the figure holds on a loaded machine:
  - mha.ttnn: one call of the pipeline on device tensors (each op takes its operands' tiles as the
    earlier op left them; values are read back only for the host-side data movement), after one
    call that fills the program cache;
  - mha run: (a run with 1 + r cached passes) - (a run with 1), over r: one cached pass, inputs
    already on the device.
It also checks that both give the same bits, so the two sides did the same work.

  PYTHONPATH=build/python /usr/bin/python3 scripts/ttnn_call_cost.py -r 5
"""
import argparse
import ast
import json
import os
import statistics
import sys
import time

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.dirname(HERE)


def notebook_functions(ttnn):
    """The notebook's two pipeline functions, bound to mha.ttnn."""
    path = os.path.join(SOURCE, "tests", "python", "seed002_notebook.py")
    with open(path) as f:
        tree = ast.parse(f.read())
    names = ("multi_head_attention", "optimized_multi_head_attention")
    body = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name in names]
    g = {"ttnn": ttnn}
    exec(compile(ast.Module(body=body, type_ignores=[]), path, "exec"), g)
    return g[names[0]], g[names[1]]


def cpu():
    return time.process_time()


def median_range(xs):
    return statistics.median(xs), min(xs), max(xs)


def run_cost(mha, config, inputs, weights, r):
    """One cached pass of `mha run`, in CPU seconds, and its output."""
    t0 = cpu()
    mha.run(config, inputs=inputs, weights=weights, warmup=0, iterations=1)
    one = cpu() - t0
    t0 = cpu()
    res = mha.run(config, inputs=inputs, weights=weights, warmup=0, iterations=1 + r)
    return (cpu() - t0 - one) / r, res.output


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-r", "--repeats", type=int, default=5, help="cached calls per side (default 5)")
    args = ap.parse_args()
    os.environ["ARCH_NAME"] = "blackhole"
    import mha
    import mha.ttnn as ttnn

    plain_fn, fused_fn = notebook_functions(ttnn)
    torch.manual_seed(0)
    b, s, h, heads = 8, 384, 1024, 16
    x, mask = torch.rand(b, s, h), torch.rand(b, 1, 1, s)
    w = {f"{n}_{k}": torch.rand(h, h) if k == "weight" else torch.rand(h)
         for n in ("query", "key", "value", "output") for k in ("weight", "bias")}
    device = ttnn.open_device(device_id=0, options={"tt_metal": "2024"})

    def dev(t):
        return ttnn.from_torch(t, dtype=ttnn.bfloat16, layout=ttnn.TILE_LAYOUT, device=device)

    def load(name, **backend):
        with open(os.path.join(SOURCE, "configs", name)) as f:
            c = json.load(f)
        c["backend"].update({"device": "blackhole", **backend})
        return c

    hx, hmask = dev(x), dev(mask)
    plain_args = [dev(w[f"{n}_{k}"]) for n in ("query", "key", "value", "output") for k in ("weight", "bias")]
    qkv_w = dev(torch.cat([w["query_weight"], w["key_weight"], w["value_weight"]], dim=-1))
    qkv_b = dev(torch.cat([w["query_bias"], w["key_bias"], w["value_bias"]]).reshape(1, -1))
    fused_args = [qkv_w, qkv_b, dev(w["output_weight"]), dev(w["output_bias"].reshape(1, -1))]
    # The configs' weights are what the device tensors hold (bf16 values).
    host = {k: ttnn.to_torch(v).float() for k, v in zip([f"{n}_{k}" for n in ("query", "key", "value", "output")
                                                           for k in ("weight", "bias")], plain_args)}
    inputs = {"x": ttnn.to_torch(hx).float(), "attention_mask": ttnn.to_torch(hmask).float()}
    fused_weights = {"fused_qkv_weight": ttnn.to_torch(qkv_w).float(),
                     "fused_qkv_bias": ttnn.to_torch(qkv_b).float().reshape(-1),
                     "self_output_weight": host["output_weight"], "self_output_bias": host["output_bias"]}
    cases = [
        ("seed002 ttnn_mha", lambda: plain_fn(hx, hmask, *plain_args, num_heads=heads),
         load("seed002_tt_ttnn_mha.json"), host),
        ("seed002 fused", lambda: fused_fn(hx, hmask, *fused_args, num_heads=heads),
         load("seed002_tt_ttnn_mha_fused.json", core_grid=[8, 12]), fused_weights),
    ]
    print("| pipeline | mha.ttnn call, CPU s: median (range) | mha run cached pass, CPU s | ratio | same bits |")
    print("|---|---|---|---:|---|")
    for name, call, config, weights in cases:
        out = call()  # fills the program cache
        calls = []
        for _ in range(args.repeats):
            t0 = cpu()
            out = call()
            calls.append(cpu() - t0)
        run_s, run_out = run_cost(mha, config, inputs, weights, args.repeats)
        same = torch.equal(ttnn.to_torch(out).float().view(torch.int32), run_out.float().view(torch.int32))
        m, lo, hi = median_range(calls)
        print(f"| {name} | {m:.3f} ({lo:.3f}-{hi:.3f}) | {run_s:.3f} | {m / run_s:.2f} | {same} |", flush=True)
    ttnn.close_device(device)
    return 0


if __name__ == "__main__":
    sys.exit(main())
