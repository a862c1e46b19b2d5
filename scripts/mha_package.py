"""What the scripts that run tt-metal's tests and the accuracy study on tt-sim share: tt-metal's
comp_pcc and fa_rand, and the Python package `mha` (docs/PYTHON.md), whose mha.op runs one TT-NN op on tt-sim in
this process: the library call `mha op` makes, on torch tensors, with no subprocess and no .npy files.

Imported by scripts/ttmetal_decode_tests.py, scripts/ttmetal_sdpa_prefill_tests.py,
scripts/ttmetal_sdpa_large_seq.py and scripts/ttsim_accuracy.py (run them with /usr/bin/python3,
which has torch and numpy).
"""
import math
import os
import sys
import time

import torch


class PccAgainst:
    """comp_pcc against one golden tensor, for many calculated ones: the golden side (centred values, sum
    of squares) computed once, by the same expressions, so the same bits as comp_pcc each time."""

    def __init__(self, golden):
        self.flat = golden.double().flatten()
        self.centred = self.flat - self.flat.mean()
        self.gg = float((self.centred * self.centred).sum())

    def __call__(self, calculated):
        c = calculated.double().flatten()
        if torch.equal(self.flat, c):
            return 1.0
        c = c - c.mean()
        return float((self.centred * c).sum() / math.sqrt(self.gg * float((c * c).sum())))


def comp_pcc(golden, calculated):
    """tt-metal's comp_pcc: Pearson correlation of the flattened tensors (1.0 when both are equal)."""
    return PccAgainst(golden)(calculated)


def fa_rand(*shape):
    """tt-metal's SDPA test input generator: N(0, 1) plus, with probability 0.001, an N(0, 10) spike
    (the draws in its order: two randn, then the Bernoulli mask, from torch's global generator)."""
    normal_1 = torch.randn(shape)
    normal_2 = torch.randn(shape) * 10
    bernoulli = torch.bernoulli(torch.full(shape, 0.001))
    return normal_1 + normal_2 * bernoulli


def import_mha(binary):
    """The `mha` package built beside the mha binary BINARY (BUILD/python/mha); exits with what to
    do when that build has none (CMake builds it when python3-dev and pybind11-dev are installed)."""
    folder = os.path.join(os.path.dirname(os.path.abspath(binary)), "python")
    if not os.path.isdir(os.path.join(folder, "mha")):
        sys.exit(f"{folder}/mha: no Python package beside {binary}; install python3-dev and pybind11-dev "
                 "and rebuild (MHA_SETUP=tests ./scripts/setup.sh does both)")
    if folder not in sys.path:
        sys.path.insert(0, folder)
    import mha
    return mha


class Ops:
    """mha.op with the script's thread count (and tt_metal profile, when given; else tt-sim's default):
    ops(NAME, *tensors, **options) -> the output (torch)."""

    def __init__(self, binary, threads, tt_metal=None):
        self.mha = import_mha(binary)
        self.threads = threads
        self.tt_metal = tt_metal

    def __call__(self, name, *tensors, **options):
        options.setdefault("threads", self.threads)
        if self.tt_metal:
            options.setdefault("tt_metal", self.tt_metal)
        return self.mha.op(name, *tensors, **options)

    def timed(self, name, *tensors, **options):
        """The output and the seconds the op took."""
        t0 = time.time()
        out = self(name, *tensors, **options)
        return out, time.time() - t0

    def profile(self):
        """The tt_metal profile the ops run at, as an op's report names it (the scripts never
        restate tt-sim's default)."""
        zeros = torch.zeros(32, 32)
        return self("add", zeros, zeros, info=True)[1]["tt_metal"]["profile"]
