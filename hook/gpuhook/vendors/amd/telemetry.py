"""AMD's telemetry part: amdsmi where it loads, else amdgpu's sysfs files (readings.py)."""

from __future__ import annotations

import os

TYPE_CHECKING = False
if TYPE_CHECKING:
    from gpuhook.host.inventory import VendorInventory
    from gpuhook.host.root import Root
    from gpuhook.vendors.contract import Source


def telemetry(root: Root, inv: VendorInventory) -> Source:
    """amdsmi on the host's /opt/rocm/lib/libamd_smi.so where it loads, else amdgpu's sysfs files."""
    from gpuhook.errors import DiscoveryError
    from gpuhook.vendors.amd.readings import AmdSmiTelemetry, SysfsTelemetry

    rocm = root.resolve("/opt/rocm")
    if os.path.exists(os.path.join(rocm, "lib/libamd_smi.so")):
        try:
            return AmdSmiTelemetry(rocm)
        except DiscoveryError:
            pass  # an amdsmi package that does not fit the host's library: the kernel's files still work
    return SysfsTelemetry(root)
