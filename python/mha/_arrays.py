"""Arrays in and out of mha._core: numpy arrays and torch tensors.

The extension takes numpy arrays (float32, float64, int32, int64, bool). A
torch bfloat16 or float16 tensor travels as float32 (exact) with its dtype
named, so that the library sees the dtype the caller holds.
"""
import numpy as np

_torch = None


def torch_module():
    """torch, imported on first use (numpy-only callers never pay for it)."""
    global _torch
    if _torch is None:
        import torch

        _torch = torch
    return _torch


def is_torch(x):
    return type(x).__module__.startswith("torch") and hasattr(x, "detach")


def to_numpy(x, what="tensor"):
    """(array, dtype name the array holds exactly or "") for the extension."""
    if is_torch(x):
        torch = torch_module()
        t = x.detach().cpu()
        if t.dtype in (torch.bfloat16, torch.float16):
            name = "bfloat16" if t.dtype == torch.bfloat16 else "float16"
            return np.ascontiguousarray(t.float().numpy()), name
        if t.dtype in (torch.int8, torch.int16, torch.uint8):
            t = t.to(torch.int32)
        return np.ascontiguousarray(t.numpy()), ""
    a = np.asarray(x)
    if a.dtype == np.float16:
        return np.ascontiguousarray(a.astype(np.float32)), "float16"
    if a.dtype.kind in "iu" and a.dtype not in (np.int32, np.int64):
        a = a.astype(np.int64)
    if a.dtype.kind == "f" and a.dtype not in (np.float32, np.float64):
        a = a.astype(np.float64)
    if a.dtype.kind not in "fiub":
        raise TypeError(f"{what}: expected a numpy array or torch tensor of numbers, found dtype {a.dtype}")
    return np.ascontiguousarray(a), ""


def like(array, want_torch):
    """An extension result as a torch tensor when the caller passed torch."""
    if array is None or not want_torch:
        return array
    return torch_module().from_numpy(np.ascontiguousarray(array))
