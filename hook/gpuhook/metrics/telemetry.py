"""GPU telemetry for the exporter: one source per vendor (Vendor.telemetry: NVML, amdsmi, amdgpu's sysfs), kept
open across scrapes and opened again when the vendor's driver changes under it (another version, other GPUs: a
reload) or the source says its session is lost. Reads only: no source changes a GPU."""

from __future__ import annotations

import contextlib

from gpuhook.errors import GpuhookError
from gpuhook.vendors.contract import Reading
from gpuhook.vendors.registry import telemetry

TYPE_CHECKING = False
if TYPE_CHECKING:
    from gpuhook.host.inventory import Inventory
    from gpuhook.host.root import Root
    from gpuhook.vendors.contract import Source



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
                    held = (generation, telemetry(inv.vendor).telemetry(self._root, inv))
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
