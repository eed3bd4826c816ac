"""The host settings of a GPU driven by amdgpu's interface (AMD's, and Hygon's hycu, which keeps it): what a tuning
request asks, as sysfs and amd-smi name them, and the refusals of what such GPUs lack (NVIDIA's compute mode, MPS).
Pure; light enough for the runtime's planning (no ctypes)."""

from __future__ import annotations

from gpuhook.edits import Edits
from gpuhook.errors import RequestError
from gpuhook.vendors.contract import Setting

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence

    from gpuhook.host.inventory import Gpu
    from gpuhook.request.tuning import Tuning


def settings(vendor: str, label: str, tuning: Tuning, gpu: Gpu) -> tuple[Setting, ...]:
    """The performance level (manual for a clock range), sclk levels, the hwmon power cap (microwatts) and fan of
    `vendor`'s GPU (`label` in messages: AMD), by its PCI device directory."""
    if tuning.compute_mode:
        raise RequestError(f"gpuhook.dev/compute-mode={tuning.compute_mode!r} is an NVIDIA setting but "
                           f"GPU {gpu.index} is {label}: use gpuhook.dev/perf-level")
    if tuning.clocks and tuning.perf_level not in (None, "manual"):
        raise RequestError(f"gpuhook.dev/clocks needs the manual performance level, but "
                           f"gpuhook.dev/perf-level={tuning.perf_level!r}: drop one of them")
    asked = []
    if tuning.perf_level or tuning.clocks:
        asked.append(("perf_level", tuning.perf_level or "manual"))
    if tuning.clocks:
        asked.append(("sclk", f"{tuning.clocks[0]}-{tuning.clocks[1]}"))
    if tuning.power_limit:
        asked.append(("power_cap", str(tuning.power_limit * 1_000_000)))
    if tuning.fan:
        asked.append(("fan", tuning.fan))
    return tuple(Setting(vendor, gpu.uuid or gpu.pci, gpu.index, gpu.pci, gpu.sysfs, n, v) for n, v in asked)


def no_daemon(label: str, tuning: Tuning, gpus: Sequence[Gpu]) -> tuple[tuple[Setting, ...], Edits]:
    """No daemon shares these GPUs: MPS is NVIDIA's (they share by time-slicing)."""
    if tuning.mps:
        which = f"GPU {gpus[0].index}" if gpus else "this GPU"
        raise RequestError(f"gpuhook.dev/mps is NVIDIA's Multi-Process Service, but {which} is {label}: remove it "
                           f"({label} GPUs are shared by time-slicing)")
    return (), Edits()
