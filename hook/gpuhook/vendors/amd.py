"""AMD and KFD-compatible DCUs: KFD topology GPUs, /dev/kfd and the /dev/dri nodes of each GPU."""

from __future__ import annotations

import os

from gpuhook.devnodes import read_node
from gpuhook.edits import DeviceRule, Edits
from gpuhook.inventory import DeviceNode, Gpu, VendorInventory
from gpuhook.root import Root

TYPE_CHECKING = False  # typing and collections cost milliseconds to import: this runs before a container starts
if TYPE_CHECKING:
    from collections.abc import Sequence

NAME = "amd"
LABEL = "AMD"
KFD = "/dev/kfd"
_NODES = "/sys/class/kfd/kfd/topology/nodes"


def discover(root: Root) -> VendorInventory | None:
    """GPUs in KFD node order (nodes with SIMDs), their render and card nodes; None without KFD."""
    if not root.exists(_NODES) and not root.exists(KFD):
        return None
    node_ids = sorted((n for n in root.listdir(_NODES) if n.isdigit()), key=int)
    gpus: list[Gpu] = []
    for node_id in node_ids:
        props = _properties(root, f"{_NODES}/{node_id}/properties")
        if props.get("simd_count", 0) <= 0:
            continue
        gpus.append(_gpu(root, len(gpus), node_id, props))
    version = None
    if root.exists("/sys/module/amdgpu/version"):
        version = root.read_text("/sys/module/amdgpu/version").strip() or None
    kfd = read_node(root, KFD)
    notes = () if kfd else (f"{KFD} is missing",)
    return VendorInventory(NAME, version, tuple(gpus), (kfd,) if kfd else (), (), notes)


def plan(inv: VendorInventory, gpus: Sequence[Gpu], capabilities: frozenset[str], host_base: str) -> Edits:
    """/dev/kfd plus each GPU's render and card node, their cgroup rules and their groups."""
    nodes: list[DeviceNode] = [*inv.shared_nodes, *(n for g in gpus for n in g.nodes)]
    return Edits(
        device_nodes=tuple(nodes),
        device_rules=tuple(DeviceRule(n.kind, n.major, n.minor) for n in nodes),
        additional_gids=tuple(dict.fromkeys(n.gid for n in nodes if n.needs_group() and n.gid)),
    )


def gfx_target(version: int) -> str:
    """KFD's gfx_target_version (e.g. 90010) as an LLVM target name (gfx90a)."""
    return f"gfx{version // 10000}{(version // 100) % 100}{version % 100:x}"


def _gpu(root: Root, index: int, node_id: str, props: dict[str, int]) -> Gpu:
    location = props.get("location_id", 0)
    pci = (f"{props.get('domain', 0):04x}:{location >> 8 & 0xFF:02x}:"
           f"{location >> 3 & 0x1F:02x}.{location & 0x7}")
    unique = props.get("unique_id", 0)
    try:
        model = root.read_text(f"{_NODES}/{node_id}/name").strip()
    except OSError:
        model = ""
    render = f"/dev/dri/renderD{props.get('drm_render_minor', 0)}"
    drm_dir = _drm_dir(root, render)
    wanted = [render, *_card_nodes(drm_dir)]
    found = [n for p in wanted if (n := read_node(root, p))]
    missing = tuple(p for p in wanted if not any(n.path == p for n in found))
    target = props.get("gfx_target_version", 0)
    sysfs = root.to_host(os.path.dirname(drm_dir)) if drm_dir else ""  # the PCI device, parent of its drm/
    return Gpu(NAME, index, hex(unique) if unique else "", pci, model, tuple(found), missing,
               gfx_target(target) if target else "", sysfs)


def _drm_dir(root: Root, render: str) -> str:
    """The drm/ directory of the PCI device behind `render` (real path), or "" without its sysfs link."""
    link = f"/sys/class/drm/{os.path.basename(render)}"
    return os.path.dirname(root.resolve(link)) if os.path.islink(root.lexical(link)) else ""


def _card_nodes(drm_dir: str) -> list[str]:
    """The card node(s) beside the render node in the PCI device's drm/ directory."""
    if not drm_dir:
        return []
    try:
        entries = sorted(os.listdir(drm_dir))
    except OSError:
        return []
    return [f"/dev/dri/{e}" for e in entries if e.startswith("card") and e[4:].isdigit()]


def _properties(root: Root, path: str) -> dict[str, int]:
    out: dict[str, int] = {}
    try:
        text = root.read_text(path)
    except OSError:
        return out
    for line in text.splitlines():
        key, _, value = line.strip().partition(" ")
        try:
            out[key] = int(value.strip())
        except ValueError:
            continue
    return out
