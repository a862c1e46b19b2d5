"""What the scripts that run tt-metal's tests and the accuracy study through `mha op` share:
tt-metal's comp_pcc, and a runner for one `mha op` on torch tensors: in this process through the
Python package `mha` (docs/PYTHON.md) when it was built beside the binary (BUILD/python), else by
running the binary on .npy files. Both run the same library call, so the results are the same bits.

Imported by scripts/ttmetal_decode_tests.py, scripts/ttsim_accuracy.py and
scripts/ttmetal_sdpa_large_seq.py (run them with /usr/bin/python3, which has torch and numpy).
"""
import json
import math
import os
import subprocess
import sys
import time

import numpy as np
import torch


def comp_pcc(golden, calculated):
    """tt-metal's comp_pcc: Pearson correlation of the flattened tensors (1.0 when both are equal)."""
    g = golden.double().flatten()
    c = calculated.double().flatten()
    if torch.equal(g, c):
        return 1.0
    g = g - g.mean()
    c = c - c.mean()
    return float((g * c).sum() / math.sqrt(float((g * g).sum()) * float((c * c).sum())))


def load_package(binary):
    """The `mha` package built beside BINARY (BUILD/python/mha), or None."""
    folder = os.path.join(os.path.dirname(os.path.abspath(binary)), "python")
    if not os.path.isdir(os.path.join(folder, "mha")):
        return None
    if folder not in sys.path:
        sys.path.insert(0, folder)
    import mha
    return mha


# `mha op` flags that take a value, as mha.op keywords (the page table and the tensors are files).
_VALUE_FLAGS = {"--dtype": "dtype", "--output-dtype": "output_dtype", "--math-fidelity": "math_fidelity",
                "--memory-config": "memory_config", "--device": "device", "--scalar": "scalar",
                "--update-idx": "update_idx", "--batch-offset": "batch_offset", "--batch-idx": "batch_idx"}
_BOOL_FLAGS = {"--fp32-dest-acc-en": "fp32_dest_acc_en", "--math-approx-mode": "math_approx_mode"}


def op_call(args, tensor_of):
    """An `mha op` argument list as (name, tensors, keywords) for mha.op; tensor_of(path) reads a file."""
    args = [str(a) for a in args]
    name, tensors, kw, dtypes, i = args[0], [], {}, {}, 1
    while i < len(args):
        a = args[i]
        flag, _, inline = a.partition("=")
        if flag in _BOOL_FLAGS:
            kw[_BOOL_FLAGS[flag]] = inline != "false"
        elif a.startswith("--in") and a.endswith("-dtype"):
            dtypes[int(a[4:-6])] = args[i + 1]
            i += 1
        elif a in _VALUE_FLAGS:
            v = args[i + 1]
            kw[_VALUE_FLAGS[a]] = float(v) if a == "--scalar" else int(v) if a in ("--update-idx", "--batch-offset",
                                                                                  "--batch-idx") else v
            i += 1
        elif a == "--cur-pos":
            kw["cur_pos"] = [int(x) for x in args[i + 1].split(",")]
            i += 1
        elif a == "--page-table":
            kw["page_table"] = tensor_of(args[i + 1]).to(torch.int64)
            i += 1
        elif a == "--option":
            key, _, value = args[i + 1].partition("=")
            try:
                kw[key] = json.loads(value)
            except ValueError:
                kw[key] = value
            i += 1
        elif a.startswith("--"):
            raise ValueError(f"mha_op.py: flag {a} has no mha.op spelling here")
        else:
            tensors.append(tensor_of(a))
        i += 1
    if dtypes:
        kw["dtypes"] = [dtypes.get(j) for j in range(len(tensors))]
    return name, tensors, kw


class MhaOp:
    """Runs one `mha op` with `--option threads=N`: in process through the `mha` package built beside
    BINARY when there is one (tensors given to save() stay in memory), else `BINARY op ... -o
    TMP/out.npy` (under `nice` when asked) on files in TMP."""

    def __init__(self, binary, threads, tmp, nice=False):
        self.binary, self.threads, self.tmp, self.nice = binary, threads, tmp, nice
        self.n = 0
        self.package = load_package(binary)
        self.held = {}  # path -> tensor, for the in-process runs
        if self.package is not None and nice:
            os.nice(10)  # what `nice` gave each op's process

    def save(self, t, name=None):
        """t (a torch tensor or numpy array) as TMP/NAME.npy (float32 for tensors); its path."""
        if name is None:
            self.n += 1
            name = f"in{self.n}"
        path = os.path.join(self.tmp, name + ".npy")
        if self.package is not None:
            self.held[path] = t.float() if torch.is_tensor(t) else torch.from_numpy(np.asarray(t))
            return path
        np.save(path, t.float().numpy() if torch.is_tensor(t) else t)
        return path

    def _tensor(self, path):
        return self.held[path] if path in self.held else torch.from_numpy(np.load(path))

    def timed(self, args):
        """The op's output as a torch tensor, and the seconds `mha op` took."""
        if self.package is not None:
            name, tensors, kw = op_call(args, self._tensor)
            kw.setdefault("threads", self.threads)
            t0 = time.time()
            out = self.package.op(name, *tensors, **kw)
            return out, time.time() - t0
        out = os.path.join(self.tmp, "out.npy")
        cmd = (["nice"] if self.nice else []) + [self.binary, "op"] + [str(a) for a in args]
        cmd += ["-o", out, "--option", f"threads={self.threads}"]
        t0 = time.time()
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            raise RuntimeError(" ".join(cmd) + "\n" + r.stderr)
        return torch.from_numpy(np.load(out)), time.time() - t0

    def op(self, args):
        """The op's output as a torch tensor."""
        return self.timed(args)[0]
