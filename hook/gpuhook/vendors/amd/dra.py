"""AMD's devices for Kubernetes' DRA: whole GPUs and compute partitions (each partition its own device), with the
attributes and capacities AMD's own DRA driver (gpu.amd.com, ROCm/k8s-gpu-dra-driver) publishes for them, under its
names: type (amdgpu, amdgpu-partition), productName (as it writes it: spaces as underscores, no parentheses),
deviceID (a partition's: its GPU's), driverVersion (semver) and driverVersionFull, partitionProfile (compute and
memory mode, cpx_nps1, where the GPU has partition modes), numaNode (under gpu.amd.com only; where sysfs has one);
memory, computeUnits and simdUnits as capacities. gpuhook adds the gfx target as `architecture`. Its VFIO devices,
and the per-mode devices of its synthetic partitions, are not published: gpuhook gives neither. Device names:
amdgpu-<render minor>, one render node per GPU or partition. Reads KFD's topology and sysfs; what they do not say
is left out, never guessed (AMD's driver publishes defaults where it cannot read VRAM)."""

from __future__ import annotations

from gpuhook.vendors.amd.node_labels import gpu_properties, memory_bank, product_name
from gpuhook.vendors.amd.partitions import modes
from gpuhook.vendors.contract import DraDevice

TYPE_CHECKING = False
if TYPE_CHECKING:
    from gpuhook.host.inventory import Gpu, VendorInventory
    from gpuhook.host.root import Root

DOMAIN = "gpu.amd.com"


def dra_devices(inv: VendorInventory, root: Root) -> tuple[DraDevice, ...]:
    """Every GPU and partition discovery lists (a partitioned GPU is its partitions). Reads KFD and sysfs."""
    props = gpu_properties(root)  # discovery's order, one KFD node per GPU or partition
    by_render = {p.get("drm_render_minor", -1): (n, p) for n, p in props}
    common: list[tuple[str, str | int | bool]] = []
    if inv.driver_version:
        common += [("driverVersion", inv.driver_version), ("driverVersionFull", inv.driver_version)]
    out = []
    for i, g in enumerate(inv.gpus):
        node, p = by_render.get(_render(g), props[i] if i < len(props) else ("", {}))
        bank = memory_bank(root, node) if node else {}
        kind = "partition" if g.slice else "gpu"
        attrs: list[tuple[str, str | int | bool]] = [("type", "amdgpu-partition" if g.slice else "amdgpu")]
        name = product_name(root, g.sysfs) or g.model
        if name:
            attrs.append(("productName", name.strip().replace(" ", "_").replace("(", "").replace(")", "")))
        if p.get("device_id"):
            attrs.append(("deviceID", f"0x{p['device_id']:04x}"))
        if g.arch:
            attrs.append(("architecture", g.arch))
        compute, memory_mode = (g.profile, g.place.split()[-1] if g.place.split() else "") if g.profile \
            else modes(root, g.pci) if g.pci else ("", "")
        if compute:  # a whole GPU too, where amdgpu has partition modes (spx_nps1), as AMD's driver says it
            attrs.append(("partitionProfile", "_".join(m.lower() for m in (compute, memory_mode) if m)))
        capacity = [("memory", bank.get("size_in_bytes", 0))] if bank.get("size_in_bytes") else []
        if p.get("simd_count"):
            capacity.append(("simdUnits", p["simd_count"]))
            if p.get("simd_per_cu"):
                capacity.append(("computeUnits", p["simd_count"] // p["simd_per_cu"]))
        device = f"amdgpu-{_render(g)}" if _render(g) >= 0 else f"amdgpu-index-{g.index}"
        out.append(DraDevice(name=device, gpu=g, kind=kind, domain=DOMAIN, attributes=(*attrs, *common),
                             versions=("driverVersion",), capacity=tuple(capacity),
                             numa_in_domain=True))
    return tuple(out)


def _render(g: Gpu) -> int:
    """The minor of the GPU's (or partition's) render node, -1 without one."""
    for n in g.nodes:
        tail = n.path.removeprefix("/dev/dri/renderD")
        if tail != n.path and tail.isdigit():
            return int(tail)
    return -1
