"""AMD's devices for Kubernetes' DRA: whole GPUs and compute partitions (each partition its own device), with the
attributes and capacities AMD's own DRA driver (gpu.amd.com) publishes where the two overlap: type (amdgpu,
amdgpu-partition), productName (its words joined by underscores), deviceID, driverVersion, partitionProfile,
numaNode; memory, computeUnits and simdUnits as capacities. gpuhook adds the gfx target as `architecture`.
Device names: amdgpu-<render minor>, one render node per GPU or partition. Reads KFD's topology and sysfs."""

from __future__ import annotations

from gpuhook.vendors.amd.node_labels import gpu_properties, memory_bank, product_name
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
            attrs.append(("productName", "_".join(name.split())))
        if p.get("device_id"):
            attrs.append(("deviceID", f"0x{p['device_id']:04x}"))
        if g.arch:
            attrs.append(("architecture", g.arch))
        if g.profile:
            memory_mode = g.place.split()[-1] if g.place.split() else ""
            attrs.append(("partitionProfile", "_".join(m.lower() for m in (g.profile, memory_mode) if m)))
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
