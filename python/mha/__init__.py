"""mha from Python: the library behind the `mha` CLI, called directly.

    import mha
    result = mha.run("configs/seed002_tt_ttnn_mha.json")      # mha run
    check = mha.compare(ref, out, pcc=0.999)                   # mha compare
    y = mha.op("softmax", x, math_fidelity="HiFi4")            # mha op

Tensors are numpy arrays or torch tensors; results come back as torch when
any tensor given was torch, else numpy. Bad input raises mha.Error (a
ValueError) carrying the CLI's one-line message. `mha.ttnn` is TT-NN's
Python API on tt-sim (docs/PYTHON.md).
"""
import json
import os

from . import _core
from ._arrays import is_torch, like, to_numpy

Error = _core.Error

__all__ = ["Error", "run", "compare", "op", "ops", "RunResult", "CompareResult"]


class RunResult:
    """What `mha run` reports: output, attention weights, stages, report."""

    def __init__(self, d, want_torch):
        self.output = like(d["output"], want_torch)
        self.attn_weights = like(d["attn_weights"], want_torch)
        self.stages = {k: like(v, want_torch) for k, v in d["stages"].items()}
        self.report = d["report"]
        self.passed = d["passed"]  # False only when the config's reference comparison failed
        self.comparison_text = d["text"]

    @property
    def exit_code(self):
        return 0 if self.passed else 1

    def __repr__(self):
        return f"RunResult(output shape {tuple(self.output.shape)}, backend {self.report.get('backend')})"


class CompareResult:
    """What `mha compare` reports. bool(result) is `passed`; exit_code is the
    CLI's (0 pass, 1 fail; unusable input raises mha.Error, the CLI's 2)."""

    def __init__(self, d):
        self.passed = d["passed"]
        self.report = d["report"]
        self.text = d["text"]

    @property
    def exit_code(self):
        return 0 if self.passed else 1

    @property
    def pcc(self):
        return self.report.get("pcc")

    def __bool__(self):
        return self.passed

    def __str__(self):
        return self.text

    def __repr__(self):
        return f"CompareResult(passed={self.passed})"


def _named_arrays(tensors, what):
    out, torch_seen = {}, False
    for name, t in (tensors or {}).items():
        torch_seen = torch_seen or is_torch(t)
        out[name] = to_numpy(t, f"{what}.{name}")[0]
    return out, torch_seen


def run(config, *, inputs=None, weights=None, need_weights=False, stages=False, warmup=None, iterations=None):
    """`mha run --config CONFIG` in this process.

    config: a path to a JSON config, or the config as a dict (relative paths
    inside a dict resolve against the current folder). inputs / weights:
    {name: tensor} replacing the config's inputs of that name (its other rand
    inputs keep their values) and its weights (the variant's state_dict names,
    all of them). need_weights / stages: also return the attention weights /
    the named intermediate stages. warmup / iterations override the config's
    "runs". Returns a RunResult.
    """
    if isinstance(config, dict):
        text, folder, file = json.dumps(config), os.getcwd(), "config"
    else:
        file = os.fspath(config)
        try:
            with open(file, encoding="utf-8") as f:
                text = f.read()
        except OSError as e:
            raise Error(f"{file}: cannot read the config: {e.strerror}") from None
        folder = os.path.dirname(os.path.abspath(file))
    in_arrays, t1 = _named_arrays(inputs, "inputs")
    w_arrays, t2 = _named_arrays(weights, "weights")
    try:
        d = _core.run(text, folder, file, in_arrays, w_arrays if weights is not None else None, need_weights,
                      stages, warmup, iterations)
    except json.JSONDecodeError as e:  # pragma: no cover - the library parses
        raise Error(f"{file}: {e}") from None
    return RunResult(d, t1 or t2)


def compare(ref, out, *, dtype=None, atol=None, rtol=None, pcc=None, max_abs=None, mean_abs=None, ulp=None,
            equal_nan=False, top=5, ref_name="REF", out_name="OUT"):
    """`mha compare REF OUT` on two tensors (docs/COMPARE.md): the same
    checks, defaults and report. Returns a CompareResult."""
    r, r_as = to_numpy(ref, ref_name)
    o, o_as = to_numpy(out, out_name)
    return CompareResult(_core.compare(r, r_as, o, o_as, dtype, atol, rtol, pcc, max_abs, mean_abs, ulp, equal_nan,
                                       top, ref_name, out_name))


_OP_PARAMS = None


def ops():
    """The ops `mha op` runs: name, operands, summary, defaults, own params."""
    global _OP_PARAMS
    if _OP_PARAMS is None:
        _OP_PARAMS = _core.op_table()
    return _OP_PARAMS


def _option_value(key, v):
    """An option as the backend object's JSON (a page table tensor becomes
    rows of block ids, a position tensor a list)."""
    if key in ("page_table", "cur_pos") and (is_torch(v) or hasattr(v, "shape")):
        a = to_numpy(v, key)[0]
        if a.dtype.kind == "f":
            raise Error(f"{key}: expected an integer tensor, found {a.dtype}")
        return a.tolist()
    if hasattr(v, "name") and not isinstance(v, (str, bytes)):  # MathFidelity and friends
        return v.name
    return v


def op(name, *tensors, dtype=None, dtypes=None, output_dtype=None, scalar=None, info=False, **options):
    """`mha op NAME INPUT...` on tensors: one TT-NN op on tt-sim.

    dtype: every input's device dtype (default bfloat16, as `--dtype`);
    dtypes: one per input (None keeps dtype), as `--inN-dtype`;
    output_dtype, scalar: `--output-dtype`, `--scalar`; options: any tt-sim
    backend key or the op's own (math_fidelity="HiFi4", core_grid=[8, 8],
    cur_pos=[...], page_table=tensor, k_chunk_size=64, ...), as `--option`.
    Returns the output (the device's values, float32); with info=True,
    (output, report) where report is `mha op --json`'s.
    """
    out, report = _op(name, tensors, dtype, dtypes, output_dtype, scalar, options)
    out = like(out, any(is_torch(t) for t in tensors))
    return (out, report) if info else out


def _op(name, tensors, dtype, dtypes, output_dtype, scalar, options, keep=False):
    """op's call of the library: tensors may also be _core.Tiles (an earlier
    op's output kept on the device, mha.ttnn's device tensors); keep: the
    output stays _core.Tiles. Returns (output, report)."""
    name = name.replace("_", "-")
    inputs = [t if isinstance(t, _core.Tiles) else to_numpy(t, f"{name} input {i}")[0]
              for i, t in enumerate(tensors)]
    opts = {k: _option_value(k, v) for k, v in options.items() if v is not None}
    if dtype is not None:
        opts["dtype"] = getattr(dtype, "name", dtype)
    per_input = [None if d is None else getattr(d, "name", d) for d in (dtypes or [])]
    out_dt = None if output_dtype is None else getattr(output_dtype, "name", output_dtype)
    return _core.op(name, inputs, per_input, json.dumps(opts), out_dt, None if scalar is None else float(scalar),
                    keep)
