"""Build a fake GPU host tree: procfs/sysfs text, real device nodes, real stub ELF libraries (`gpuhook simulate`).
Each vendor's part is its own builder (its sim part: vendors/nvidia/sim.py, vendors/amd/sim.py, ...); what they
share is simulator/host.py."""

from __future__ import annotations

import json
import os
import shutil

from gpuhook import fastjson
from gpuhook.errors import SimulatorError
from gpuhook.simulator.host import MARKER, HostSpec
from gpuhook.statefile import read_bounded
from gpuhook.vendors.registry import all_vendors, names, sim

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


def build_host(root: str, spec: HostSpec, replace: bool = True) -> str:
    """Create a simulated host at `root` (re-create one gpuhook simulate made there, if `replace`); return its
    absolute path. Needs root for mknod."""
    root = os.path.abspath(root)
    _check_names(spec)
    _prepare(root, replace)
    for vendor in all_vendors():
        count = spec.gpus_of(vendor.NAME)
        if count or vendor.NAME in spec.drivers_without_gpus:
            sim(vendor.NAME).build(root, spec, count)
    with open(os.path.join(root, MARKER), "w") as f:
        f.write(json.dumps(spec.fields()) + "\n")  # the spec, for the simulated drivers' rebuilds
    return root


def spec_of(root: str) -> HostSpec:
    """The spec a simulated host was built from (its marker); SimulatorError when there is none."""
    try:
        fields = fastjson.loads(read_bounded(os.path.join(root, MARKER), 1 << 20))
        if not isinstance(fields, dict):
            raise ValueError("not a JSON object")
    except (OSError, ValueError) as e:
        raise SimulatorError(f"{root} is no simulated host gpuhook built: {e}") from e

    def frozen(v: Any) -> Any:
        return tuple(frozen(x) for x in v) if isinstance(v, list) else v

    try:
        spec = HostSpec(**{k: frozen(v) for k, v in fields.items()})
        _check_names(spec)
        return spec
    except (TypeError, SimulatorError) as e:  # a field HostSpec lacks, a name no vendor takes
        raise SimulatorError(f"{root}: its marker is not one this gpuhook wrote ({e}): build the host anew") from e


def _check_names(spec: HostSpec) -> None:
    """SimulatorError for a name in `spec` that is neither a vendor's (its GPU count) nor one of a vendor's
    settings (its sim part's OPTIONS)."""
    known = set(names())
    for vendor in names():
        known.update(getattr(sim(vendor).OPTIONS, "_fields", ()))
    unknown = sorted(k for k, _ in spec.values if k not in known)
    if unknown:
        raise SimulatorError(f"a simulated host has no {', '.join(unknown)}: it takes each vendor's GPU count by its "
                             f"name ({', '.join(names())}) and the vendors' settings ({', '.join(sorted(known))})")


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
