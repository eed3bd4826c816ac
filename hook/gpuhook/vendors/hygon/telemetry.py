"""Hygon's telemetry part: the DCU's sysfs files (AMD's readings.SysfsTelemetry)."""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from gpuhook.host.inventory import VendorInventory
    from gpuhook.host.root import Root
    from gpuhook.vendors.contract import Source


def telemetry(root: Root, inv: VendorInventory) -> Source:
    """The DCU's sysfs telemetry files (busy percent, VRAM, hwmon power, temperature and clock)."""
    from gpuhook.vendors.amd.readings import SysfsTelemetry

    return SysfsTelemetry(root)
