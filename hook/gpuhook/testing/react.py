"""The simulated GPU drivers' reactions that need the simulator itself: a stub driver library (stubs/amd_smi.c) asked to
change a GPU's partition mode runs `python -m gpuhook.testing.react <root> compute-partition <index> <mode>`, and the
host is rebuilt with that GPU in its new mode, as amdgpu re-lays its KFD nodes and render nodes (the GPU's tuning
state resets with it, as a driver's does); the stub NVML, having created or destroyed MIG instances, runs
`... <root> mig-sync 0 -` for the driver's procfs capabilities of them. Only simulated hosts have such stubs."""

from __future__ import annotations

import dataclasses
import os
import sys

from gpuhook.simulator.host import SIM_STATE
from gpuhook.testing.simulate import build_host, spec_of
from gpuhook.vendors.amd.sim import per_gpu

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


def main(argv: list[str]) -> int:
    root, what, index, mode = argv[0], argv[1], int(argv[2]), argv[3]
    if what == "mig-sync":  # the stub NVML changed its MIG instances: the driver's procfs follows
        from gpuhook.vendors.nvidia import sim_mig

        sim_mig.sync(root)
        return 0
    spec = spec_of(root)
    field = {"compute-partition": "amd_partitions", "memory-partition": "amd_memory_partition"}[what]
    modes = per_gpu(getattr(spec, field), spec.amd)
    modes[index] = mode
    changed: dict[str, Any] = {field: ",".join(modes)}
    kept = _nvidia_state(root)  # the other GPUs' state is not the AMD driver's to reset
    build_host(root, dataclasses.replace(spec, **changed), replace=True)
    for name, data in kept.items():
        with open(os.path.join(root + SIM_STATE, name), "wb") as f:
            f.write(data)
    if "nvml.mig" in kept:
        from gpuhook.vendors.nvidia import sim_mig

        sim_mig.sync(root, nodes=True)
    return 0


def _nvidia_state(root: str) -> dict[str, bytes]:
    """The stub NVML's state files (tunables, fans, MIG instances), to keep across an AMD re-lay."""
    state = root + SIM_STATE
    out = {}
    for name in os.listdir(state) if os.path.isdir(state) else []:
        if name.startswith("nvml"):
            with open(os.path.join(state, name), "rb") as f:
                out[name] = f.read()
    return out


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
