"""Hygon's Kubernetes part: gpuhook's labels and those of Hygon's DCU-Label-Node, the dcu resources, DRA devices
(Hygon has no DRA driver of its own)."""

from __future__ import annotations

from gpuhook.vendors.amd.kfd import NODES, gpu_nodes, kfd_properties
from gpuhook.vendors.hygon.vendor import PCI_VENDOR

TYPE_CHECKING = False
if TYPE_CHECKING:
    from gpuhook.host.inventory import Gpu, VendorInventory
    from gpuhook.host.root import Root
    from gpuhook.vendors.contract import DraDevice, Partitionable

SLICE_RESOURCE = "hygon.com/{profile}"
RESOURCE = "hygon.com/dcu"  # the device plugin's, as the vendor's own plugin names it
SHARING: tuple[str, ...] = ("time-slicing",)
_MIB = 1 << 20


def labels(inv: VendorInventory, root: Root, replicas: int, strategy: str = "none",
           sharing: str = "time-slicing") -> dict[str, str]:
    """gpuhook's (gfx targets, the DTK window of the driver) and those of Hygon's DCU-Label-Node, where every DCU
    agrees: hygon.com/dcu, hygon.com/dcu.name, .cu-count, .vram. Reads KFD and sysfs."""
    from gpuhook.vendors.hygon import dtk

    out: dict[str, str] = {}
    targets = sorted({g.arch for g in inv.gpus if g.arch})
    if targets:
        out["gfx"] = "_".join(targets)
    span = dtk.window(inv.driver_version) if inv.driver_version else None
    if span:
        out["dtk-min"], out["dtk-max"] = span
    if not inv.gpus:
        return out
    out["hygon.com/dcu"] = "true"
    facts = [_facts(root, node, props, g) for g, node, props in _with_nodes(inv, root)]
    for key in ("name", "cu-count", "vram"):
        values = {f[key] for f in facts}
        if len(values) == 1 and "" not in values:
            out[f"hygon.com/dcu.{key}"] = values.pop()
    if replicas > 1:
        out["hygon.com/dcu.replicas"] = str(replicas)
    return out


def dra_devices(inv: VendorInventory, root: Root) -> tuple[DraDevice, ...]:
    """Each DCU, named dcu-<render minor>, with gpuhook's attributes (productName, deviceID, architecture,
    driverVersion) and memory and computeUnits capacities. Hygon has no DRA driver of its own: no copies under
    another domain. Reads KFD and sysfs."""
    from gpuhook.vendors.contract import DraDevice

    out = []
    for g, node, props in _with_nodes(inv, root):
        f = _facts(root, node, props, g)
        attrs: list[tuple[str, str | int | bool]] = [("type", "dcu")]
        if f["name"]:
            attrs.append(("productName", f["name"]))
        if props.get("device_id"):
            attrs.append(("deviceID", f"0x{props['device_id']:04x}"))
        if g.arch:
            attrs.append(("architecture", g.arch))
        if inv.driver_version:
            attrs.append(("driverVersion", inv.driver_version))
        capacity = [("memory", int(f["bytes"]))] if int(f["bytes"]) else []
        if f["cu-count"]:
            capacity.append(("computeUnits", int(f["cu-count"])))
        render = next((n.minor for n in g.nodes if n.path.startswith("/dev/dri/renderD")), -1)
        name = f"dcu-{render}" if render >= 0 else f"dcu-index-{g.index}"
        out.append(DraDevice(name=name, gpu=g, kind="gpu", domain="", attributes=tuple(attrs),
                             versions=("driverVersion",), capacity=tuple(capacity)))
    return tuple(out)


def _with_nodes(inv: VendorInventory, root: Root) -> list[tuple[Gpu, str, dict[str, int]]]:
    """Each DCU with its KFD node id and properties (discovery's order is the topology's)."""
    return [(g, n, p) for g, (n, p) in zip(inv.gpus, gpu_nodes(root, PCI_VENDOR), strict=False)]


def _facts(root: Root, node: str, props: dict[str, int], gpu: Gpu) -> dict[str, str]:
    """name (discovery's model: Hygon's product name, else the KFD node's gfx name), cu-count, vram (GiB, as
    DCU-Label-Node writes it: 64G) and bytes of one DCU."""
    bank = kfd_properties(root, f"{NODES}/{node}/mem_banks/0/properties")
    size = bank.get("size_in_bytes", 0)
    cus = props["simd_count"] // props["simd_per_cu"] if props.get("simd_count") and props.get("simd_per_cu") else 0
    return {"name": gpu.model, "cu-count": str(cus) if cus else "",
            "vram": f"{(size // _MIB + 512) // 1024}G" if size else "", "bytes": str(size)}


def partitionable(inv: VendorInventory, root: Root) -> tuple[Partitionable, ...]:
    """None: a DCU is not partitioned on demand."""
    return ()


def make_partition(root: Root, gpu: Gpu, layout: tuple[tuple[str, str], ...]) -> str:
    """GpuhookError: DCUs are not partitioned on demand."""
    from gpuhook.errors import GpuhookError

    raise GpuhookError("gpuhook makes no partitions of Hygon DCUs")


def remove_partition(root: Root, gpu: Gpu, place: str) -> None:
    """Nothing was made."""
