"""The NVML calls tuning makes, through ctypes alone, on the host root's libnvidia-ml.so.1.

Tuning runs in the prestart and poststop hooks, a process each on the direct path. pynvml costs 19-27 ms to import
there (its 330 KB module, and ctypes.util with subprocess, shutil, tempfile and re for a find_library gpuhook never
calls: it binds the host root's library itself), more than the rest of a hook's work. These dozen calls are the C
API as NVIDIA documents it; discovery, labels and the exporter keep pynvml (host/nvml.py)."""

from __future__ import annotations

import ctypes

from gpuhook.errors import DiscoveryError

CLOCK_GRAPHICS = 0  # nvmlClockType_t
FAN_POLICY_AUTO = 0  # nvmlFanControlPolicy_t: NVML_FAN_POLICY_TEMPERATURE_CONTINOUS_SW (the driver's curve)
_SUCCESS, _INSUFFICIENT_SIZE = 0, 7
_uint = ctypes.c_uint


class GpuInstanceProfile(ctypes.Structure):
    """nvmlGpuInstanceProfileInfo_t."""

    _fields_ = [("id", _uint), ("isP2pSupported", _uint), ("sliceCount", _uint), ("instanceCount", _uint),
                ("multiprocessorCount", _uint), ("copyEngineCount", _uint), ("decoderCount", _uint),
                ("encoderCount", _uint), ("jpegCount", _uint), ("ofaCount", _uint),
                ("memorySizeMB", ctypes.c_ulonglong)]


class ComputeInstanceProfile(ctypes.Structure):
    """nvmlComputeInstanceProfileInfo_t."""

    _fields_ = [("id", _uint), ("sliceCount", _uint), ("instanceCount", _uint), ("multiprocessorCount", _uint),
                ("sharedCopyEngineCount", _uint), ("sharedDecoderCount", _uint), ("sharedEncoderCount", _uint),
                ("sharedJpegCount", _uint), ("sharedOfaCount", _uint)]


class Placement(ctypes.Structure):
    """nvmlGpuInstancePlacement_t: where a GPU instance sits, in memory slices."""

    _fields_ = [("start", _uint), ("size", _uint)]


class GpuInstanceInfo(ctypes.Structure):
    """nvmlGpuInstanceInfo_t."""

    _fields_ = [("device", ctypes.c_void_p), ("id", _uint), ("profileId", _uint), ("placement", Placement)]


GI_PROFILES = 0x12  # NVML_GPU_INSTANCE_PROFILE_COUNT: the profile enumeration's values are below it
CI_PROFILES = 0x9  # NVML_COMPUTE_INSTANCE_PROFILE_COUNT
NOT_SUPPORTED, IN_USE = 3, 19


class NvmlError(Exception):
    """An NVML call's failure: its return code and NVML's words for it."""

    def __init__(self, code: int, text: str) -> None:
        super().__init__(text)
        self.code = code


class Nvml:
    """An initialised NVML: the calls tuning makes. Device handles are opaque pointers."""

    def __init__(self, lib: ctypes.CDLL) -> None:
        self._lib = lib
        self._describe = getattr(lib, "nvmlErrorString", None)
        if self._describe is not None:
            self._describe.restype = ctypes.c_char_p

    def _call(self, name: str, *args: object) -> None:
        code = getattr(self._lib, name)(*args)
        if code != _SUCCESS:
            raise NvmlError(code, self.error_string(code))

    def error_string(self, code: int) -> str:
        """NVML's text for a return code (the code itself where the library has no nvmlErrorString)."""
        if self._describe is None:
            return f"NVML error {code}"
        text = self._describe(code)
        return text.decode(errors="replace") if text else f"NVML error {code}"

    def handle(self, uuid: str) -> ctypes.c_void_p:
        device = ctypes.c_void_p()
        self._call("nvmlDeviceGetHandleByUUID", ctypes.c_char_p(uuid.encode()), ctypes.byref(device))
        return device

    def _uint_out(self, name: str, *args: object) -> int:
        value = _uint()
        self._call(name, *args, ctypes.byref(value))
        return value.value

    def power_limit(self, device: ctypes.c_void_p) -> int:
        return self._uint_out("nvmlDeviceGetPowerManagementLimit", device)

    def power_limit_range(self, device: ctypes.c_void_p) -> tuple[int, int]:
        low, high = _uint(), _uint()
        self._call("nvmlDeviceGetPowerManagementLimitConstraints", device, ctypes.byref(low), ctypes.byref(high))
        return low.value, high.value

    def set_power_limit(self, device: ctypes.c_void_p, milliwatts: int) -> None:
        self._call("nvmlDeviceSetPowerManagementLimit", device, _uint(milliwatts))

    def compute_mode(self, device: ctypes.c_void_p) -> int:
        return self._uint_out("nvmlDeviceGetComputeMode", device)

    def set_compute_mode(self, device: ctypes.c_void_p, mode: int) -> None:
        self._call("nvmlDeviceSetComputeMode", device, ctypes.c_int(mode))

    def lock_clocks(self, device: ctypes.c_void_p, low: int, high: int) -> None:
        self._call("nvmlDeviceSetGpuLockedClocks", device, _uint(low), _uint(high))

    def reset_clocks(self, device: ctypes.c_void_p) -> None:
        self._call("nvmlDeviceResetGpuLockedClocks", device)

    def fans(self, device: ctypes.c_void_p) -> int:
        return self._uint_out("nvmlDeviceGetNumFans", device)

    def fan_policy(self, device: ctypes.c_void_p, fan: int) -> int:
        return self._uint_out("nvmlDeviceGetFanControlPolicy_v2", device, _uint(fan))

    def fan_target(self, device: ctypes.c_void_p, fan: int) -> int:
        return self._uint_out("nvmlDeviceGetTargetFanSpeed", device, _uint(fan))

    def fan_range(self, device: ctypes.c_void_p) -> tuple[int, int]:
        low, high = _uint(), _uint()
        self._call("nvmlDeviceGetMinMaxFanSpeed", device, ctypes.byref(low), ctypes.byref(high))
        return low.value, high.value

    def set_fan(self, device: ctypes.c_void_p, fan: int, percent: int) -> None:
        self._call("nvmlDeviceSetFanSpeed_v2", device, _uint(fan), _uint(percent))

    def auto_fan(self, device: ctypes.c_void_p, fan: int) -> None:
        self._call("nvmlDeviceSetDefaultFanSpeed_v2", device, _uint(fan))

    def mig_mode(self, device: ctypes.c_void_p) -> tuple[int, int]:
        current, pending = _uint(), _uint()
        self._call("nvmlDeviceGetMigMode", device, ctypes.byref(current), ctypes.byref(pending))
        return current.value, pending.value

    def set_mig_mode(self, device: ctypes.c_void_p, mode: int) -> None:
        status = ctypes.c_int()
        self._call("nvmlDeviceSetMigMode", device, _uint(mode), ctypes.byref(status))

    def gi_profile(self, device: ctypes.c_void_p, profile: int) -> GpuInstanceProfile:
        info = GpuInstanceProfile()
        self._call("nvmlDeviceGetGpuInstanceProfileInfo", device, _uint(profile), ctypes.byref(info))
        return info

    def gpu_instances(self, device: ctypes.c_void_p, profile_id: int) -> list[ctypes.c_void_p]:
        return self._instances("nvmlDeviceGetGpuInstances", device, profile_id)

    def create_gpu_instance(self, device: ctypes.c_void_p, profile_id: int) -> ctypes.c_void_p:
        return self._created("nvmlDeviceCreateGpuInstance", device, profile_id)

    def ci_profile(self, gi: ctypes.c_void_p, profile: int) -> ComputeInstanceProfile:
        info = ComputeInstanceProfile()
        self._call("nvmlGpuInstanceGetComputeInstanceProfileInfo", gi, _uint(profile), _uint(0), ctypes.byref(info))
        return info

    def compute_instances(self, gi: ctypes.c_void_p, profile_id: int) -> list[ctypes.c_void_p]:
        return self._instances("nvmlGpuInstanceGetComputeInstances", gi, profile_id)

    def create_compute_instance(self, gi: ctypes.c_void_p, profile_id: int) -> ctypes.c_void_p:
        return self._created("nvmlGpuInstanceCreateComputeInstance", gi, profile_id)

    def _instances(self, name: str, owner: ctypes.c_void_p, profile_id: int) -> list[ctypes.c_void_p]:
        """The GPU or compute instances of a profile an NVML call lists (at most 64: a GPU has 7 slices)."""
        handles = (ctypes.c_void_p * 64)()
        count = _uint(64)
        self._call(name, owner, _uint(profile_id), handles, ctypes.byref(count))
        return [ctypes.c_void_p(handles[i]) for i in range(count.value)]

    def _created(self, name: str, owner: ctypes.c_void_p, profile_id: int) -> ctypes.c_void_p:
        """The handle of the instance an NVML create call made."""
        made = ctypes.c_void_p()
        self._call(name, owner, _uint(profile_id), ctypes.byref(made))
        return made

    def destroy_compute_instance(self, ci: ctypes.c_void_p) -> None:
        self._call("nvmlComputeInstanceDestroy", ci)

    def destroy_gpu_instance(self, gi: ctypes.c_void_p) -> None:
        self._call("nvmlGpuInstanceDestroy", gi)

    def gi_placements(self, device: ctypes.c_void_p, profile_id: int) -> list[tuple[int, int]]:
        """The (start, size) in memory slices where a GPU instance of the profile can be made."""
        out = (Placement * 16)()
        count = _uint(16)
        self._call("nvmlDeviceGetGpuInstancePossiblePlacements_v2", device, _uint(profile_id), out,
                   ctypes.byref(count))
        return [(int(out[i].start), int(out[i].size)) for i in range(min(count.value, 16))]

    def create_gpu_instance_at(self, device: ctypes.c_void_p, profile_id: int, start: int,
                               size: int) -> ctypes.c_void_p:
        made = ctypes.c_void_p()
        self._call("nvmlDeviceCreateGpuInstanceWithPlacement", device, _uint(profile_id),
                   ctypes.byref(Placement(start, size)), ctypes.byref(made))
        return made

    def gi_id(self, gi: ctypes.c_void_p) -> int:
        """A GPU instance's id (its gi<G> in the driver's procfs)."""
        info = GpuInstanceInfo()
        self._call("nvmlGpuInstanceGetInfo", gi, ctypes.byref(info))
        return int(info.id)

    def max_clock(self, device: ctypes.c_void_p, kind: int) -> int:
        return self._uint_out("nvmlDeviceGetMaxClockInfo", device, ctypes.c_int(kind))

    def memory_clocks(self, device: ctypes.c_void_p) -> list[int]:
        return self._listed("nvmlDeviceGetSupportedMemoryClocks", device)

    def graphics_clocks(self, device: ctypes.c_void_p, memory_mhz: int) -> list[int]:
        return self._listed("nvmlDeviceGetSupportedGraphicsClocks", device, _uint(memory_mhz))

    def _listed(self, name: str, *args: object) -> list[int]:
        """A list NVML fills: asked for its length first (NVML_ERROR_INSUFFICIENT_SIZE), then filled."""
        count = _uint(0)
        code = getattr(self._lib, name)(*args, ctypes.byref(count), None)
        if code == _SUCCESS:
            return []
        if code != _INSUFFICIENT_SIZE:
            raise NvmlError(code, self.error_string(code))
        values = (_uint * count.value)()
        self._call(name, *args, ctypes.byref(count), values)
        return list(values[:count.value])


class session:  # lower case: used like the function it replaced, `with nvml_lib.session(library) as nvml`
    """NVML, initialised from `library` (the host root's libnvidia-ml.so.1) on entry; shut down on exit. Loads a shared
    library. A class, not @contextmanager: contextlib is ~2 ms of a direct-path hook's imports."""

    def __init__(self, library: str) -> None:
        self._library = library
        self._lib: ctypes.CDLL | None = None

    def __enter__(self) -> Nvml:
        try:
            lib = ctypes.CDLL(self._library)
            code = lib.nvmlInit_v2()
        except (OSError, AttributeError) as e:
            raise DiscoveryError(f"NVML ({self._library}) cannot start: {e}") from e
        nvml = Nvml(lib)
        if code != _SUCCESS:
            raise DiscoveryError(f"NVML ({self._library}) cannot start: {nvml.error_string(code)}")
        self._lib = lib
        return nvml

    def __exit__(self, *_: object) -> None:
        if self._lib is not None:
            self._lib.nvmlShutdown()
            self._lib = None
