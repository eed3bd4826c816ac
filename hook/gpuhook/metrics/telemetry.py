"""GPU telemetry for the exporter: one source per vendor (Vendor.telemetry: NVML, amdsmi, amdgpu's sysfs), kept
open across scrapes and opened again when the vendor's driver changes under it (another version, other GPUs: a
reload) or the source says its session is lost. Reads only: no source changes a GPU."""

from __future__ import annotations

import contextlib

from gpuhook.errors import GpuhookError
from gpuhook.frozen import frozen
from gpuhook.vendors.registry import get

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Protocol

    from gpuhook.host.inventory import Gpu, Inventory
    from gpuhook.host.root import Root
else:
    Protocol = object


@frozen
class Reading:
    """What one GPU reports now; None where it does not report it (not supported, not readable)."""

    utilization: float | None = None  # the share of the last sample period a kernel ran (0..1)
    memory_used: float | None = None  # bytes of the GPU's own memory in use
    memory_total: float | None = None  # bytes
    power: float | None = None  # watts drawn now
    temperature: float | None = None  # degrees Celsius (NVIDIA: the GPU core; AMD: the junction, else edge)
    sm_clock: float | None = None  # hertz (NVIDIA: SM clock; AMD: sclk/gfx clock)
    power_limit: float | None = None  # watts (NVIDIA: the power management limit; AMD: the power cap)
    error: str = ""  # why the GPU's telemetry cannot be read at all ("" when something was read)


class Source(Protocol):
    """An open telemetry session for one vendor's GPUs."""

    broken: bool  # the session is lost (the driver went away under it): close it and open a new one

    def read(self, gpus: Sequence[Gpu]) -> dict[str, Reading]:
        """A reading per GPU, keyed by its UUID (else PCI address). Reads the driver."""
        ...

    def close(self) -> None:
        """End the session."""
        ...


def values_or_error(values: dict[str, float], errors: list[str]) -> Reading:
    """A Reading from what a source could read; its error when it could read nothing."""
    if not values:
        return Reading(error="; ".join(errors) or "no telemetry is supported")
    v = values.get
    return Reading(v("utilization"), v("memory_used"), v("memory_total"), v("power"), v("temperature"),
                   v("sm_clock"), v("power_limit"))


class Sessions:
    """The open sources, one per vendor with GPUs, for the life of the exporter."""

    def __init__(self, root: Root) -> None:
        self._root = root
        self._open: dict[str, tuple[tuple[str, tuple[str, ...]], Source]] = {}

    def read(self, inventory: Inventory) -> dict[str, Reading]:
        """Every GPU's reading, keyed by UUID (else PCI address); a source that cannot open gives each of its GPUs
        the error. Opens, reopens and closes sessions as the drivers come and go."""
        out: dict[str, Reading] = {}
        present = set()
        for inv in inventory.with_gpus():
            present.add(inv.vendor)
            generation = (inv.driver_version or "", tuple(g.key() for g in inv.gpus))
            held = self._open.get(inv.vendor)
            if held is not None and (held[0] != generation or held[1].broken):
                self._close(inv.vendor)
                held = None
            if held is None:
                try:
                    held = (generation, get(inv.vendor).telemetry(self._root, inv))
                except GpuhookError as e:
                    out.update({g.key(): Reading(error=str(e)) for g in inv.gpus})
                    continue
                self._open[inv.vendor] = held
            out.update(held[1].read(inv.gpus))
        for vendor in [v for v in self._open if v not in present]:  # the driver is gone: so is its session
            self._close(vendor)
        return out

    def close(self) -> None:
        """End every session."""
        for vendor in list(self._open):
            self._close(vendor)

    def _close(self, vendor: str) -> None:
        _, source = self._open.pop(vendor)
        with contextlib.suppress(GpuhookError, OSError):  # a session whose driver is gone may fail to end: it is
            source.close()  # dropped all the same
