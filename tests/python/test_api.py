"""mha.run / mha.compare / mha.op: the CLI's results, in process."""
import json
import os

import numpy as np
import pytest
import torch

import mha
from conftest import assert_same_bits

SMALL_TT = {
    "name": "small-tt",
    "variant": "ttnn_mha",
    "params": {"hidden_size": 64, "num_heads": 4},
    "weights": {"init": "torch", "seed": 3},
    "inputs": {"seed": 1, "x": {"rand": [2, 64, 64]}, "attention_mask": {"rand": [2, 1, 1, 64]}},
    "backend": {"name": "tt-sim", "device": "wormhole_b0"},
    "runs": {"warmup": 0, "iterations": 1},
}


def write_config(tmp_path, config, name="c.json"):
    path = os.path.join(tmp_path, name)
    with open(path, "w") as f:
        json.dump(config, f)
    return path


def test_run_equals_cli(tmp_path, cli):
    path = write_config(tmp_path, SMALL_TT)
    out = os.path.join(tmp_path, "o.npy")
    cli.run("run", "--config", path, "-o", out)
    res = mha.run(path)
    assert_same_bits(res.output, np.load(out))
    assert res.report["backend"] == "tt-sim" and res.exit_code == 0
    assert_same_bits(mha.run(SMALL_TT).output, np.load(out))  # the config as a dict


def test_run_with_given_inputs_and_weights(tmp_path, cli):
    """inputs= / weights= replace the config's, as files named in the config would."""
    torch.manual_seed(0)
    x, mask = torch.rand(2, 64, 64), torch.rand(2, 1, 1, 64)
    weights = {f"{n}_{k}": torch.rand(64, 64) if k == "weight" else torch.rand(64)
               for n in ("query", "key", "value", "output") for k in ("weight", "bias")}
    np.savez(os.path.join(tmp_path, "w.npz"), **{k: v.numpy() for k, v in weights.items()})
    np.save(os.path.join(tmp_path, "x.npy"), x.numpy())
    np.save(os.path.join(tmp_path, "m.npy"), mask.numpy())
    files = dict(SMALL_TT, weights={"file": "w.npz"}, inputs={"x": "x.npy", "attention_mask": "m.npy"})
    out = os.path.join(tmp_path, "o.npy")
    cli.run("run", "--config", write_config(tmp_path, files), "-o", out)
    res = mha.run(SMALL_TT, inputs={"x": x, "attention_mask": mask}, weights=weights, stages=True)
    assert isinstance(res.output, torch.Tensor)  # torch in, torch out
    assert_same_bits(res.output, np.load(out))
    assert {"q", "scores", "weights", "output"} <= set(res.stages)


def test_run_errors_carry_the_cli_line(tmp_path):
    bad = dict(SMALL_TT, params={"hidden_size": 64, "num_heads": 5})
    with pytest.raises(mha.Error) as e:
        mha.run(bad)
    assert "\n" not in str(e.value) and "num_heads" in str(e.value)
    with pytest.raises(mha.Error, match="cannot read"):
        mha.run(os.path.join(tmp_path, "missing.json"))


def test_compare_equals_cli(tmp_path, cli):
    torch.manual_seed(1)
    ref = torch.randn(4, 32)
    out = ref + 1e-3 * torch.randn(4, 32)
    for kwargs, flags in [({}, []), ({"pcc": 0.9999}, ["--pcc", "0.9999"]), ({"atol": 1e-2}, ["--atol", "0.01"]),
                          ({"dtype": "bfloat16"}, ["--dtype", "bfloat16"])]:
        r = mha.compare(ref, out, **kwargs)
        p = cli.run("compare", cli.save(ref), cli.save(out), *flags, "--json", "-", check=False)
        assert p.returncode == r.exit_code
        assert json.loads(p.stdout)["pcc"] == r.report["pcc"]
    # a torch bfloat16 tensor is compared as bfloat16 (the dtype check sees it)
    r = mha.compare(ref, ref.bfloat16())
    assert not r.passed and any(c["name"] == "dtype" and not c["passed"] for c in r.report["checks"])
    with pytest.raises(mha.Error):
        mha.compare(ref, torch.randn(3, 32))


def test_op_errors_are_the_cli_line(cli):
    x = np.ones((4, 4), np.float32)
    p = cli.run("op", "nope", cli.save(x), "-o", os.path.join(cli.folder, "o.npy"), check=False)
    with pytest.raises(mha.Error) as e:
        mha.op("nope", x)
    assert p.returncode == 2 and str(e.value) in p.stderr
    with pytest.raises(mha.Error, match="math_fidelity"):
        mha.op("softmax", x, math_fidelity="HiFi9")


def test_op_numpy_in_numpy_out(cli):
    x = np.random.default_rng(0).standard_normal((2, 32, 64)).astype(np.float32)
    got, info = mha.op("softmax", x, dtype="bfloat8_b", info=True)
    assert isinstance(got, np.ndarray) and info["output"]["dtype"] == "bfloat8_b"
    assert_same_bits(got, cli.op("softmax", x, dtypes=["bfloat8_b"]))
