"""Telemetry of simulated GPUs: what the stub NVML and amd_smi report for each GPU (and, for AMD, amdgpu's sysfs
files), set by tests while an exporter reads them. One line per GPU in <SIM_STATE>/<stub>.telemetry."""

from __future__ import annotations

import os
from dataclasses import dataclass, fields, replace

from gpuhook.simulator.host import SIM_STATE


@dataclass(frozen=True, slots=True)
class Telemetry:
    """One simulated GPU's readings, in the units the stubs' files hold."""

    utilization: int  # percent
    memory_used: int  # bytes
    memory_total: int  # bytes
    power_mw: int  # milliwatts drawn
    temperature: int  # degrees Celsius
    clock_mhz: int  # SM clock (NVIDIA), sclk (AMD) while no clock is locked


def path(root: str, stub: str) -> str:
    """The telemetry file of stub `stub` ("nvml", "amdsmi") under the simulated host `root`."""
    return f"{root}{SIM_STATE}/{stub}.telemetry"


def read(root: str, stub: str) -> dict[int, Telemetry]:
    """Every GPU's line in the stub's file."""
    try:
        with open(path(root, stub)) as f:
            lines = [ln.split() for ln in f]
    except FileNotFoundError:
        return {}
    return {int(w[0]): Telemetry(*(int(x) for x in w[1:7])) for w in lines if len(w) == 7}


def put(root: str, stub: str, index: int, default: Telemetry, **changes: int) -> Telemetry:
    """GPU `index`'s readings changed as asked (from its line, else `default`); the file rewritten atomically."""
    known = read(root, stub)
    now = replace(known.get(index, default), **changes)
    known[index] = now
    text = "".join(f"{i} " + " ".join(str(getattr(t, f.name)) for f in fields(t)) + "\n"
                   for i, t in sorted(known.items()))
    os.makedirs(os.path.dirname(path(root, stub)), exist_ok=True)
    tmp = path(root, stub) + ".tmp-py"
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, path(root, stub))
    return now
