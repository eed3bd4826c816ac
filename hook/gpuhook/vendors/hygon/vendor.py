"""Hygon DCUs (PCI vendor 0x1d94): GPUs of a fork of amdgpu and its KFD (the kernel module hydcu up to driver 6.2,
hycu from 6.3), with /dev/kfd, the management node /dev/mkfd and each DCU's /dev/dri nodes; Hygon's own user space:
DTK in the image (/opt/dtk), the driver's HAL on the host (/opt/hyhal: hy-smi, librocm_smi64), which containers get
read-only. Discovery, tuning and telemetry read the kernel files hycu keeps from amdgpu (vendors/amd/kfd.py,
tuning.SysfsBackend, readings.SysfsTelemetry); labels, resource names and the image's DTK window are Hygon's."""

from __future__ import annotations

import os

from gpuhook.edits import Edits, Mount, merge
from gpuhook.frozen import replace
from gpuhook.host.devnodes import read_node
from gpuhook.host.inventory import DriverFile, Gpu, VendorInventory
from gpuhook.vendors.amd.kfd import NODES, gpu_nodes, kfd_gpus, kfd_properties

# the KFD interface hycu keeps: ids, the nodes that claim a DCU, the process list masked, no procfs of its own
from gpuhook.vendors.amd.vendor import claims as claims
from gpuhook.vendors.amd.vendor import hardening as hardening
from gpuhook.vendors.amd.vendor import identify as identify
from gpuhook.vendors.amd.vendor import parse_id as parse_id
from gpuhook.vendors.amd.vendor import procfs_files as procfs_files

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence

    from gpuhook.host.image import InRoot
    from gpuhook.host.root import Root
    from gpuhook.request.tuning import Tuning
    from gpuhook.simulator.host import HostSpec
    from gpuhook.vendors.contract import Backend, DraDevice, Setting, Source

NAME = "hygon"
LABEL = "Hygon DCU"
NODE_PREFIXES: tuple[str, ...] = ("/dev/kfd", "/dev/mkfd", "/dev/dri/renderD")
ENV_KEY = "HYGON_VISIBLE_DEVICES"  # not HIP_VISIBLE_DEVICES: that one the HIP runtime reads inside the container
NONE_MEANS_DRIVER = False
CAPABILITIES_ENV: str | None = None
CDI_KIND = "hygon.com/dcu"
DOCKER_GPUS_HOOK: str | None = None
SLICE_RESOURCE = "hygon.com/{profile}"
SHARING: tuple[str, ...] = ("time-slicing",)
STACK: str | None = "DTK"
PCI_VENDOR = "0x1d94"  # Hygon's (its CPUs' functions have it too: only KFD's GPU nodes are taken)
KFD, MKFD = "/dev/kfd", "/dev/mkfd"
HAL = "/opt/hyhal"  # the driver's user space: hy-smi, librocm_smi64, libhsa-runtime64, env.sh
MODULES = ("hycu", "hydcu")  # the driver's module from 6.3 on, and before
# PCI device id -> product, as Hygon's DCU tools name them (HAMi's dcu-dcgm table, 2025)
PRODUCTS = {0x54b7: "Z100", 0x55b7: "Z100L", 0x62b7: "K100", 0x62c7: "K100-LC", 0x6210: "K100_AI",
            0x6211: "K100_LC_E_AI", 0x6212: "K100_LC_AI", 0x6213: "K100_AI_i"}
_MIB = 1 << 20


def refresh() -> None:
    """Nothing: discovery remembers nothing of the host between calls (its KFD and sysfs files are read anew)."""


def discover(root: Root) -> VendorInventory | None:
    """The DCUs in KFD node order (GPU nodes whose PCI device is Hygon's), their render and card nodes, /dev/kfd and
    /dev/mkfd, and the host's HAL; None without the driver's module."""
    module = next((m for m in MODULES if root.exists(f"/sys/module/{m}")), None)
    if module is None:
        return None
    nodes = gpu_nodes(root, PCI_VENDOR)
    found, _ = kfd_gpus(root, NAME, nodes)
    gpus = [replace(g, model=PRODUCTS.get(p.get("device_id", 0), g.model)) for g, (_, p) in zip(found, nodes,
                                                                                               strict=True)]
    version = None
    if root.exists(f"/sys/module/{module}/version"):
        version = root.read_text(f"/sys/module/{module}/version").strip() or None
    shared = tuple(n for p in (KFD, MKFD) if (n := read_node(root, p)))
    notes = tuple(f"{p} is missing" for p in (KFD, MKFD) if not any(n.path == p for n in shared))
    files: tuple[DriverFile, ...] = ()
    if root.exists(HAL) and os.path.isdir(root.lexical(HAL)):
        files = (DriverFile("hal", "dir", root.to_host(root.resolve(HAL)), HAL),)
    else:
        notes += (f"{HAL} (hy-smi, the driver's HAL) is missing: containers that call hy-smi or rocm-smi fail",)
    return VendorInventory(NAME, version, tuple(gpus), shared, files, notes)


def plan(inv: VendorInventory, gpus: Sequence[Gpu], capabilities: frozenset[str], host_base: str) -> Edits:
    """/dev/kfd, /dev/mkfd, each DCU's render and card node, and the host's HAL read-only at /opt/hyhal (one copy
    for every container, as Hygon's instructions mount it)."""
    mounts = tuple(Mount(f.source if host_base == "/" else host_base.rstrip("/") + f.source, f.target)
                   for f in inv.files if f.kind == "dir")
    return merge([Edits.for_nodes([*inv.shared_nodes, *(n for g in gpus for n in g.nodes)]), Edits(mounts=mounts)])


def settings(tuning: Tuning, gpu: Gpu) -> tuple[Setting, ...]:
    """The performance level (manual for a clock range), sclk levels, the hwmon power cap and fan, by the GPU's PCI
    device directory (amd/settings.py, as hy-smi --setsclk and --setperflevel write them)."""
    from gpuhook.vendors.amd.settings import settings as sysfs_settings

    return sysfs_settings(NAME, "a Hygon DCU", tuning, gpu)


def sharing(tuning: Tuning, gpus: Sequence[Gpu], directory: str) -> tuple[tuple[Setting, ...], Edits]:
    """No daemon shares these GPUs: MPS is NVIDIA's."""
    from gpuhook.vendors.amd.settings import no_daemon

    return no_daemon("Hygon DCU", tuning, gpus)


def repartition(root: Root, gpu: Gpu, layout: dict[str, object], dry_run: bool = False) -> str:
    """Not yet: Hygon's DCU MIG mode is hy-smi's (hy-smi -mig, hy-smi mig -cgi)."""
    from gpuhook.errors import GpuhookError

    raise GpuhookError(f"Hygon DCU {gpu.index}: gpuhook does not apply DCU partitions: use hy-smi mig")


def backend(root: Root, state_dir: str) -> Backend:
    """The DCU's sysfs files (the PCI device directory discovery finds)."""
    from gpuhook.vendors.amd.tuning import SysfsBackend

    return SysfsBackend(root, discover)


def telemetry(root: Root, inv: VendorInventory) -> Source:
    """The DCU's sysfs telemetry files (busy percent, VRAM, hwmon power, temperature and clock)."""
    from gpuhook.vendors.amd.readings import SysfsTelemetry

    return SysfsTelemetry(root)


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
        out.append(DraDevice(name, g, "gpu", "", tuple(attrs), ("driverVersion",), tuple(capacity)))
    return tuple(out)


def checks(inv: VendorInventory) -> tuple[tuple[str, str, str], ...]:
    """The HAL's absence, and a driver whose DTK window gpuhook does not know."""
    from gpuhook.vendors.hygon import dtk

    out = []
    if not any(f.kind == "dir" for f in inv.files):
        out.append(("warn", f"{HAL} is missing on the host",
                    "install the DCU driver's HAL (it comes with the driver): Hygon's images expect it mounted"))
    if inv.driver_version and dtk.window(inv.driver_version) is None:
        out.append(("warn", f"Hygon driver {inv.driver_version} is not in gpuhook's DTK table",
                    "images' DTK releases go unchecked against it (docs/vendors.md#hygon-dcu)"))
    return tuple(out)


def image_stack(image: InRoot, notes: list[str]) -> str | None:
    """The DTK release the image ships (/opt/dtk/.info/version, else the newest /opt/dtk-<version>). Reads the
    image root, never out of it."""
    from gpuhook.vendors.hygon import dtk

    return dtk.image_version(image, notes)


def stack_window(inv: VendorInventory) -> tuple[str, str] | None:
    """(oldest, newest) DTK the host's driver runs; None when its version or series is unknown."""
    from gpuhook.vendors.hygon import dtk

    return dtk.window(inv.driver_version) if inv.driver_version else None


def simulate(root: str, spec: HostSpec, count: int) -> None:
    """The simulator's Hygon driver: KFD topology, DRM nodes, /dev/mkfd, sysfs and the host's /opt/hyhal."""
    from gpuhook.vendors.hygon import sim as sim_hygon

    sim_hygon.build(root, spec, count)


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
