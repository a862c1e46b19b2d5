"""What the scripts that run tt-metal's tests and the accuracy study through `mha op` share:
tt-metal's comp_pcc, and a runner that saves torch tensors as .npy and runs one `mha op` on them.

Imported by scripts/ttmetal_decode_tests.py, scripts/ttsim_accuracy.py and
scripts/ttmetal_sdpa_large_seq.py (run them with /usr/bin/python3, which has torch and numpy).
"""
import math
import os
import subprocess
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


class MhaOp:
    """Runs `BINARY op ... -o TMP/out.npy --option threads=N` (under `nice` when asked) on files in TMP."""

    def __init__(self, binary, threads, tmp, nice=False):
        self.binary, self.threads, self.tmp, self.nice = binary, threads, tmp, nice
        self.n = 0

    def save(self, t, name=None):
        """t (a torch tensor or numpy array) as TMP/NAME.npy (float32 for tensors); its path."""
        if name is None:
            self.n += 1
            name = f"in{self.n}"
        path = os.path.join(self.tmp, name + ".npy")
        np.save(path, t.float().numpy() if torch.is_tensor(t) else t)
        return path

    def timed(self, args):
        """The op's output as a torch tensor, and the seconds `mha op` took."""
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
