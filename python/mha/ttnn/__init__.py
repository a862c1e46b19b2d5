"""TT-NN's Python API on tt-sim: `import mha.ttnn as ttnn`.

The subset seed 002's notebook, tt-metal's attention op tests and
tt_transformers' attention use (docs/PYTHON.md lists it), with TT-NN's names,
signatures and defaults. Each compute op is one tt-sim device operation (what
`mha op` runs, bit for bit); tensors hold the device's values between calls.
Arguments tt-sim does not model raise ttnn.NotModelled naming them.
"""
from . import device, experimental, transformer
from .device import Device, close_device, open_device, CreateDevice, CloseDevice
from .experimental import fill_cache, update_cache
from .operations import (add, concat, exp, get_fallback_function, linear, matmul, mul, multiply, permute, rand,
                         reciprocal, reshape, rms_norm, softmax)
from .tensor import Shape, Tensor, deallocate, from_device, from_torch, to_device, to_layout, to_torch
from .types import (BlackholeComputeKernelConfig, BufferType, CoreCoord, CoreGrid, DataTypeNamespace as DataType,
                    DispatchCoreAxis, DispatchCoreConfig, DispatchCoreType, DRAM_MEMORY_CONFIG,
                    GrayskullComputeKernelConfig, L1_MEMORY_CONFIG, Layout, MathFidelity, MemoryConfig, NotModelled,
                    ROW_MAJOR_LAYOUT, SDPAProgramConfig, ShardOrientation, ShardStrategy, TensorMemoryLayout,
                    TILE_LAYOUT, TILE_SIZE, WormholeComputeKernelConfig, bfloat4_b, bfloat8_b, bfloat16, float32,
                    int32, uint8, uint16, uint32)

__all__ = [n for n in dir() if not n.startswith("_")]
