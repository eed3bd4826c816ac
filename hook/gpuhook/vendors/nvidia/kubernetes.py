"""NVIDIA's Kubernetes part: GPU Feature Discovery's labels (node_labels.py), the device plugin's MIG resources, the
DRA devices gpu.nvidia.com publishes (dra.py)."""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from gpuhook.host.inventory import VendorInventory
    from gpuhook.host.root import Root
    from gpuhook.vendors.contract import DraDevice

RESOURCE = "nvidia.com/gpu"  # the device plugin's, as the vendor's own plugin names it
SHARING: tuple[str, ...] = ("time-slicing", "mps")
SLICE_RESOURCE = "nvidia.com/mig-{profile}"  # NVIDIA's device plugin's mixed strategy


def labels(inv: VendorInventory, root: Root, replicas: int, strategy: str = "none",
           sharing: str = "time-slicing") -> dict[str, str]:
    """The driver's CUDA version and GFD's nvidia.com/ labels, MIG's too (node_labels.py). Loads libcuda, NVML."""
    from gpuhook.vendors.nvidia import node_labels as nvidia_labels

    return nvidia_labels.labels(inv, root, replicas, strategy, sharing)


def dra_devices(inv: VendorInventory, root: Root) -> tuple[DraDevice, ...]:
    """The DRA driver's devices: whole GPUs not in MIG mode and MIG devices, as gpu.nvidia.com names them
    (dra.py). Loads NVML, libcuda."""
    from gpuhook.vendors.nvidia import dra

    return dra.dra_devices(inv, root)
