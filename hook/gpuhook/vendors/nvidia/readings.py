"""NVIDIA telemetry through NVML (pynvml bound to the host root's libnvidia-ml.so.1): utilisation, memory, power,
temperature, SM clock and the power limit of each GPU, the session held open across scrapes. Reads only."""

from __future__ import annotations

import contextlib

from gpuhook.vendors.contract import Reading, values_or_error

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from types import ModuleType

    from gpuhook.host.inventory import Gpu

# NVML errors that mean the session itself is gone (the driver was unloaded or replaced under it)
_SESSION_LOST = ("NVML_ERROR_UNINITIALIZED", "NVML_ERROR_DRIVER_NOT_LOADED", "NVML_ERROR_LIB_RM_VERSION_MISMATCH")


class NvmlTelemetry:
    """One NVML session; close() ends it."""

    def __init__(self, library: str) -> None:
        from gpuhook.host import nvml

        self._session = nvml.session(library)  # DiscoveryError when NVML cannot start
        self._nvml: ModuleType = self._session.__enter__()
        self._lost = {getattr(self._nvml, name) for name in _SESSION_LOST if hasattr(self._nvml, name)}
        self._handles: dict[str, object] = {}
        self.broken = False

    def close(self) -> None:
        """End the NVML session (one whose driver is gone may refuse: it is dropped all the same)."""
        with contextlib.suppress(self._nvml.NVMLError):
            self._session.__exit__(None, None, None)

    def read(self, gpus: Sequence[Gpu]) -> dict[str, Reading]:
        """Each GPU's reading, by UUID. Calls NVML."""
        return {g.key(): self._one(g) for g in gpus}

    def _one(self, gpu: Gpu) -> Reading:
        nv = self._nvml
        try:
            handle = self._handles.get(gpu.uuid) or nv.nvmlDeviceGetHandleByUUID(gpu.uuid)
        except nv.NVMLError as e:
            self._note(e)
            return Reading(error=f"NVML does not know GPU {gpu.uuid}: {e}")
        self._handles[gpu.uuid] = handle
        def memory() -> tuple[float, ...]:
            info = nv.nvmlDeviceGetMemoryInfo(handle)
            return float(info.used), float(info.total)

        calls: tuple[tuple[tuple[str, ...], Callable[[], tuple[float, ...]]], ...] = (
            (("utilization",), lambda: (nv.nvmlDeviceGetUtilizationRates(handle).gpu / 100,)),
            (("memory_used", "memory_total"), memory),
            (("power",), lambda: (nv.nvmlDeviceGetPowerUsage(handle) / 1000,)),
            (("temperature",), lambda: (float(nv.nvmlDeviceGetTemperature(handle, nv.NVML_TEMPERATURE_GPU)),)),
            (("sm_clock",), lambda: (nv.nvmlDeviceGetClockInfo(handle, nv.NVML_CLOCK_SM) * 1e6,)),
            (("power_limit",), lambda: (nv.nvmlDeviceGetPowerManagementLimit(handle) / 1000,)),
        )
        values: dict[str, float] = {}
        errors: list[str] = []
        for names, call in calls:
            try:
                values.update(zip(names, call(), strict=True))
            except nv.NVMLError as e:
                if getattr(e, "value", None) not in (nv.NVML_ERROR_NOT_SUPPORTED, nv.NVML_ERROR_FUNCTION_NOT_FOUND):
                    errors.append(f"{names[0]}: {e}")
                    self._note(e)
        if errors and self.broken:
            self._handles.clear()
        return values_or_error(values, errors)

    def _note(self, e: BaseException) -> None:
        if getattr(e, "value", None) in self._lost:
            self.broken = True
