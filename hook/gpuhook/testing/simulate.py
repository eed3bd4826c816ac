"""Build a fake GPU host tree: procfs/sysfs text, real device nodes, real stub ELF libraries (`gpuhook simulate`).
Each vendor's part is its own builder (Vendor.simulate: vendors/nvidia/sim.py, vendors/amd/sim.py); what they
share is simulator/host.py."""

from __future__ import annotations

import os
import shutil

from gpuhook.errors import SimulatorError
from gpuhook.simulator.host import MARKER, HostSpec
from gpuhook.vendors.registry import all_vendors


def build_host(root: str, spec: HostSpec, replace: bool = True) -> str:
    """Create a simulated host at `root` (re-create one gpuhook simulate made there, if `replace`); return its
    absolute path. Needs root for mknod."""
    root = os.path.abspath(root)
    _prepare(root, replace)
    for vendor in all_vendors():
        count = spec.gpus_of(vendor.NAME)
        if count or vendor.NAME in spec.drivers_without_gpus:
            vendor.simulate(root, spec, count)
    with open(os.path.join(root, MARKER), "w") as f:
        f.write(f"nvidia={spec.nvidia} amd={spec.amd} hygon={spec.hygon}\n")
    return root


def _prepare(root: str, replace: bool) -> None:
    if os.path.exists(root) and not os.path.isdir(root):
        raise SimulatorError(f"{root} is not a directory: pick an empty or new directory")
    if os.path.isdir(root) and os.listdir(root):
        if not os.path.exists(os.path.join(root, MARKER)):
            raise SimulatorError(f"{root} is not empty and was not made by gpuhook simulate: "
                                 "pick an empty or new directory")
        if not replace:
            raise SimulatorError(f"{root} holds a simulated host already: --replace rebuilds it (its GPUs' state "
                                 "and any gpuhook config pointing at it start anew)")
        shutil.rmtree(root)
    os.makedirs(root, exist_ok=True)
    if os.geteuid() != 0:
        raise SimulatorError("simulate makes real device nodes (mknod) and must run as root")


__all__ = ["HostSpec", "build_host"]
