"""NVIDIA's Kubernetes part: GPU Feature Discovery's labels (node_labels.py), the device plugin's MIG resources, the
DRA devices gpu.nvidia.com publishes (dra.py), MIG devices made on demand (mig_dynamic.py)."""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from gpuhook.host.inventory import Gpu, VendorInventory
    from gpuhook.host.root import Root
    from gpuhook.vendors.contract import DraDevice, Partitionable

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


def partitionable(inv: VendorInventory, root: Root) -> tuple[Partitionable, ...]:
    """Each MIG-capable GPU whole and as every MIG profile at every placement, over its memory slices
    (mig_dynamic.py). Loads NVML, libcuda."""
    from gpuhook.vendors.nvidia import mig_dynamic

    return mig_dynamic.offer(inv, root)


def make_partition(root: Root, gpu: Gpu, layout: tuple[tuple[str, str], ...]) -> str:
    """The MIG device `layout` names made on `gpu` (its place, gi<G>/ci<C>), or the GPU whole for ()
    (mig_dynamic.py). Loads NVML; writes the driver's state and device nodes."""
    from gpuhook.vendors.nvidia import mig_dynamic

    return mig_dynamic.make(root, _nvml(root), gpu, layout)


def remove_partition(root: Root, gpu: Gpu, place: str) -> None:
    """The MIG device at `place` destroyed (mig_dynamic.py). Loads NVML; writes the driver's state."""
    from gpuhook.vendors.nvidia import mig_dynamic

    if place:
        mig_dynamic.remove(root, _nvml(root), gpu, place)


def _nvml(root: Root) -> str:
    """The host's libnvidia-ml, host-absolute as this process opens it. GpuhookError where there is none."""
    from gpuhook.errors import GpuhookError
    from gpuhook.vendors.nvidia.files import nvml_library
    from gpuhook.vendors.nvidia.vendor import discover

    lib = nvml_library(discover(root))
    if lib is None:
        raise GpuhookError(f"no libnvidia-ml under {root.base}: MIG devices are made through the driver's NVML")
    return root.lexical(lib)
