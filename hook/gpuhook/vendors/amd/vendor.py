"""AMD and KFD-compatible DCUs: KFD topology GPUs, /dev/kfd and the /dev/dri nodes of each GPU; amdsmi or
amdgpu sysfs tuning."""

from __future__ import annotations

import os

from gpuhook.edits import DeviceNode, Edits
from gpuhook.host.devnodes import read_node
from gpuhook.host.inventory import Gpu, VendorInventory
from gpuhook.request.ids import is_hex
from gpuhook.vendors.amd.kfd import AMD, gpu_nodes, kfd_gpus

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence

    from gpuhook.config import Policy
    from gpuhook.host.image import InRoot
    from gpuhook.host.root import Root
    from gpuhook.request.tuning import Tuning
    from gpuhook.simulator.host import HostSpec
    from gpuhook.vendors.contract import Backend, DraDevice, Setting, Source

NAME = "amd"
LABEL = "AMD"
NODE_PREFIXES: tuple[str, ...] = ("/dev/kfd", "/dev/dri/renderD")
ENV_KEY = "AMD_VISIBLE_DEVICES"
NONE_MEANS_DRIVER = False
CAPABILITIES_ENV: str | None = None
CDI_KIND = "amd.com/gpu"
DOCKER_GPUS_HOOK: str | None = None  # Docker 28.3+ sets AMD_VISIBLE_DEVICES for its "amd" driver, without a hook
SHARING: tuple[str, ...] = ("time-slicing",)
STACK: str | None = None
SLICE_RESOURCE = "amd.com/{profile}"  # partitions are GPUs of their own: never asked (no slices beside them)
KFD = "/dev/kfd"
KFD_PROC = "/sys/class/kfd/kfd/proc"  # other tenants' GPU processes
_NODES = "/sys/class/kfd/kfd/topology/nodes"


def refresh() -> None:
    """Nothing: discovery remembers nothing of the host between calls (its KFD and sysfs files are read anew)."""


def discover(root: Root) -> VendorInventory | None:
    """AMD's GPUs in KFD node order (nodes with SIMDs whose PCI vendor is AMD's), their render and card nodes; None
    without KFD, or where KFD is another driver's (no amdgpu module, no AMD GPU)."""
    if not root.exists(_NODES) and not root.exists(KFD):
        return None
    from gpuhook.vendors.amd import partitions as amd_partitions

    gpus, parts = kfd_gpus(root, NAME, gpu_nodes(root, AMD))
    if not gpus and not root.exists("/sys/module/amdgpu"):
        return None
    gpus = amd_partitions.mark(root, gpus, parts)
    version = None
    if root.exists("/sys/module/amdgpu/version"):
        version = root.read_text("/sys/module/amdgpu/version").strip() or None
    kfd = read_node(root, KFD)
    notes = () if kfd else (f"{KFD} is missing",)
    return VendorInventory(NAME, version, tuple(gpus), (kfd,) if kfd else (), (), notes)


def parse_id(item: str) -> str | None:
    """A KFD unique id (0x followed by 1-16 hex digits), as hex() writes it; None for anything else."""
    if item[:2] in ("0x", "0X") and is_hex(item[2:], 1, 16):
        return hex(int(item, 16))
    return None


def plan(inv: VendorInventory, gpus: Sequence[Gpu], capabilities: frozenset[str], host_base: str) -> Edits:
    """/dev/kfd plus each GPU's render and card node, their cgroup rules and their groups."""
    return Edits.for_nodes([*inv.shared_nodes, *(n for g in gpus for n in g.nodes)])


def identify(root: Root, inv: VendorInventory, idents: Sequence[str] | None) -> VendorInventory:
    """AMD's identities all come from sysfs: `inv` as it is."""
    return inv


def claims(gpu: Gpu) -> tuple[DeviceNode, ...]:
    """A spec with the GPU's render node has the GPU (card nodes may come as all of /dev/dri)."""
    return tuple(n for n in gpu.nodes if "card" not in n.path)


def hardening(policy: Policy) -> Edits:
    """The KFD's process list hidden ([policy] mask_kfd_proc)."""
    return Edits(masked_paths=(KFD_PROC,) if policy.mask_kfd_proc else ())


def procfs_files(root: Root, gpus: Sequence[Gpu], policy: Policy) -> tuple[str, dict[str, str]] | None:
    """AMD's driver has no procfs of its own to copy."""
    return None


def settings(tuning: Tuning, gpu: Gpu) -> tuple[Setting, ...]:
    """The performance level (manual for a clock range), sclk levels, the hwmon power cap and fan, by the GPU's PCI
    device directory (amd/settings.py)."""
    from gpuhook.vendors.amd.settings import settings as sysfs_settings

    return sysfs_settings(NAME, "AMD", tuning, gpu)


def sharing(tuning: Tuning, gpus: Sequence[Gpu], directory: str) -> tuple[tuple[Setting, ...], Edits]:
    """No daemon shares these GPUs: MPS is NVIDIA's."""
    from gpuhook.vendors.amd.settings import no_daemon

    return no_daemon("AMD", tuning, gpus)


def repartition(root: Root, gpu: Gpu, layout: dict[str, object], dry_run: bool = False) -> str:
    """Compute (SPX, DPX, QPX, CPX) and memory (NPS1, NPS4) partition modes (partitions.py)."""
    from gpuhook.vendors.amd import partitions as amd_partitions

    return amd_partitions.repartition(root, gpu.pci, layout, dry_run=dry_run)


def backend(root: Root, state_dir: str) -> Backend:
    """amd-smi on the host's /opt/rocm/lib/libamd_smi.so where it loads, else amdgpu's sysfs files."""
    from gpuhook.errors import TuningError
    from gpuhook.vendors.amd.tuning import AmdSmiBackend, SysfsBackend

    library = os.path.join(root.resolve("/opt/rocm"), "lib/libamd_smi.so")
    if os.path.exists(library):
        try:
            return AmdSmiBackend(library, SysfsBackend(root, discover))
        except TuningError:
            pass  # a library that does not start or list its GPUs: the kernel's files still work
    return SysfsBackend(root, discover)


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


def image_stack(image: InRoot, notes: list[str]) -> str | None:
    """No STACK: the image's ROCm is checked by plan/compat itself."""
    return None


def stack_window(inv: VendorInventory) -> tuple[str, str] | None:
    """No STACK."""
    return None


def checks(inv: VendorInventory) -> tuple[tuple[str, str, str], ...]:
    """Nothing beyond the device nodes: ROCm user space is the image's (or host-rocm's)."""
    return ()


def simulate(root: str, spec: HostSpec, count: int) -> None:
    """The simulator's amdgpu: KFD topology, DRM nodes, amdgpu sysfs and a stub libamd_smi."""
    from gpuhook.vendors.amd import sim as sim_amd

    sim_amd.build(root, spec, count)
