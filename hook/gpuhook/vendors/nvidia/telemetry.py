"""NVIDIA's telemetry part: NVML sessions for the exporter (readings.py)."""

from __future__ import annotations

from gpuhook.vendors.nvidia.files import nvml_library

TYPE_CHECKING = False
if TYPE_CHECKING:
    from gpuhook.host.inventory import VendorInventory
    from gpuhook.host.root import Root
    from gpuhook.vendors.contract import Source


def telemetry(root: Root, inv: VendorInventory) -> Source:
    """NVML, bound to the host root's own libnvidia-ml, held open until closed."""
    from gpuhook.errors import DiscoveryError
    from gpuhook.vendors.nvidia.readings import NvmlTelemetry

    lib = nvml_library(inv)
    if lib is None:
        raise DiscoveryError(f"no libnvidia-ml under {root.base}: NVIDIA telemetry needs the driver's NVML")
    return NvmlTelemetry(root.lexical(lib))
