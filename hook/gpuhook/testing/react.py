"""The simulated GPU drivers' reactions that need the simulator itself: a stub driver library asked to change a GPU
(stubs/amd_smi.c a partition mode, the stub NVML its MIG instances) runs `python -m gpuhook.testing.react <root>
<what> <index> <value>`, and the vendor whose sim part lists <what> among its REACTIONS plays it: in place, or by a
spec the host is rebuilt with (as amdgpu re-lays its KFD and render nodes; that vendor's own stub state resets with
it, as a driver's does, while every other vendor's is kept and settled again). Only simulated hosts have such
stubs."""

from __future__ import annotations

import os
import sys

from gpuhook.errors import SimulatorError
from gpuhook.simulator.host import SIM_STATE
from gpuhook.testing.simulate import build_host, spec_of
from gpuhook.vendors.registry import names, sim


def main(argv: list[str]) -> int:
    """Play one reaction on the simulated host at argv[0]. Writes its files."""
    root, what, index, value = argv[0], argv[1], int(argv[2]), argv[3]
    vendor = next((v for v in names() if what in sim(v).REACTIONS), None)
    if vendor is None:
        raise SimulatorError(f"no simulated driver reacts to {what!r}")
    spec = spec_of(root)
    changed = sim(vendor).react(root, spec, what, index, value)
    if changed is None:
        return 0
    kept = _state(root, [sim(v).STATE for v in names() if v != vendor and sim(v).STATE])
    build_host(root, changed, replace=True)
    for name, data in kept.items():
        with open(os.path.join(root + SIM_STATE, name), "wb") as f:
            f.write(data)
    for v in names():
        if v != vendor:
            sim(v).settle(root)
    return 0


def _state(root: str, prefixes: list[str]) -> dict[str, bytes]:
    """The state files of the stubs whose names start with `prefixes`, to keep across another vendor's re-lay."""
    state = root + SIM_STATE
    out = {}
    for name in os.listdir(state) if os.path.isdir(state) and prefixes else []:
        if name.startswith(tuple(prefixes)):
            with open(os.path.join(state, name), "rb") as f:
                out[name] = f.read()
    return out


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
