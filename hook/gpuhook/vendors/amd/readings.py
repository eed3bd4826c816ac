"""AMD telemetry: through amdsmi where the host's libamd_smi loads, else amdgpu's sysfs files of the GPU's PCI
device (gpu_busy_percent, mem_info_vram_*, hwmon power, temperature, sclk and power cap). Reads only."""

from __future__ import annotations

import contextlib
import os

from gpuhook.errors import DiscoveryError, one_line
from gpuhook.vendors.contract import Reading, values_or_error

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from types import ModuleType

    from gpuhook.host.inventory import Gpu
    from gpuhook.host.root import Root

_UNSUPPORTED = (2, 3)  # AMDSMI_STATUS_NOT_SUPPORTED, NOT_YET_IMPLEMENTED
_SESSION_LOST = (32, 34, 54)  # AMDSMI_STATUS_NOT_INIT, DRIVER_NOT_LOADED, AMDGPU_RESTART_ERR


class AmdSmiTelemetry:
    """One amdsmi session on the host root's libamd_smi.so; close() ends it."""

    def __init__(self, rocm_dir: str) -> None:
        from gpuhook.host import amd_smi

        try:
            amdsmi = amd_smi.load(rocm_dir)
            self._smi: ModuleType = amdsmi
            amdsmi.amdsmi_init()
            self._handles = {amdsmi.amdsmi_get_gpu_device_bdf(h): h for h in amdsmi.amdsmi_get_processor_handles()}
        except (ImportError, OSError, AttributeError, KeyError) as e:
            raise DiscoveryError(f"amdsmi cannot start: {e}") from e
        except Exception as e:  # amdsmi's own exceptions, whose module may not have loaded
            raise DiscoveryError(f"amdsmi cannot start: {one_line(e)}") from e
        self.broken = False

    def close(self) -> None:
        """End the amdsmi session."""
        with contextlib.suppress(self._smi.AmdSmiException):
            self._smi.amdsmi_shut_down()

    def read(self, gpus: Sequence[Gpu]) -> dict[str, Reading]:
        """Each GPU's reading, by its KFD unique id (else PCI address). Calls amdsmi."""
        return {g.key(): self._one(g) for g in gpus}

    def _one(self, gpu: Gpu) -> Reading:
        smi = self._smi
        handle = self._handles.get(gpu.pci)
        if handle is None:
            return Reading(error=f"amdsmi does not know GPU {gpu.pci}")

        def memory() -> tuple[float | None, ...]:
            return (float(smi.amdsmi_get_gpu_memory_usage(handle, smi.AmdSmiMemoryType.VRAM)),
                    float(smi.amdsmi_get_gpu_memory_total(handle, smi.AmdSmiMemoryType.VRAM)))

        def power() -> tuple[float | None, ...]:
            info = smi.amdsmi_get_power_info(handle)
            now = info.get("current_socket_power")  # MI300: current; older boards: the average
            return (_number(now if _number(now) is not None else info.get("average_socket_power")),)

        def temperature() -> tuple[float | None, ...]:
            metric = smi.AmdSmiTemperatureMetric.CURRENT
            try:
                return (float(smi.amdsmi_get_temp_metric(handle, smi.AmdSmiTemperatureType.HOTSPOT, metric)),)
            except smi.AmdSmiLibraryException as e:
                if e.err_code not in _UNSUPPORTED:
                    raise
            return (float(smi.amdsmi_get_temp_metric(handle, smi.AmdSmiTemperatureType.EDGE, metric)),)

        calls: tuple[tuple[tuple[str, ...], Callable[[], tuple[float | None, ...]]], ...] = (
            (("utilization",), lambda: (_ratio(smi.amdsmi_get_gpu_activity(handle).get("gfx_activity")),)),
            (("memory_used", "memory_total"), memory),
            (("power",), power),
            (("temperature",), temperature),
            (("sm_clock",), lambda: (_scaled(smi.amdsmi_get_clock_info(handle, smi.AmdSmiClkType.GFX)["clk"], 1e6),)),
            (("power_limit",), lambda: (_scaled(smi.amdsmi_get_power_cap_info(handle)["power_cap"], 1e-6),)),
        )
        values: dict[str, float] = {}
        errors: list[str] = []
        for names, call in calls:
            try:
                values.update((n, v) for n, v in zip(names, call(), strict=True) if v is not None)
            except smi.AmdSmiLibraryException as e:
                if e.err_code not in _UNSUPPORTED:
                    errors.append(f"{names[0]}: {one_line(e)}")
                    self.broken = self.broken or e.err_code in _SESSION_LOST
            except (smi.AmdSmiException, KeyError, TypeError, ValueError) as e:
                errors.append(f"{names[0]}: {one_line(e)}")
        return values_or_error(values, errors)


class SysfsTelemetry:
    """amdgpu's files in each GPU's PCI device directory under host_root (found by discovery), each opened
    without following a link and read bounded."""

    broken = False

    def __init__(self, root: Root) -> None:
        self._root = root

    def close(self) -> None:
        """Nothing to close."""

    def read(self, gpus: Sequence[Gpu]) -> dict[str, Reading]:
        """Each GPU's reading, by its KFD unique id (else PCI address). Reads sysfs."""
        return {g.key(): self._one(g) for g in gpus}

    def _one(self, gpu: Gpu) -> Reading:
        if not gpu.sysfs:
            return Reading(error=f"GPU {gpu.pci} has no amdgpu sysfs directory")
        device = self._root.lexical(gpu.sysfs)
        hwmon = self._hwmon(gpu.sysfs)
        files = {"utilization": ("gpu_busy_percent", 0.01), "memory_used": ("mem_info_vram_used", 1.0),
                 "memory_total": ("mem_info_vram_total", 1.0)}
        if hwmon:
            labels = {i: _read(f"{device}/{hwmon}/temp{i}_label") for i in (1, 2, 3)}  # edge, junction, mem
            sensor = next((i for want in ("junction", "edge") for i, label in labels.items() if label == want), 1)
            temp = f"{hwmon}/temp{sensor}_input"
            power = f"{hwmon}/power1_average" if os.path.exists(f"{device}/{hwmon}/power1_average") else \
                f"{hwmon}/power1_input"
            files |= {"power": (power, 1e-6), "temperature": (temp, 1e-3), "sm_clock": (f"{hwmon}/freq1_input", 1.0),
                      "power_limit": (f"{hwmon}/power1_cap", 1e-6)}
        values: dict[str, float] = {}
        for name, (file, scale) in files.items():
            value = _scaled(_read(f"{device}/{file}"), scale)
            if value is not None:
                values[name] = value
        return values_or_error(values, [f"no amdgpu telemetry file can be read under {gpu.sysfs}"])

    def _hwmon(self, sysfs: str) -> str:
        names = sorted(n for n in self._root.listdir(f"{sysfs}/hwmon") if n.startswith("hwmon") and n[5:].isdigit())
        return f"hwmon/{names[0]}" if names else ""


def _read(path: str) -> str:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        with os.fdopen(fd, "rb") as f:
            return f.read(256).decode(errors="replace").strip()
    except OSError:
        return ""


def _number(value: object) -> float | None:
    """A number amdsmi reported ("N/A" and other text: None)."""
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _scaled(value: object, scale: float) -> float | None:
    if isinstance(value, str):
        value = int(value) if value.isdigit() else None
    number = _number(value)
    return None if number is None else number * scale


def _ratio(percent: object) -> float | None:
    return _scaled(percent, 0.01)
