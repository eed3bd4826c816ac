"""NVIDIA's doctor part: the driver libraries a CUDA container needs, MIG devices' caps nodes."""

from __future__ import annotations

import os

TYPE_CHECKING = False
if TYPE_CHECKING:
    from gpuhook.host.inventory import VendorInventory


def checks(inv: VendorInventory) -> tuple[tuple[str, str, str], ...]:
    """The driver libraries a CUDA container needs; MIG devices' caps nodes."""
    libs = sorted({os.path.basename(f.source).split(".so")[0] for f in inv.files if f.kind == "lib"})
    missing = [s for s in ("libcuda", "libnvidia-ml") if s not in libs]
    if missing:
        found = ("fail", f"NVIDIA driver libraries missing: {', '.join(missing)}",
                 "install the driver's user-space packages (libcuda1, libnvidia-ml1)")
    else:
        found = ("ok", f"{len(libs)} NVIDIA driver libraries found", "")
    broken = [s for s in inv.slices if s.missing]
    if broken:
        shown = ", ".join(f"{s.slice} ({s.missing[0]})" for s in broken)
        mig = ("warn", f"MIG devices without their caps nodes: {shown}",
               "make them with nvidia-modprobe -f <the capability's access file under /proc/driver/nvidia/"
               "capabilities>, as NVIDIA's toolkit does, or with the driver's udev rules")
        return found, mig
    return (found, ("ok", f"{len(inv.slices)} MIG devices, each with its caps nodes", "")) if inv.slices else (found,)
