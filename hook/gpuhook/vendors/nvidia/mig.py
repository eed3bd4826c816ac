"""NVIDIA MIG devices, from the driver's procfs alone (no NVML on the injection path), and their UUIDs and
profiles from NVML where a request or a label names them.

The driver publishes each MIG device as two capabilities: its GPU instance and its compute instance,
`/proc/driver/nvidia/capabilities/gpu<N>/mig/gi<G>/access` and `.../gi<G>/ci<C>/access` (N: the GPU's device
minor), each with the `DeviceFileMinor` of its node `/dev/nvidia-caps/nvidia-cap<minor>`, whose major is the
`nvidia-caps` line of `/proc/devices`; `/proc/driver/nvidia-caps/mig-minors` lists every minor the driver may
use. A process opens its GI and CI nodes (and the GPU's /dev/nvidia<N>) to use the slice.

MIG devices are numbered per GPU in (GI, CI) order: `<gpu>:<mig>`, the index form NVIDIA's tools accept.
"""

from __future__ import annotations

from gpuhook.host.devnodes import read_node
from gpuhook.host.inventory import Gpu

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence

    from gpuhook.edits import DeviceNode
    from gpuhook.host.inventory import VendorInventory
    from gpuhook.host.root import Root

CAPS = "/proc/driver/nvidia/capabilities"
MINORS = "/proc/driver/nvidia-caps/mig-minors"
NODE_DIR = "/dev/nvidia-caps"
_UUID_GROUPS = (8, 4, 4, 4, 12)


def parse_access(text: str) -> int | None:
    """The DeviceFileMinor of a capability's access file, or None when it names none. Pure."""
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep and key.strip() == "DeviceFileMinor" and value.strip().isdigit():
            return int(value.strip())
    return None


def parse_devices(text: str, name: str) -> int | None:
    """The major of character device `name` in /proc/devices text, or None. Pure."""
    block = text.split("Block devices:", 1)[0]
    for line in block.splitlines():
        words = line.split()
        if len(words) == 2 and words[1] == name and words[0].isdigit():
            return int(words[0])
    return None


def parse_id(item: str) -> str | None:
    """MIG-<uuid> (lower-cased) or the index form <gpu>:<mig>; None for anything else. Pure."""
    if item.startswith("MIG-"):
        body = item[4:]
        if [len(g) for g in body.split("-")] == list(_UUID_GROUPS) and \
                all(c in "0123456789abcdefABCDEF" for c in body.replace("-", "")):
            return "MIG-" + body.lower()
        return None
    gpu, colon, mig = item.partition(":")
    if colon and gpu.isascii() and gpu.isdigit() and mig.isascii() and mig.isdigit() and len(gpu) <= 4 \
            and len(mig) <= 2:
        return f"{int(gpu)}:{int(mig)}"
    return None


def discover(root: Root, gpus: Sequence[Gpu]) -> tuple[tuple[Gpu, ...], tuple[str, ...]]:
    """The MIG devices of `gpus` (whole GPUs, with their /dev/nvidia<N>), and notes on what is odd. Reads procfs
    and /dev."""
    if not root.exists(CAPS):
        return (), ()
    major = None
    if root.exists("/proc/devices"):
        major = parse_devices(root.read_text("/proc/devices"), "nvidia-caps")
    out: list[Gpu] = []
    notes: list[str] = []
    for gpu in gpus:
        if not gpu.nodes:
            continue
        base = f"{CAPS}/gpu{gpu.nodes[0].minor}/mig"
        pairs = []
        for gi in _numbered(root.listdir(base), "gi"):
            for ci in _numbered(root.listdir(f"{base}/gi{gi}"), "ci"):
                pairs.append((gi, ci))
        for mig, (gi, ci) in enumerate(pairs):
            nodes, missing = [gpu.nodes[0]], []
            for rel in (f"gi{gi}", f"gi{gi}/ci{ci}"):
                found = _cap_node(root, f"{base}/{rel}/access", major)
                if isinstance(found, str):
                    missing.append(found)
                else:
                    nodes.append(found)
            out.append(Gpu(vendor=gpu.vendor, index=gpu.index, uuid="", pci=gpu.pci, model=gpu.model,
                           nodes=tuple(nodes), missing=tuple(missing),
                           parent=gpu.uuid or gpu.pci, slice=f"{gpu.index}:{mig}", place=f"gi{gi}/ci{ci}"))
        if pairs and major is None:
            notes.append("MIG devices found but /proc/devices has no nvidia-caps major")
    return tuple(out), tuple(notes)


def procfs_files(root: Root, gpus: Sequence[Gpu]) -> dict[str, str]:
    """The capabilities files of the MIG devices among `gpus` (relative to /proc/driver/nvidia), and the
    mig config/monitor capabilities never. Reads procfs."""
    files: dict[str, str] = {}
    for gpu in gpus:
        if not gpu.place:
            continue
        gi, ci = _ids(gpu)
        base = f"capabilities/gpu{gpu.nodes[0].minor}/mig/gi{gi}"
        for rel in (f"{base}/access", f"{base}/ci{ci}/access"):
            path = f"/proc/driver/nvidia/{rel}"
            if root.exists(path):
                files[rel] = root.read_text(path)
    return files


def claims(gpu: Gpu) -> tuple[DeviceNode, ...]:
    """A spec with the MIG device's GI and CI nodes has the MIG device (its GPU node alone does not say which)."""
    return gpu.nodes[1:]


def with_uuids(inv: VendorInventory, library: str) -> VendorInventory:
    """`inv` with each MIG device's UUID and profile as NVML reports them. Loads NVML (the caller asked for a
    MIG UUID or a profile)."""
    from gpuhook.frozen import replace
    from gpuhook.host import nvml

    known: dict[tuple[str, int, int], tuple[str, str, int]] = {}
    with nvml.session(library) as lib:
        for gpu in inv.gpus:
            if gpu.uuid:
                known.update(nvml.mig_devices(lib, gpu.uuid))
    slices = []
    for s in inv.slices:
        gi, ci = _ids(s)
        uuid, profile, _ = known.get((s.parent, gi, ci), ("", s.profile, 0))
        slices.append(replace(s, uuid=uuid, profile=profile))
    return replace(inv, slices=tuple(slices))


def _ids(gpu: Gpu) -> tuple[int, int]:
    """(GI, CI) of a MIG device, from its place (gi<G>/ci<C>)."""
    gi, _, ci = gpu.place.partition("/")
    return int(gi[2:]), int(ci[2:])


def _numbered(names: list[str], prefix: str) -> list[int]:
    return sorted(int(n[len(prefix):]) for n in names if n.startswith(prefix) and n[len(prefix):].isdigit())


def _cap_node(root: Root, access: str, major: int | None) -> DeviceNode | str:
    """The node of a capability's access file, or the path it should have when the host lacks it."""
    try:
        minor = parse_access(root.read_text(access))
    except OSError:
        minor = None
    if minor is None:
        return access
    path = f"{NODE_DIR}/nvidia-cap{minor}"
    node = read_node(root, path)
    if node is None or node.minor != minor or (major is not None and node.major != major):
        return path
    return node
