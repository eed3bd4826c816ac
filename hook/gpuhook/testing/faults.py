"""Faults raised on a simulated host, as the real drivers show them (host/health.py reads them): an NVIDIA XID in the
kernel log (`/dev/kmsg`, a regular file on a simulated host), amdgpu's RAS counters (AMD GPUs and Hygon DCUs,
`ras/<block>_err_count` under the PCI device), and a GPU's device node gone. Each GPU is named by its vendor and
index, as `gpuhook list` shows them. Writes files under the simulated root."""

from __future__ import annotations

import os
import time

from gpuhook.errors import SimulatorError
from gpuhook.host.kernel_log import PATH as KMSG
from gpuhook.host.root import Root
from gpuhook.vendors.discover import discover

TYPE_CHECKING = False
if TYPE_CHECKING:
    from gpuhook.host.inventory import Gpu

def xid(root: str, index: int, code: int, text: str = "") -> str:
    """NVIDIA GPU `index` logs XID `code` (appended to the kernel log as NVIDIA's driver words it); the message."""
    gpu = gpu_of(root, "nvidia", index)
    bus = gpu.pci.rpartition(".")[0]
    message = f"NVRM: Xid (PCI:{bus}): {code}, pid=1, name=sim, {text or 'simulated'}"
    with open(root + KMSG, "a") as f:
        f.write(f"4,{time.monotonic_ns() // 1000},{time.monotonic_ns() // 1000},-;{message}\n")
    return message


def ras(root: str, vendor: str, index: int, block: str = "umc", uncorrectable: int = 1, correctable: int = 0) -> None:
    """GPU `index` of `vendor` (amd, hygon) counts `uncorrectable` and `correctable` errors in RAS block `block`
    (0 and 0: as after a reset)."""
    gpu = gpu_of(root, vendor, index)
    device = gpu.sysfs or f"/sys/bus/pci/devices/{gpu.pci}"
    path = Root(root).resolve(f"{device}/ras")
    os.makedirs(path, exist_ok=True)
    with open(f"{path}/{block}_err_count", "w") as f:
        f.write(f"ue: {uncorrectable}\nce: {correctable}\n")


def gpu_of(root: str, vendor: str, index: int) -> Gpu:
    """GPU `index` of `vendor` on the simulated host; SimulatorError when it has none."""
    inv = discover(Root(root)).vendor(vendor)
    for g in inv.gpus if inv else ():
        if g.index == index and not g.parent:
            return g
    raise SimulatorError(f"the simulated host at {root} has no {vendor} GPU {index}")
