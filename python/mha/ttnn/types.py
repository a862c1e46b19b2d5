"""TT-NN's types and configs (names, fields and defaults as in ttnn), for
the parts tt-sim models. Arguments tt-sim does not model raise NotModelled
when an op is given them (docs/PYTHON.md lists them)."""
import enum

from .. import Error


class NotModelled(Error):
    """An argument or value TT-NN accepts that tt-sim does not model."""


def not_modelled(op, what):
    raise NotModelled(f"ttnn.{op}: {what} is not modelled by tt-sim (mha.ttnn runs tt-sim's ops; see docs/PYTHON.md)")


class DataType:
    """ttnn.DataType: `name` is tt-sim's format name for the float types."""

    def __init__(self, name, block_float=False, integer=False):
        self.name, self.block_float, self.integer = name, block_float, integer

    def __repr__(self):
        return f"DataType.{self.name.upper()}"

    def __reduce__(self):
        return (_dtype_by_name, (self.name,))


bfloat16 = DataType("bfloat16")
bfloat8_b = DataType("bfloat8_b", block_float=True)
bfloat4_b = DataType("bfloat4_b", block_float=True)
float32 = DataType("float32")
uint32 = DataType("uint32", integer=True)
int32 = DataType("int32", integer=True)
uint16 = DataType("uint16", integer=True)
uint8 = DataType("uint8", integer=True)
_DTYPES = {d.name: d for d in (bfloat16, bfloat8_b, bfloat4_b, float32, uint32, int32, uint16, uint8)}


def _dtype_by_name(name):
    return _DTYPES[name]


class DataTypeNamespace:
    BFLOAT16, BFLOAT8_B, BFLOAT4_B, FLOAT32, UINT32, INT32, UINT16, UINT8 = (
        bfloat16, bfloat8_b, bfloat4_b, float32, uint32, int32, uint16, uint8)


class Layout(enum.Enum):
    ROW_MAJOR = 0
    TILE = 1


ROW_MAJOR_LAYOUT = Layout.ROW_MAJOR
TILE_LAYOUT = Layout.TILE
TILE_SIZE = 32


class BufferType(enum.Enum):
    DRAM = 0
    L1 = 1
    SYSTEM_MEMORY = 2
    L1_SMALL = 3
    TRACE = 4


class TensorMemoryLayout(enum.Enum):
    INTERLEAVED = 0
    HEIGHT_SHARDED = 2
    WIDTH_SHARDED = 3
    BLOCK_SHARDED = 4


class ShardStrategy(enum.Enum):
    HEIGHT = 0
    WIDTH = 1
    BLOCK = 2


class ShardOrientation(enum.Enum):
    ROW_MAJOR = 0
    COL_MAJOR = 1


class MemoryConfig:
    def __init__(self, memory_layout=TensorMemoryLayout.INTERLEAVED, buffer_type=BufferType.DRAM, shard_spec=None):
        self.memory_layout, self.buffer_type, self.shard_spec = memory_layout, buffer_type, shard_spec

    def is_sharded(self):
        return self.memory_layout != TensorMemoryLayout.INTERLEAVED

    def __eq__(self, other):
        return isinstance(other, MemoryConfig) and (self.memory_layout, self.buffer_type) == (
            other.memory_layout, other.buffer_type)

    def __hash__(self):
        return hash((self.memory_layout, self.buffer_type))

    def __repr__(self):
        return f"MemoryConfig(memory_layout={self.memory_layout}, buffer_type={self.buffer_type})"


DRAM_MEMORY_CONFIG = MemoryConfig(TensorMemoryLayout.INTERLEAVED, BufferType.DRAM)
L1_MEMORY_CONFIG = MemoryConfig(TensorMemoryLayout.INTERLEAVED, BufferType.L1)


def memory_option(op, memory_config):
    """The tt-sim `memory_config` option ("DRAM" / "L1") of a MemoryConfig."""
    if memory_config is None:
        return None
    if not isinstance(memory_config, MemoryConfig):
        raise Error(f"ttnn.{op}: memory_config: expected a ttnn.MemoryConfig, found {type(memory_config).__name__}")
    if memory_config.is_sharded():
        not_modelled(op, f"a sharded memory_config ({memory_config.memory_layout.name})")
    if memory_config.buffer_type not in (BufferType.DRAM, BufferType.L1):
        not_modelled(op, f"memory_config buffer_type {memory_config.buffer_type.name}")
    return memory_config.buffer_type.name


class CoreCoord:
    def __init__(self, x, y):
        self.x, self.y = x, y

    def __repr__(self):
        return f"CoreCoord(x={self.x}, y={self.y})"

    def __eq__(self, o):
        return isinstance(o, CoreCoord) and (self.x, self.y) == (o.x, o.y)


class CoreGrid:
    def __init__(self, *, x, y):
        self.x, self.y = x, y

    @property
    def num_cores(self):
        return self.x * self.y

    def __repr__(self):
        return f"ttnn.CoreGrid(x={self.x}, y={self.y})"


class MathFidelity(enum.Enum):
    LoFi = 0
    HiFi2 = 2
    HiFi3 = 3
    HiFi4 = 4


class WormholeComputeKernelConfig:
    """ttnn.WormholeComputeKernelConfig; every field is passed to the op."""

    def __init__(self, *, math_fidelity=MathFidelity.LoFi, math_approx_mode=True, fp32_dest_acc_en=False,
                 packer_l1_acc=False, dst_full_sync_en=False, throttle_level=None):
        self.math_fidelity, self.math_approx_mode = math_fidelity, math_approx_mode
        self.fp32_dest_acc_en, self.packer_l1_acc = fp32_dest_acc_en, packer_l1_acc
        self.dst_full_sync_en, self.throttle_level = dst_full_sync_en, throttle_level


class BlackholeComputeKernelConfig(WormholeComputeKernelConfig):
    pass


class GrayskullComputeKernelConfig:
    def __init__(self, *, math_fidelity=MathFidelity.LoFi, math_approx_mode=True):
        self.math_fidelity, self.math_approx_mode = math_fidelity, math_approx_mode
        self.fp32_dest_acc_en, self.packer_l1_acc, self.dst_full_sync_en = False, False, False
        self.throttle_level = None


def compute_options(op, config):
    """A compute kernel config as tt-sim options (None: the op's defaults)."""
    if config is None:
        return {}
    if config.dst_full_sync_en:
        not_modelled(op, "compute_kernel_config.dst_full_sync_en=True")
    return {"math_fidelity": config.math_fidelity.name, "math_approx_mode": bool(config.math_approx_mode),
            "fp32_dest_acc_en": bool(config.fp32_dest_acc_en), "packer_l1_acc": bool(config.packer_l1_acc)}


class SDPAProgramConfig:
    def __init__(self, *, compute_with_storage_grid_size, sub_core_grids=None, q_chunk_size, k_chunk_size,
                 exp_approx_mode=True, max_cores_per_head_batch=16):
        self.compute_with_storage_grid_size = compute_with_storage_grid_size
        self.sub_core_grids = sub_core_grids
        self.q_chunk_size, self.k_chunk_size = q_chunk_size, k_chunk_size
        self.exp_approx_mode, self.max_cores_per_head_batch = exp_approx_mode, max_cores_per_head_batch


class DispatchCoreType(enum.Enum):
    WORKER = 0
    ETH = 1


class DispatchCoreAxis(enum.Enum):
    ROW = 0
    COL = 1


class DispatchCoreConfig:
    def __init__(self, type=None, axis=None):  # noqa: A002 - TT-NN's name
        self.type, self.axis = type, axis
