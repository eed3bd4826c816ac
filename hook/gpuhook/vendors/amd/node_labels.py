"""AMD's node labels: gpuhook's own (`rocm`, `in-tree`, `gfx`) and the keys AMD's k8s node labeller
(ROCm/k8s-device-plugin) publishes, `amd.com/gpu.*` and the legacy `beta.amd.com/gpu.*`, in its value
formats, so that nodeSelectors written for the labeller pick gpuhook's nodes too.

Per-GPU facts come from the KFD topology (device id, SIMDs, VRAM) and the GPU's sysfs (product name). The
labeller's encoding of them: one value on the node gives `amd.com/gpu.<kind>=<value>` (and the same beta key);
several give `amd.com/gpu.<kind>.<value>=<count>` instead; the beta form `.<value>=<count>` is always there.
gpuhook adds `amd.com/gpu.replicas` and `gpu.sharing-strategy` (as NVIDIA's), since it time-slices AMD too.

The family is derived from the gfx target (the labeller asks libdrm for the family id, which gpuhook does not
load), onto the labeller's names: gfx6 SI; gfx7 CI (gfx700/703/705 KV); gfx8 VI (gfx801/810 CZ); gfx9 AI
(the APUs gfx902/909/90c RV); gfx10 NV (gfx1033 VGH, gfx1035 YC, gfx1036 GC_10_3_6, which GC 10.3.7 shares);
gfx11 GC_11_0_0 (gfx1103 GC_11_0_1, gfx115x GC_11_5_0); gfx12 GC_12_0_0; anything else is left out.
"""

from __future__ import annotations

from gpuhook.vendors.amd.kfd import AMD, gpu_nodes, kfd_properties

TYPE_CHECKING = False
if TYPE_CHECKING:
    from gpuhook.host.inventory import VendorInventory
    from gpuhook.host.root import Root

PREFIXES = ("amd.com/", "beta.amd.com/")
_NODES = "/sys/class/kfd/kfd/topology/nodes"
_MIB = 1024 * 1024  # VRAM: MiB rounded to the nearest GiB, as the labeller
_FAMILY_BY_MAJOR = {6: "SI", 7: "CI", 8: "VI", 9: "AI", 10: "NV", 11: "GC_11_0_0", 12: "GC_12_0_0"}
_FAMILY_BY_TARGET = {(7, 0, 0): "KV", (7, 0, 3): "KV", (7, 0, 5): "KV", (8, 0, 1): "CZ", (8, 1, 0): "CZ",
                     (9, 0, 2): "RV", (9, 0, 9): "RV", (9, 0, 12): "RV", (10, 3, 3): "VGH", (10, 3, 5): "YC",
                     (10, 3, 6): "GC_10_3_6", (11, 0, 3): "GC_11_0_1"}
_FAMILY_BY_MINOR = {(11, 5): "GC_11_5_0"}


def labels(inv: VendorInventory, root: Root, replicas: int) -> dict[str, str]:
    """gpuhook's AMD labels and the node labeller's amd.com/ and beta.amd.com/ ones. Reads KFD and sysfs."""
    from gpuhook.host import rocm

    out = {}
    release = rocm.release_of_driver(inv.driver_version) if inv.driver_version else None
    if release:
        out["rocm"] = release
    if not inv.driver_version:
        out["in-tree"] = "true"
    targets = sorted({g.arch for g in inv.gpus if g.arch})
    if targets:
        out["gfx"] = "_".join(targets)
    if not inv.gpus:
        return out
    props = gpu_properties(root)
    banks = [memory_bank(root, n) for n, _ in props]
    names = [product_name(root, g.sysfs) for g in inv.gpus]
    out.update(labeller([p for _, p in props], banks, names, inv.driver_version or "", replicas))
    return out


def labeller(props: list[dict[str, int]], banks: list[dict[str, int]], names: list[str], driver: str,
             replicas: int) -> dict[str, str]:
    """The node labeller's labels (full keys) for GPUs with these KFD properties, first memory banks and sysfs
    product names; "" or a missing property leaves that GPU out of the kind."""
    out = {}
    kinds = {
        "family": [family(p.get("gfx_target_version", 0)) for p in props],
        "device-id": [f"{p['device_id']:x}" if p.get("device_id") else "" for p in props],
        "product-name": [n.replace(" ", "_").replace("(", "").replace(")", "") for n in names],
        "vram": [f"{(b['size_in_bytes'] // _MIB + 512) // 1024}G" if b.get("size_in_bytes") else "" for b in banks],
        "simd-count": [str(p["simd_count"]) if p.get("simd_count") else "" for p in props],
        "cu-count": [str(p["simd_count"] // p["simd_per_cu"]) if p.get("simd_count") and p.get("simd_per_cu")
                     else "" for p in props],
    }
    for kind, values in kinds.items():
        out.update(_counted(kind, values))
    if driver:
        out["amd.com/gpu.driver-version"] = driver
    out["amd.com/gpu.replicas"] = str(replicas)
    out["amd.com/gpu.sharing-strategy"] = "time-slicing" if replicas > 1 else "none"
    return out


def family(gfx_target_version: int) -> str:
    """The labeller's family name for KFD's gfx_target_version (90402, gfx942: AI); "" when it has none."""
    major, minor, stepping = gfx_target_version // 10000, gfx_target_version // 100 % 100, gfx_target_version % 100
    return (_FAMILY_BY_TARGET.get((major, minor, stepping)) or _FAMILY_BY_MINOR.get((major, minor))
            or _FAMILY_BY_MAJOR.get(major, ""))


def _counted(kind: str, values: list[str]) -> dict[str, str]:
    """The labeller's encoding of one kind's per-GPU values (empty ones skipped)."""
    counts: dict[str, int] = {}
    for v in values:
        if v:
            counts[v] = counts.get(v, 0) + 1
    out = {f"beta.amd.com/gpu.{kind}.{v}": str(n) for v, n in counts.items()}
    if len(counts) == 1:
        (value,) = counts
        out.update({f"amd.com/gpu.{kind}": value, f"beta.amd.com/gpu.{kind}": value})
    else:
        out.update({f"amd.com/gpu.{kind}.{v}": str(n) for v, n in counts.items()})
    return out


def gpu_properties(root: Root) -> list[tuple[str, dict[str, int]]]:
    """(KFD node id, properties) of AMD's GPU nodes, in node order: discovery's GPU order."""
    return gpu_nodes(root, AMD)


def memory_bank(root: Root, node: str) -> dict[str, int]:
    """The properties of a KFD node's first memory bank (its VRAM: size_in_bytes), {} when it has none."""
    return kfd_properties(root, f"{_NODES}/{node}/mem_banks/0/properties")


def product_name(root: Root, sysfs: str) -> str:
    """amdgpu's product_name of the PCI device (from the board's FRU); "" when it has none."""
    if not sysfs:
        return ""
    try:
        return root.read_text(f"{sysfs}/product_name").strip()
    except OSError:
        return ""
