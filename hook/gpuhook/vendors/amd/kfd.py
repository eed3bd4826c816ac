"""The KFD topology (/sys/class/kfd/kfd/topology/nodes/<n>/...): its properties files, and the GPUs in it of one
PCI vendor, as AMD's discovery and node labels read them, and every driver that keeps amdgpu's KFD interface (Hygon's
hycu: vendors/hygon/)."""

from __future__ import annotations

import os

from gpuhook.host.devnodes import read_node
from gpuhook.host.inventory import Gpu

TYPE_CHECKING = False
if TYPE_CHECKING:
    from gpuhook.host.root import Root

NODES = "/sys/class/kfd/kfd/topology/nodes"
AMD = "0x1002"  # AMD's PCI vendor id


def kfd_properties(root: Root, path: str) -> dict[str, int]:
    """A KFD properties file's `name value` lines, the integer ones ({} when it cannot be read)."""
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


def gpu_nodes(root: Root, pci_vendor: str) -> list[tuple[str, dict[str, int]]]:
    """(KFD node id, properties) of the GPU nodes (those with SIMDs) of PCI vendor `pci_vendor` (0x1002), in node
    order: discovery's GPU order. A node whose PCI device's vendor cannot be read is AMD's (0x1002), KFD's own."""
    nodes = sorted((n for n in root.listdir(NODES) if n.isdigit()), key=int)
    found = [(n, kfd_properties(root, f"{NODES}/{n}/properties")) for n in nodes]
    return [(n, p) for n, p in found if p.get("simd_count", 0) > 0 and _vendor_of(root, p) == pci_vendor]


def kfd_gpus(root: Root, vendor: str, nodes: list[tuple[str, dict[str, int]]]) -> tuple[list[Gpu], list[int]]:
    """The GPUs of KFD nodes `nodes` (gpu_nodes': one PCI vendor's, in node order) as `vendor`'s, and each one's
    partition number on its physical GPU (0 for a whole GPU): their render and card nodes, unique id, gfx target and
    PCI device directory."""
    gpus: list[Gpu] = []
    parts: list[int] = []
    for node_id, props in nodes:
        gpu, part = _gpu(root, vendor, len(gpus), node_id, props)
        gpus.append(gpu)
        parts.append(part)
    return gpus, parts


def gfx_target(version: int) -> str:
    """KFD's gfx_target_version (e.g. 90010) as an LLVM target name (gfx90a)."""
    return f"gfx{version // 10000}{(version // 100) % 100}{version % 100:x}"


def _address(props: dict[str, int]) -> str:
    location = props.get("location_id", 0)
    return f"{props.get('domain', 0):04x}:{location >> 8 & 0xFF:02x}:{location >> 3 & 0x1F:02x}.{location & 0x7}"


def _vendor_of(root: Root, props: dict[str, int]) -> str:
    """The PCI vendor of a KFD node's device (its function 0: a partition's address may be no PCI device)."""
    pci = _address(props).rpartition(".")[0] + ".0"
    try:
        return root.read_text(f"/sys/bus/pci/devices/{pci}/vendor").strip().lower() or AMD
    except OSError:
        return AMD


def _gpu(root: Root, vendor: str, index: int, node_id: str, props: dict[str, int]) -> tuple[Gpu, int]:
    """One KFD GPU node, and its partition's number on its physical GPU (0 for a whole GPU)."""
    from gpuhook.vendors.amd.partitions import physical

    pci, part = physical(root, _address(props))
    unique = props.get("unique_id", 0)
    try:
        model = root.read_text(f"{NODES}/{node_id}/name").strip()
    except OSError:
        model = ""
    render = f"/dev/dri/renderD{props.get('drm_render_minor', 0)}"
    drm_dir = _drm_dir(root, render)
    wanted = [render, *_card_nodes(drm_dir)]
    found = [n for p in wanted if (n := read_node(root, p))]
    missing = tuple(p for p in wanted if not any(n.path == p for n in found))
    target = props.get("gfx_target_version", 0)
    sysfs = root.to_host(os.path.dirname(drm_dir)) if drm_dir else ""  # the PCI device, parent of its drm/
    return Gpu(vendor=vendor, index=index, uuid=hex(unique) if unique else "", pci=pci, model=model, nodes=tuple(found),
               missing=missing,
               arch=gfx_target(target) if target else "", sysfs=sysfs), part


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
