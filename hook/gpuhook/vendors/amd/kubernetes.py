"""AMD's Kubernetes part: the node labeller's amd.com/ labels (node_labels.py, partitions.py), partitions as
GPUs of their own, the DRA devices gpu.amd.com publishes (dra.py), partitions made on demand
(partition_dynamic.py)."""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from gpuhook.host.inventory import Gpu, VendorInventory
    from gpuhook.host.root import Root
    from gpuhook.vendors.contract import DraDevice, Partitionable

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


def partitionable(inv: VendorInventory, root: Root) -> tuple[Partitionable, ...]:
    """Each GPU with partition modes as every partition of every mode over its XCDs (partition_dynamic.py). Reads
    KFD and sysfs."""
    from gpuhook.vendors.amd import partition_dynamic

    return partition_dynamic.offer(inv, root)


def make_partition(root: Root, gpu: Gpu, layout: tuple[tuple[str, str], ...]) -> str:
    """The GPU in the layout's modes; the place of the partition asked (partition_dynamic.py). Writes the driver's
    files or calls amd-smi."""
    from gpuhook.vendors.amd import partition_dynamic

    return partition_dynamic.make(root, gpu, layout)


def remove_partition(root: Root, gpu: Gpu, place: str) -> None:
    """The GPU whole again, SPX (partition_dynamic.py): the DRA driver asks once no claim holds a partition of it.
    Writes the driver's files or calls amd-smi."""
    from gpuhook.vendors.amd import partition_dynamic

    if place:
        partition_dynamic.remove(root, gpu)
