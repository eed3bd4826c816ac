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
from gpuhook.vendors.amd.kfd import gpu_nodes, kfd_gpus

# the KFD interface hycu keeps: ids, the nodes that claim a DCU, the process list masked, no procfs of its own
from gpuhook.vendors.amd.vendor import claims as claims
from gpuhook.vendors.amd.vendor import hardening as hardening
from gpuhook.vendors.amd.vendor import identify as identify
from gpuhook.vendors.amd.vendor import parse_id as parse_id
from gpuhook.vendors.amd.vendor import procfs_files as procfs_files

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence

    from gpuhook.host.root import Root

NAME = "hygon"
LABEL = "Hygon DCU"
STACK = "DTK"  # the user space its images carry: its stack part (stack.py) checks it
NODE_PREFIXES: tuple[str, ...] = ("/dev/kfd", "/dev/mkfd", "/dev/dri/renderD")
ENV_KEY = "HYGON_VISIBLE_DEVICES"  # not HIP_VISIBLE_DEVICES: that one the HIP runtime reads inside the container
NONE_MEANS_DRIVER = False
CAPABILITIES_ENV: str | None = None
CDI_KIND = "hygon.com/dcu"
DOCKER_GPUS_HOOK: str | None = None
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
    gpus = [replace(g, model=PRODUCTS.get(p.get("device_id", 0), g.model))
            for g, (_, p) in zip(found, nodes, strict=True)]
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
    return VendorInventory(vendor=NAME, driver_version=version, gpus=tuple(gpus), shared_nodes=shared, files=files,
                           notes=notes)


def plan(inv: VendorInventory, gpus: Sequence[Gpu], capabilities: frozenset[str], host_base: str) -> Edits:
    """/dev/kfd, /dev/mkfd, each DCU's render and card node, and the host's HAL read-only at /opt/hyhal (one copy
    for every container, as Hygon's instructions mount it)."""
    mounts = tuple(Mount(f.source if host_base == "/" else host_base.rstrip("/") + f.source, f.target)
                   for f in inv.files if f.kind == "dir")
    return merge([Edits.for_nodes([*inv.shared_nodes, *(n for g in gpus for n in g.nodes)]), Edits(mounts=mounts)])
