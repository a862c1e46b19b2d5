"""ttnn.Tensor on tt-sim, and host transfer (from_torch / to_torch).

A tensor holds the device's values exactly, with its dtype, layout, device
and memory config. An op's output, and ttnn.from_torch's, stays as the op's
tiles (mha._core.Tiles, the device's copy): the next op takes them as they
are, without a round trip through host values, and the values (a float32
torch tensor of the logical shape whose every value is representable in its
dtype as the device stores it) are read back only when Python needs them
(to_torch, the data-movement ops, which run on the host). Both give the same
bits: an op given values converts them to tiles again, and tt-sim's host
conversion of a value that is already exact in the format is the identity
(tests/python/test_ttnn_ops.py checks it for every dtype); tiles whose
conversion would not be (block floats, a NaN) are converted from their
values as before. Tile padding is not kept: each op sees zero padding, as
after a fresh ttnn.from_torch.
"""
from .. import Error, _op as mha_op
from .._arrays import torch_module
from .types import (DataType, Layout, MemoryConfig, TILE_LAYOUT, ROW_MAJOR_LAYOUT, bfloat16, float32, int32,
                    memory_option, not_modelled, uint32)


class Shape(tuple):
    """ttnn.Shape: a tuple of the logical dims."""

    @property
    def rank(self):
        return len(self)


class Tensor:
    def __init__(self, values, dtype, layout, device=None, memory_config=None, tiles=None):
        # One of values and tiles at least; both once the values were read.
        self._values, self._tiles = values, tiles
        self.dtype, self.layout = dtype, layout
        self._device = device
        self.memory_config_ = memory_config
        self._deallocated = False

    # --- TT-NN's tensor API --------------------------------------------------
    @property
    def shape(self):
        self._alive()
        return Shape(self._values.shape if self._values is not None else self._tiles.shape)

    @property
    def padded_shape(self):
        s = list(self.shape)
        if self.layout == TILE_LAYOUT and len(s) >= 1:
            s[-1] = -(-s[-1] // 32) * 32
            if len(s) >= 2:
                s[-2] = -(-s[-2] // 32) * 32
        return Shape(s)

    def get_dtype(self):
        return self.dtype

    def get_layout(self):
        return self.layout

    def device(self):
        return self._device

    def is_allocated(self):
        return not self._deallocated

    def memory_config(self):
        return self.memory_config_

    def storage_type(self):
        return "DEVICE" if self._device is not None else "HOST"

    def cpu(self):
        return from_device(self)

    def to(self, device, memory_config=None):
        return to_device(self, device, memory_config=memory_config)

    def to_torch(self):
        return to_torch(self)

    def __matmul__(self, other):
        from .operations import matmul
        return matmul(self, other)

    def __add__(self, other):
        from .operations import add
        return add(self, other)

    def __radd__(self, other):
        from .operations import add
        return add(self, other)

    def __mul__(self, other):
        from .operations import multiply
        return multiply(self, other)

    def __rmul__(self, other):
        from .operations import multiply
        return multiply(self, other)

    def __repr__(self):
        return (f"ttnn.Tensor(shape={tuple(self.shape)}, dtype={self.dtype.name}, layout={self.layout.name}, "
                f"device={self._device})")

    # --- mha.ttnn internals --------------------------------------------------
    def values(self):
        """The device's values (float32 torch tensor; integers for int dtypes)."""
        self._alive()
        if self._values is None:
            self._values = torch_module().from_numpy(self._tiles.values())
        return self._values

    def _alive(self):
        if self._deallocated:
            raise Error("ttnn: the tensor was deallocated (ttnn.deallocate) and is used again")

    def _data(self):
        """What an op takes: the tiles when the tensor has them, else the values."""
        self._alive()
        return self._tiles if self._tiles is not None else self._values

    def _assign(self, values=None, tiles=None):
        """The tensor now holds other data (an op that writes in place)."""
        self._alive()
        self._values, self._tiles = values, tiles


def require_device(op, *tensors):
    """The device the op runs on: every tensor's, all the same."""
    dev = None
    for t in tensors:
        if not isinstance(t, Tensor):
            raise Error(f"ttnn.{op}: expected a ttnn.Tensor, found {type(t).__name__}")
        t._alive()
        if t._device is None:
            raise Error(f"ttnn.{op}: the tensor is on the host; move it with ttnn.to_device first")
        if dev is not None and t._device is not dev:
            raise Error(f"ttnn.{op}: the tensors are on different devices")
        dev = t._device
    return dev


_TORCH_TO_TTNN = None


def _from_torch_dtype(t):
    global _TORCH_TO_TTNN
    torch = torch_module()
    if _TORCH_TO_TTNN is None:
        _TORCH_TO_TTNN = {torch.bfloat16: bfloat16, torch.float32: float32, torch.int32: int32, torch.int64: int32,
                          torch.int16: int32, torch.uint8: uint32}
    if t.dtype not in _TORCH_TO_TTNN:
        raise Error(f"ttnn.from_torch: a torch {t.dtype} tensor needs dtype= (bfloat16, bfloat8_b, bfloat4_b, float32)")
    return _TORCH_TO_TTNN[t.dtype]


def device_tensor(x, dtype, layout, device, memory_config, op="from_torch"):
    """x (torch) as the device holds it in dtype: tt-sim's host conversion
    (`mha op to-device`), kept as its tiles."""
    torch = torch_module()
    if dtype.integer:
        if x.is_floating_point() and not torch.equal(x, x.round()):
            raise Error(f"ttnn.{op}: a {dtype.name} tensor takes integers, found non-integer values")
        values = x.to(torch.int64 if dtype.name == "uint32" else torch.int32).contiguous()
        return Tensor(values, dtype, layout, device, memory_config)
    if x.numel() == 0 or x.dim() == 0:
        raise Error(f"ttnn.{op}: expected a tensor with at least one dimension and one element, found shape "
                    f"{tuple(x.shape)}")
    tiles, _ = mha_op("to-device", [x.to(torch.float32)], dtype.name, None, None, None, {}, keep=True)
    return Tensor(None, dtype, layout, device, memory_config, tiles=tiles)


def from_torch(tensor, dtype=None, *, spec=None, tile=None, layout=ROW_MAJOR_LAYOUT, device=None, memory_config=None,
               mesh_mapper=None, cq_id=None, pad_value=None, sub_device_ids=None):
    """ttnn.from_torch: dtype None keeps the torch dtype's (bfloat16,
    float32, int32); bfloat8_b / bfloat4_b need TILE_LAYOUT as in TT-NN."""
    for name, v in (("spec", spec), ("tile", tile), ("mesh_mapper", mesh_mapper), ("pad_value", pad_value),
                    ("sub_device_ids", sub_device_ids)):
        if v is not None:
            not_modelled("from_torch", f"the argument {name}")
    torch = torch_module()
    if not isinstance(tensor, torch.Tensor):
        raise Error(f"ttnn.from_torch: expected a torch.Tensor, found {type(tensor).__name__}")
    if dtype is None:
        dtype = _from_torch_dtype(tensor)
    if not isinstance(dtype, DataType):
        raise Error(f"ttnn.from_torch: dtype: expected a ttnn dtype (ttnn.bfloat16, ...), found {dtype!r}")
    if dtype.block_float and layout != TILE_LAYOUT:
        raise Error(f"ttnn.from_torch: {dtype.name} is a tile format: it needs layout=ttnn.TILE_LAYOUT")
    if device is None and memory_config is not None:
        raise Error("ttnn.from_torch: memory_config needs a device")
    if memory_config is not None:
        memory_option("from_torch", memory_config)
    return device_tensor(tensor.detach().cpu(), dtype, layout, device, memory_config if device is not None else None)


def to_torch(tensor, dtype=None, *, torch_rank=None, mesh_composer=None, device=None, cq_id=None):
    """ttnn.to_torch: bfloat16 comes back as torch.bfloat16, float32 and the
    block floats as torch.float32 (the values exactly), integers as int32."""
    if mesh_composer is not None:
        not_modelled("to_torch", "the argument mesh_composer")
    if not isinstance(tensor, Tensor):
        raise Error(f"ttnn.to_torch: expected a ttnn.Tensor, found {type(tensor).__name__}")
    torch = torch_module()
    v = tensor.values()
    if tensor.dtype.integer:
        out = v.to(torch.int32) if tensor.dtype.name != "uint32" else v.clone()
    elif tensor.dtype.name == "bfloat16":
        out = v.to(torch.bfloat16)
    else:
        out = v.clone()
    if dtype is not None:
        out = out.to(dtype)
    if torch_rank is not None:
        while out.dim() > torch_rank and out.shape[0] == 1:
            out = out[0]
    return out


def to_device(tensor, device, memory_config=None, cq_id=None):
    if memory_config is not None:
        memory_option("to_device", memory_config)
    tensor._alive()
    return Tensor(tensor._values, tensor.dtype, tensor.layout, device, memory_config or tensor.memory_config_,
                  tiles=tensor._tiles)


def from_device(tensor, blocking=True, cq_id=None):
    tensor._alive()
    return Tensor(tensor._values, tensor.dtype, tensor.layout, None, None, tiles=tensor._tiles)


def to_layout(tensor, layout, dtype=None, memory_config=None, sub_core_grids=None):
    """Tilize / untilize: the values do not change. A block-float tensor
    cannot leave TILE_LAYOUT, as in TT-NN."""
    if sub_core_grids is not None:
        not_modelled("to_layout", "the argument sub_core_grids")
    if not isinstance(layout, Layout):
        raise Error(f"ttnn.to_layout: layout: expected ttnn.TILE_LAYOUT or ttnn.ROW_MAJOR_LAYOUT, found {layout!r}")
    tensor._alive()
    out_dtype = tensor.dtype if dtype is None else dtype
    if out_dtype.block_float and layout != TILE_LAYOUT:
        raise Error(f"ttnn.to_layout: a {out_dtype.name} tensor cannot be untilized to ROW_MAJOR_LAYOUT")
    if memory_config is not None:
        memory_option("to_layout", memory_config)
    memory_config = memory_config or tensor.memory_config_
    if out_dtype is not tensor.dtype:
        return device_tensor(tensor.values(), out_dtype, layout, tensor._device, memory_config, "to_layout")
    return Tensor(tensor._values, out_dtype, layout, tensor._device, memory_config, tiles=tensor._tiles)


def deallocate(tensor, force=True):
    """Frees the tensor: using it again raises (as a freed device buffer)."""
    tensor._deallocated = True
    tensor._values = tensor._tiles = None


__all__ = ["Tensor", "Shape", "from_torch", "to_torch", "to_device", "from_device", "to_layout", "deallocate",
           "MemoryConfig"]
