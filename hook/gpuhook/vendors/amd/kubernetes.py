"""AMD's Kubernetes part: the node labeller's amd.com/ labels (node_labels.py, partitions.py), partitions as
GPUs of their own, the DRA devices gpu.amd.com publishes (dra.py)."""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from gpuhook.host.inventory import VendorInventory
    from gpuhook.host.root import Root
    from gpuhook.vendors.contract import DraDevice

RESOURCE = "amd.com/gpu"  # the device plugin's, as the vendor's own plugin names it
SHARING: tuple[str, ...] = ("time-slicing",)
SLICE_RESOURCE = "amd.com/{profile}"  # partitions are GPUs of their own: never asked (no slices beside them)


def labels(inv: VendorInventory, root: Root, replicas: int, strategy: str = "none",
           sharing: str = "time-slicing") -> dict[str, str]:
    """ROCm release, in-tree, gfx targets and the node labeller's amd.com/ labels (node_labels.py). Reads sysfs."""
    from gpuhook.vendors.amd import node_labels as amd_labels
    from gpuhook.vendors.amd import partitions as amd_partitions

    return {**amd_labels.labels(inv, root, replicas), **amd_partitions.labels(root, inv)}


def dra_devices(inv: VendorInventory, root: Root) -> tuple[DraDevice, ...]:
    """The DRA driver's devices: whole GPUs and compute partitions, as gpu.amd.com names them (dra.py). Reads
    KFD and sysfs."""
    from gpuhook.vendors.amd import dra

    return dra.dra_devices(inv, root)
