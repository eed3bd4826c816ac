"""The host settings of a GPU driven by amdgpu's interface (AMD's, and Hygon's hycu, which keeps it): what a tuning
request asks, as sysfs and amd-smi name them, and the refusals of what such GPUs lack (NVIDIA's compute mode, MPS).
Pure; light enough for the runtime's planning (no ctypes)."""

from __future__ import annotations

from gpuhook.edits import Edits
from gpuhook.errors import RequestError
from gpuhook.request.knobs import Sets
from gpuhook.vendors.contract import Setting

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence

    from gpuhook.host.inventory import Gpu
    from gpuhook.request.tuning import Tuning


# knob -> the amdgpu setting it sets, and its value there, in the order they are applied: a clock range needs the
# manual performance level first; the power cap is in microwatts
SETTINGS = (Sets("perf-level", "perf_level", str), Sets("clocks", "perf_level", lambda _: "manual"),
            Sets("clocks", "sclk", lambda mhz: f"{mhz[0]}-{mhz[1]}"),
            Sets("power-limit", "power_cap", lambda watts: str(watts * 1_000_000)), Sets("fan", "fan", str))
# another vendor's knob -> whose setting it is, and what to ask instead
FOREIGN = {"compute-mode": ("an NVIDIA setting", "use gpuhook.dev/perf-level")}


def settings(vendor: str, label: str, tuning: Tuning, gpu: Gpu) -> tuple[Setting, ...]:
    """The performance level (manual for a clock range), sclk levels, the hwmon power cap and fan of `vendor`'s GPU
    (SETTINGS; `label` in messages: AMD), by its PCI device directory."""
    asked = tuning.settings(SETTINGS, FOREIGN, f"GPU {gpu.index} is {label}")
    if tuning.clocks and tuning.perf_level not in (None, "manual"):
        raise RequestError(f"gpuhook.dev/clocks needs the manual performance level, but "
                           f"gpuhook.dev/perf-level={tuning.perf_level!r}: drop one of them")
    return tuple(Setting(vendor=vendor, gpu=gpu.uuid or gpu.pci, index=gpu.index, pci=gpu.pci, device=gpu.sysfs,
                         name=n, value=v) for n, v in asked)


def no_daemon(label: str, tuning: Tuning, gpus: Sequence[Gpu]) -> tuple[tuple[Setting, ...], Edits]:
    """No daemon shares these GPUs: MPS is NVIDIA's (they share by time-slicing)."""
    if tuning.mps:
        which = f"GPU {gpus[0].index}" if gpus else "this GPU"
        raise RequestError(f"gpuhook.dev/mps is NVIDIA's Multi-Process Service, but {which} is {label}: remove it "
                           f"({label} GPUs are shared by time-slicing)")
    return (), Edits()
