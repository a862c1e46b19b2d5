"""TT-NN's ops on tt-sim: each compute op is one `mha op` device operation
(mha.op), with TT-NN's signature and defaults; the data-movement ops move
the device's values (block floats repacked as the device's kernels repack
them, mha._core.move)."""
import numbers

from .. import Error, _core, _op as mha_op
from .._arrays import torch_module
from .tensor import Tensor, device_tensor, require_device
from .types import (DataType, TILE_LAYOUT, bfloat16, compute_options, memory_option, not_modelled,
                    _dtype_by_name)


def _refuse(op, **given):
    """Arguments tt-sim does not model: refused by name when given."""
    for name, v in given.items():
        if v is not None and v is not False and v != ():
            not_modelled(op, f"the argument {name}")


def run_op(op, name, tensors, *, memory_config=None, dtype=None, compute_kernel_config=None, scalar=None,
           params=None, options=None):
    """One device operation: the tensors' dtypes as the device holds them,
    the device's options, then the call's. Returns a TILE tensor of the
    output dtype the op reports."""
    dev = require_device(op, *tensors)
    opts = dict(dev.op_options())
    mem = memory_option(op, memory_config)
    if mem is not None:
        opts["memory_config"] = mem
    opts.update(compute_options(op, compute_kernel_config))
    opts.update(options or {})
    opts.update(params or {})
    if dtype is not None and not isinstance(dtype, DataType):
        raise Error(f"ttnn.{op}: dtype: expected a ttnn dtype (ttnn.bfloat16, ...), found {dtype!r}")
    # The inputs' tiles as the earlier ops left them; the output stays tiles.
    out, report = mha_op(name, [t._data() for t in tensors], None, [t.dtype.name for t in tensors],
                         None if dtype is None else dtype.name, scalar, opts, keep=True)
    out_dtype = _dtype_by_name(report["output"]["dtype"])
    return Tensor(None, out_dtype, TILE_LAYOUT, dev, memory_config or tensors[0].memory_config_, tiles=out)


def _grid(core_grid):
    return None if core_grid is None else {"core_grid": [core_grid.y, core_grid.x]}


def matmul(input_tensor_a, input_tensor_b, *, transpose_a=False, transpose_b=False, memory_config=None, dtype=None,
           program_config=None, activation=None, compute_kernel_config=None, core_grid=None, output_tile=None,
           optional_output_tensor=None, global_cb=None, sub_device_id=None):
    _refuse("matmul", transpose_a=transpose_a, transpose_b=transpose_b, program_config=program_config,
            activation=activation, output_tile=output_tile, optional_output_tensor=optional_output_tensor,
            global_cb=global_cb, sub_device_id=sub_device_id)
    return run_op("matmul", "matmul", [input_tensor_a, input_tensor_b], memory_config=memory_config, dtype=dtype,
                  compute_kernel_config=compute_kernel_config, options=_grid(core_grid))


def linear(input_tensor_a, input_tensor_b, *, bias=None, transpose_a=False, transpose_b=False, memory_config=None,
           dtype=None, program_config=None, activation=None, compute_kernel_config=None, core_grid=None,
           output_tile=None, optional_output_tensor=None, global_cb=None, sub_device_id=None):
    _refuse("linear", transpose_a=transpose_a, transpose_b=transpose_b, program_config=program_config,
            activation=activation, output_tile=output_tile, optional_output_tensor=optional_output_tensor,
            global_cb=global_cb, sub_device_id=sub_device_id)
    tensors = [input_tensor_a, input_tensor_b] + ([bias] if bias is not None else [])
    return run_op("linear", "linear", tensors, memory_config=memory_config, dtype=dtype,
                  compute_kernel_config=compute_kernel_config, options=_grid(core_grid))


def _binary(op, a, b, dtype, memory_config, extra):
    _refuse(op, **extra)
    if isinstance(a, numbers.Number) and isinstance(b, Tensor):
        a, b = b, a
    if isinstance(b, numbers.Number):
        if op != "multiply":
            not_modelled(op, "a Python scalar operand (tt-sim's ttnn.add takes two tensors)")
        return run_op(op, op, [a], memory_config=memory_config, dtype=dtype, scalar=float(b))
    return run_op(op, op, [a, b], memory_config=memory_config, dtype=dtype)


def add(input_tensor_a, input_tensor_b, *, dtype=None, memory_config=None, output_tensor=None, activations=None,
        input_tensor_a_activations=None, input_tensor_b_activations=None, use_legacy=None, sub_core_grids=None):
    return _binary("add", input_tensor_a, input_tensor_b, dtype, memory_config,
                   dict(output_tensor=output_tensor, activations=activations,
                        input_tensor_a_activations=input_tensor_a_activations,
                        input_tensor_b_activations=input_tensor_b_activations, sub_core_grids=sub_core_grids))


def multiply(input_tensor_a, input_tensor_b, *, dtype=None, memory_config=None, output_tensor=None, activations=None,
             input_tensor_a_activations=None, input_tensor_b_activations=None, use_legacy=None, sub_core_grids=None):
    return _binary("multiply", input_tensor_a, input_tensor_b, dtype, memory_config,
                   dict(output_tensor=output_tensor, activations=activations,
                        input_tensor_a_activations=input_tensor_a_activations,
                        input_tensor_b_activations=input_tensor_b_activations, sub_core_grids=sub_core_grids))


mul = multiply


def softmax(input_tensor, dim=-1, *, memory_config=None, compute_kernel_config=None, numeric_stable=False):
    if dim not in (-1, len(input_tensor.shape) - 1):
        not_modelled("softmax", f"dim={dim} (tt-sim's softmax is over the last dim)")
    if numeric_stable:
        not_modelled("softmax", "numeric_stable=True")
    return run_op("softmax", "softmax", [input_tensor], memory_config=memory_config,
                  compute_kernel_config=compute_kernel_config)


def exp(input_tensor, *, fast_and_approximate_mode=False, memory_config=None, output_tensor=None):
    _refuse("exp", output_tensor=output_tensor)
    return run_op("exp", "exp", [input_tensor], memory_config=memory_config,
                  options={"math_approx_mode": bool(fast_and_approximate_mode)})


def reciprocal(input_tensor, *, memory_config=None, output_tensor=None):
    _refuse("reciprocal", output_tensor=output_tensor)
    return run_op("reciprocal", "reciprocal", [input_tensor], memory_config=memory_config)


def rms_norm(input_tensor, *, epsilon=1e-12, weight=None, bias=None, residual_input_tensor=None, memory_config=None,
             program_config=None, compute_kernel_config=None):
    """ttnn.rms_norm, interleaved (`mha op rms-norm`): the weight as the model
    holds it (bfloat16 ROW_MAJOR, one value per column of the input)."""
    _refuse("rms_norm", bias=bias, residual_input_tensor=residual_input_tensor, program_config=program_config)
    tensors = [input_tensor] + ([weight] if weight is not None else [])
    return run_op("rms_norm", "rms-norm", tensors, memory_config=memory_config,
                  compute_kernel_config=compute_kernel_config, params={"epsilon": float(epsilon)})


def rand(shape, *, device=None, dtype=bfloat16, layout=TILE_LAYOUT, memory_config=None, low=0.0, high=1.0, seed=0):
    """ttnn.rand on tt-sim: uniform values in [low, high) drawn on the HOST
    by torch's CPU generator (float32 torch.rand; seed 0 uses the global
    generator, so torch.manual_seed governs as in the seed notebooks; any
    other seed a fresh torch.Generator seeded with it), scaled, then rounded
    to dtype as ttnn.from_torch rounds. The device's generator (a per-core
    SFPU PRNG, ttnn.rand's device operation) draws other numbers: the
    distribution is the same, the values are not (docs/PYTHON.md)."""
    torch = torch_module()
    gen = None if seed == 0 else torch.Generator().manual_seed(int(seed))
    u = torch.rand(tuple(shape), generator=gen, dtype=torch.float32)
    if (low, high) != (0.0, 1.0):
        u = u * (high - low) + low
    if memory_config is not None:
        memory_option("rand", memory_config)
    return device_tensor(u, dtype, layout, device, memory_config, "rand")


# --- data movement ---------------------------------------------------------

def moved(op, tensor, values, memory_config=None, layout=None, program=None):
    """tensor's values rearranged as `values`: bf16 and float32 move exactly;
    a block-float result is repacked on the device (mha._core.move)."""
    if memory_config is not None:
        memory_option(op, memory_config)
    memory_config = memory_config or tensor.memory_config_
    if tensor.dtype.block_float:
        # The repack reads only the moved values; they stand for the source
        # too (a concat has several). The result stays as the device's tiles.
        v = values.contiguous().numpy()
        out = _core.move(v, tensor.dtype.name, v, tensor.dtype.name, program or f"ttnn.{op}", True)
        return Tensor(None, tensor.dtype, layout or tensor.layout, tensor._device, memory_config, tiles=out)
    return Tensor(values.contiguous(), tensor.dtype, layout or tensor.layout, tensor._device, memory_config)


def reshape(input_tensor, shape, *args, memory_config=None, pad_value=None, **kwargs):
    """ttnn.reshape: the same values in a new shape (one dim may be -1)."""
    if args or kwargs:
        not_modelled("reshape", "arguments beyond shape and memory_config")
    v = input_tensor.values()
    try:
        r = v.reshape(tuple(shape))
    except RuntimeError:
        raise Error(f"ttnn.reshape: cannot reshape {tuple(v.shape)} into {tuple(shape)}") from None
    return moved("reshape", input_tensor, r, memory_config)


def permute(input_tensor, dims, *, memory_config=None, pad_value=0.0):
    v = input_tensor.values()
    if sorted(d % v.dim() for d in dims) != list(range(v.dim())):
        raise Error(f"ttnn.permute: dims {tuple(dims)} are not a permutation of {v.dim()} dims")
    return moved("permute", input_tensor, v.permute(*dims), memory_config)


def concat(tensors, dim=0, *, memory_config=None, output_tensor=None, groups=1, sub_core_grids=None):
    _refuse("concat", output_tensor=output_tensor, sub_core_grids=sub_core_grids)
    if groups != 1:
        not_modelled("concat", f"groups={groups}")
    tensors = list(tensors)
    if not tensors:
        raise Error("ttnn.concat: expected at least one tensor")
    if any(t.dtype is not tensors[0].dtype for t in tensors):
        raise Error("ttnn.concat: expected tensors of one dtype, found " + ", ".join(t.dtype.name for t in tensors))
    torch = torch_module()
    try:
        v = torch.cat([t.values() for t in tensors], dim=dim)
    except RuntimeError as e:
        raise Error(f"ttnn.concat: {e}") from None
    return moved("concat", tensors[0], v, memory_config)


def get_fallback_function(function):
    """TT-NN's host fallback of an op: here the op itself (mha.ttnn's data
    movement already runs on the host, with the device's values)."""
    return function
