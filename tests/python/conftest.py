"""Shared by tests/python: the mha.ttnn pytest plugin, and `mha op` / `mha
run` through the CLI binary (the oracle the package must equal bit for bit).
ctest sets MHA_BINARY and PYTHONPATH (python/CMakeLists.txt)."""
import json
import os
import subprocess

import numpy as np
import pytest

pytest_plugins = ["mha.ttnn.testing"]

SOURCE_DIR = os.environ.get("MHA_SOURCE_DIR", os.path.dirname(os.path.dirname(os.path.dirname(__file__))))
MHA = os.environ.get("MHA_BINARY", os.path.join(SOURCE_DIR, "build", "mha"))


def _np(x):
    if hasattr(x, "detach"):
        x = x.detach().float().numpy()
    return np.ascontiguousarray(np.asarray(x, dtype=np.float32))


class Cli:
    """The `mha` binary, with arrays written to and read from .npy files."""

    def __init__(self, folder):
        self.folder = folder
        self.n = 0

    def save(self, x, dtype=None):
        self.n += 1
        path = os.path.join(self.folder, f"t{self.n}.npy")
        np.save(path, _np(x) if dtype is None else np.asarray(x, dtype=dtype))
        return path

    def run(self, *args, check=True):
        p = subprocess.run([MHA, *map(str, args)], capture_output=True, text=True)
        if check and p.returncode != 0:
            raise AssertionError(f"mha {' '.join(map(str, args))}: exit {p.returncode}: {p.stderr}")
        return p

    def op(self, name, *tensors, dtypes=None, output_dtype=None, scalar=None, cur_pos=None, page_table=None,
           **options):
        """`mha op NAME ...`: dtypes per input, options as --option KEY=JSON."""
        out = os.path.join(self.folder, f"out{self.n}.npy")
        args = ["op", name, *[self.save(t) for t in tensors], "-o", out]
        for i, d in enumerate(dtypes or []):
            if d is not None:
                args += [f"--in{i}-dtype", d]
        if output_dtype:
            args += ["--output-dtype", output_dtype]
        if scalar is not None:
            args += ["--scalar", repr(float(scalar))]
        if cur_pos is not None:
            args += ["--cur-pos", ",".join(map(str, cur_pos))]
        if page_table is not None:
            args += ["--page-table", self.save(np.asarray(page_table), dtype=np.int32)]
        for k, v in options.items():
            args += ["--option", f"{k}={json.dumps(v)}"]
        self.run(*args)
        return np.load(out)


@pytest.fixture
def cli(tmp_path):
    return Cli(str(tmp_path))


def bits(x):
    """The float32 bit patterns of x (numpy or torch), for exact comparisons."""
    return _np(x).view(np.uint32)


def assert_same_bits(got, want):
    g, w = bits(got), bits(want)
    assert g.shape == w.shape, f"shape {g.shape} vs {w.shape}"
    diff = np.flatnonzero(g != w)
    assert diff.size == 0, (f"{diff.size} of {g.size} values differ; first at flat {diff[0]}: "
                            f"{_np(got).reshape(-1)[diff[0]]!r} vs {_np(want).reshape(-1)[diff[0]]!r}")
