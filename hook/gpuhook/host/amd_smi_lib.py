"""The amd-smi calls tuning makes, through ctypes alone, on the host root's libamd_smi.so.

Tuning runs in the prestart and poststop hooks, a process each on the direct path. The amdsmi package costs 30-40 ms
to import there (its 4,000-line interface module and the typing, enum, pathlib, re and urllib it pulls in), more
than the rest of a hook's work. These calls are the C API as amdsmi_wrapper binds it (same structures, same
enumerations); telemetry keeps the package (host/amd_smi.py)."""

from __future__ import annotations

import ctypes

from gpuhook.errors import TuningError

CLK_TYPE_SYS = 0  # amdsmi_clk_type_t: the graphics (system) clock
INIT_AMD_GPUS = 2  # amdsmi_init's flag
# amdsmi_dev_perf_level_t, by the name amdgpu's power_dpm_force_performance_level takes
PERF_LEVELS = {"auto": 0, "low": 1, "high": 2, "manual": 3, "profile_standard": 4, "profile_peak": 5,
               "profile_min_mclk": 6, "profile_min_sclk": 7, "perf_determinism": 8}
_STATUS = {1: "INVAL", 2: "NOT_SUPPORTED", 3: "NOT_YET_IMPLEMENTED", 4: "FAIL_LOAD_MODULE", 5: "FAIL_LOAD_SYMBOL",
           6: "DRM_ERROR", 7: "API_FAILED", 8: "TIMEOUT", 9: "RETRY", 10: "NO_PERM", 11: "INTERRUPT", 12: "IO",
           13: "ADDRESS_FAULT", 14: "FILE_ERROR", 15: "OUT_OF_RESOURCES", 16: "INTERNAL_EXCEPTION",
           17: "INPUT_OUT_OF_BOUNDS", 18: "INIT_ERROR", 19: "REFCOUNT_OVERFLOW", 20: "DIRECTORY_NOT_FOUND",
           30: "BUSY", 31: "NOT_FOUND", 32: "NOT_INIT"}
_u32, _u64 = ctypes.c_uint32, ctypes.c_uint64


COMPUTE_PARTITIONS = {"SPX": 1, "DPX": 2, "TPX": 3, "QPX": 4, "CPX": 5}  # amdsmi_compute_partition_type_t
MEMORY_PARTITIONS = {"NPS1": 1, "NPS2": 2, "NPS4": 4, "NPS8": 8}  # amdsmi_memory_partition_type_t


class _PowerCapInfo(ctypes.Structure):
    _fields_ = [("power_cap", _u64), ("default_power_cap", _u64), ("dpm_cap", _u64), ("min_power_cap", _u64),
                ("max_power_cap", _u64), ("reserved", _u64 * 3)]


class _ClockInfo(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("clk", _u32), ("min_clk", _u32), ("max_clk", _u32), ("clk_locked", ctypes.c_ubyte),
                ("clk_deep_sleep", ctypes.c_ubyte), ("padding", ctypes.c_ubyte * 2), ("reserved", _u32 * 4)]


class AmdSmiError(Exception):
    """A call's failure: its status code and its name."""

    def __init__(self, code: int) -> None:
        super().__init__(f"AMDSMI_STATUS_{_STATUS.get(code, str(code))}")
        self.code = code


def bdf_text(bdf: int) -> str:
    """amdsmi_bdf_t (function 3 bits, device 5, bus 8, domain 48, from the low bit) as sysfs writes it."""
    return f"{bdf >> 16:04x}:{(bdf >> 8) & 0xFF:02x}:{(bdf >> 3) & 0x1F:02x}.{bdf & 0x7}"


class AmdSmi:
    """An initialised amd-smi: the calls tuning makes. Processor handles are opaque pointers."""

    def __init__(self, lib: ctypes.CDLL) -> None:
        self._lib = lib

    def _call(self, name: str, *args: object) -> None:
        code = getattr(self._lib, name)(*args)
        if code != 0:
            raise AmdSmiError(code)

    def _handles(self, name: str, *first: object) -> list[ctypes.c_void_p]:
        """A list amd-smi fills: asked for its length first (a null array), then filled."""
        count = _u32(0)
        self._call(name, *first, ctypes.byref(count), None)
        handles = (ctypes.c_void_p * count.value)()
        self._call(name, *first, ctypes.byref(count), handles)
        return [ctypes.c_void_p(h) for h in handles[:count.value]]

    def processors(self) -> dict[str, ctypes.c_void_p]:
        """Every GPU's handle, by its PCI address."""
        found = {}
        for socket in self._handles("amdsmi_get_socket_handles"):
            for handle in self._handles("amdsmi_get_processor_handles", socket):
                bdf = _u64()
                self._call("amdsmi_get_gpu_device_bdf", handle, ctypes.byref(bdf))
                found[bdf_text(bdf.value)] = handle
        return found

    def perf_level(self, handle: ctypes.c_void_p) -> int:
        level = _u32()
        self._call("amdsmi_get_gpu_perf_level", handle, ctypes.byref(level))
        return level.value

    def set_perf_level(self, handle: ctypes.c_void_p, level: int) -> None:
        self._call("amdsmi_set_gpu_perf_level", handle, _u32(level))

    def power_cap(self, handle: ctypes.c_void_p) -> int:
        """The power cap in microwatts (sensor 0)."""
        info = _PowerCapInfo()
        self._call("amdsmi_get_power_cap_info", handle, _u32(0), ctypes.byref(info))
        return int(info.power_cap)

    def power_cap_range(self, handle: ctypes.c_void_p) -> tuple[int, int]:
        """The lowest and highest power cap the board takes, in microwatts (sensor 0)."""
        info = _PowerCapInfo()
        self._call("amdsmi_get_power_cap_info", handle, _u32(0), ctypes.byref(info))
        return int(info.min_power_cap), int(info.max_power_cap)

    def set_power_cap(self, handle: ctypes.c_void_p, microwatts: int) -> None:
        self._call("amdsmi_set_power_cap", handle, _u32(0), _u64(microwatts))

    def sclk_range(self, handle: ctypes.c_void_p) -> tuple[int, int]:
        """The graphics clock's lowest and highest MHz."""
        info = _ClockInfo()
        self._call("amdsmi_get_clock_info", handle, _u32(CLK_TYPE_SYS), ctypes.byref(info))
        return int(info.min_clk), int(info.max_clk)

    def set_sclk_range(self, handle: ctypes.c_void_p, low: int, high: int) -> None:
        self._call("amdsmi_set_gpu_clk_range", handle, _u64(low), _u64(high), _u32(CLK_TYPE_SYS))

    def set_compute_partition(self, handle: ctypes.c_void_p, mode: str) -> None:
        """amdsmi_compute_partition_type_t by name (SPX, DPX, TPX, QPX, CPX)."""
        self._call("amdsmi_set_gpu_compute_partition", handle, _u32(COMPUTE_PARTITIONS[mode]))

    def set_memory_partition(self, handle: ctypes.c_void_p, mode: str) -> None:
        """amdsmi_memory_partition_type_t by name (NPS1, NPS2, NPS4, NPS8)."""
        self._call("amdsmi_set_gpu_memory_partition", handle, _u32(MEMORY_PARTITIONS[mode]))


class session:  # lower case: used like the function it replaced, `with amd_smi_lib.session(library) as smi`
    """amd-smi, initialised for AMD GPUs from `library` (the host root's libamd_smi.so) on entry; shut down on exit.
    Loads a shared library. A class, not @contextmanager: contextlib is ~2 ms of a direct-path hook's imports."""

    def __init__(self, library: str) -> None:
        self._library = library
        self._lib: ctypes.CDLL | None = None

    def __enter__(self) -> AmdSmi:
        try:
            lib = ctypes.CDLL(self._library)
            code = lib.amdsmi_init(_u64(INIT_AMD_GPUS))
        except (OSError, AttributeError) as e:
            raise TuningError(f"amd-smi ({self._library}) cannot start: {e}") from e
        if code != 0:
            raise TuningError(f"amd-smi ({self._library}) cannot start: {AmdSmiError(code)}")
        self._lib = lib
        return AmdSmi(lib)

    def __exit__(self, *_: object) -> None:
        if self._lib is not None:
            self._lib.amdsmi_shut_down()
            self._lib = None
