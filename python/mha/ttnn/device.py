"""ttnn.device: opening and closing the emulated device.

The device is tt-sim's: which one comes from open_device's `arch`
(mha.ttnn's own keyword), else $MHA_TTNN_DEVICE, else $ARCH_NAME (tt-metal's
variable, which seed notebooks read too), else wormhole_b0. `options` (also
mha.ttnn's own) are further tt-sim backend keys given to every op
(threads=2, kernels="scalar", ...).
"""
import os

from .. import Error, _core
from .types import (CoreCoord, DispatchCoreAxis, DispatchCoreConfig, DispatchCoreType,  # noqa: F401 - ttnn.device.*
                    not_modelled)

_ARCHS = ("wormhole_b0", "blackhole", "grayskull")


class Arch:
    def __init__(self, name):
        self.name = name.upper()

    def __repr__(self):
        return f"Arch.{self.name}"


class Device:
    """An open tt-sim device. Ops run through tt-sim's device operations
    (mha op); its program cache is each op's own (mha op --json shows it)."""

    def __init__(self, device_id, arch, options):
        self.device_id, self.arch_name, self.options = device_id, arch, dict(options)
        self.program_cache_enabled = False
        self._open = True
        grid = _core.device_grid(arch)
        self._grid = CoreCoord(x=grid[1], y=grid[0])

    def id(self):  # noqa: A003 - TT-NN's name
        return self.device_id

    def arch(self):
        return Arch(self.arch_name)

    def compute_with_storage_grid_size(self):
        return self._grid

    def enable_program_cache(self):
        self.program_cache_enabled = True

    def disable_and_clear_program_cache(self):
        self.program_cache_enabled = False

    def op_options(self):
        if not self._open:
            raise Error(f"device {self.device_id} is closed (ttnn.close_device)")
        return {"device": self.arch_name, **self.options}

    def __repr__(self):
        return f"<tt-sim device {self.device_id}: {self.arch_name}>"


def _arch(arch):
    name = arch or os.environ.get("MHA_TTNN_DEVICE") or os.environ.get("ARCH_NAME") or "wormhole_b0"
    name = name.lower()
    if name == "wormhole":
        name = "wormhole_b0"
    if name not in _ARCHS:
        raise Error(f"ttnn.open_device: arch: expected one of {', '.join(_ARCHS)}, found '{name}'")
    return name


def open_device(device_id=0, l1_small_size=None, trace_region_size=None, dispatch_core_config=None,
                worker_l1_size=None, *, arch=None, options=None, **kwargs):
    """ttnn.open_device. l1_small_size, trace_region_size, worker_l1_size
    and the dispatch core config are accepted and do not change tt-sim's
    arithmetic; any other TT-NN keyword is refused by name."""
    for key in kwargs:
        not_modelled("open_device", f"the argument {key}")
    if dispatch_core_config is not None and not isinstance(dispatch_core_config, DispatchCoreConfig):
        raise Error("ttnn.open_device: dispatch_core_config: expected a ttnn.DispatchCoreConfig")
    return Device(device_id, _arch(arch), options or {})


def close_device(device):
    device._open = False


CreateDevice = open_device
CloseDevice = close_device
