"""AMD's GPU path: KFD topology GPUs, /dev/kfd and the /dev/dri nodes of each GPU, compute partitions.
Its other parts: tuning.py, telemetry.py, kubernetes.py, sim.py (no stack part: the image's ROCm is plan/compat's;
no doctor part: ROCm user space is the image's or host-rocm's)."""

from __future__ import annotations

from gpuhook.edits import DeviceNode, Edits
from gpuhook.host.devnodes import read_node
from gpuhook.host.inventory import Gpu, VendorInventory
from gpuhook.request.ids import is_hex
from gpuhook.vendors.amd.kfd import AMD, gpu_nodes, kfd_gpus

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence

    from gpuhook.config import Policy
    from gpuhook.host.root import Root

NAME = "amd"
LABEL = "AMD"
STACK = "ROCm"  # the user space its images carry: its stack part (stack.py) checks it
NODE_PREFIXES: tuple[str, ...] = ("/dev/kfd", "/dev/dri/renderD")
ENV_KEY = "AMD_VISIBLE_DEVICES"
NONE_MEANS_DRIVER = False
CAPABILITIES_ENV: str | None = None
CDI_KIND = "amd.com/gpu"
DOCKER_GPUS_HOOK: str | None = None  # Docker 28.3+ sets AMD_VISIBLE_DEVICES for its "amd" driver, without a hook
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
    return VendorInventory(vendor=NAME, driver_version=version, gpus=tuple(gpus), shared_nodes=(kfd,) if kfd else (),
                           files=(), notes=notes)


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
