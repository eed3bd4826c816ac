"""What every vendor's simulator shares: the simulated host's spec and the files, PCI devices and device nodes
they write under its root (the vendors' sim modules build their part; testing/simulate.py puts them together)."""

from __future__ import annotations

import os
import stat

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, TypeVar

    T = TypeVar("T")

MARKER = ".gpuhook-simulated"
SIM_STATE = "/var/lib/gpuhook-sim"  # the stub NVML's and amd_smi's state, under the simulated root
class HostSpec:
    """What the simulated host has: what every vendor's simulator shares (NUMA nodes, fans, drivers loaded without
    GPUs) and, by name, the rest: each vendor's GPU count under its own name (nvidia=2, amd=2, toy=1) and each
    vendor's own settings (nvidia_driver=, mig=, amd_partitions=, hygon_driver=, ...), whose names, defaults and
    meaning are its sim part's (vendors/<v>/sim.py: Options). testing/simulate.py refuses a name no vendor takes.
    Immutable; `replace` makes a changed copy."""

    __slots__ = ("drivers_without_gpus", "fans", "numa_nodes", "values")

    def __init__(self, *, drivers_without_gpus: tuple[str, ...] = (), numa_nodes: int = 1, fans: int = 1,
                 others: tuple[tuple[str, int], ...] = (), **values: object) -> None:
        """`others`: GPUs of vendors registered from outside, as (name, count); the same as `name=count`."""
        object.__setattr__(self, "drivers_without_gpus", tuple(drivers_without_gpus))  # loaded even with no GPU
        object.__setattr__(self, "numa_nodes", numa_nodes)  # each vendor's GPUs spread evenly over these (sysfs)
        object.__setattr__(self, "fans", fans)  # fans on each GPU the stubs report (0: passively cooled)
        object.__setattr__(self, "values", tuple(sorted({**dict(others), **values}.items())))

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"HostSpec is immutable: use replace(), not {name} = ...")

    def __getattr__(self, name: str) -> Any:
        """A named value as given (a vendor's count or setting); AttributeError when it was not given."""
        for key, value in object.__getattribute__(self, "values"):
            if key == name:
                return value
        raise AttributeError(name)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, HostSpec) and self.fields() == other.fields()

    def __hash__(self) -> int:
        return hash(repr(self.fields()))

    def __repr__(self) -> str:
        return "HostSpec(" + ", ".join(f"{k}={v!r}" for k, v in self.fields().items()) + ")"

    def fields(self) -> dict[str, Any]:
        """Every value given and shared, by name (what the marker file keeps)."""
        return {"drivers_without_gpus": self.drivers_without_gpus, "numa_nodes": self.numa_nodes, "fans": self.fans,
                **dict(self.values)}

    def replace(self, **changes: object) -> HostSpec:
        """A copy with `changes`."""
        return HostSpec(**{**self.fields(), **changes})

    def gpus_of(self, vendor: str) -> int:
        """How many GPUs of `vendor` the host has."""
        count = dict(self.values).get(vendor, 0)
        return count if isinstance(count, int) else 0


def settings_of(spec: HostSpec, kind: type[T]) -> T:
    """A vendor's settings record `kind` (a @frozen class: its fields the names it takes, with defaults) from
    `spec`: the values given for its fields, its defaults for the rest."""
    names = kind._fields  # type: ignore[attr-defined]  # frozen's, at run time
    return kind(**{k: v for k, v in spec.values if k in names})


def write(root: str, path: str, text: str) -> None:
    """A text file at host path `path` under `root` (its directories made)."""
    full = root + path
    os.makedirs(os.path.dirname(full), exist_ok=True)
    with open(full, "w") as f:
        f.write(text)


def pci_device(root: str, pci: str, index: int, count: int, spec: HostSpec, vendor: str = "") -> str:
    """The PCI device's sysfs directory (host path) with its NUMA node and PCI vendor id (0x10de), linked from
    /sys/bus/pci/devices."""
    device = f"/sys/devices/pci0000:00/{pci}"
    if vendor:
        write(root, f"{device}/vendor", vendor + "\n")
    numa = index * spec.numa_nodes // max(count, 1) if spec.numa_nodes > 1 else -1
    write(root, f"{device}/numa_node", f"{numa}\n")
    link = f"{root}/sys/bus/pci/devices/{pci}"
    os.makedirs(os.path.dirname(link), exist_ok=True)
    if not os.path.lexists(link):
        os.symlink(f"../../../devices/pci0000:00/{pci}", link)
    return device


def node(root: str, path: str, major: int, minor: int, mode: int, gid: int) -> None:
    """A real character device node at host path `path` under `root`, owned by root:`gid`."""
    full = root + path
    os.makedirs(os.path.dirname(full), exist_ok=True)
    os.mknod(full, stat.S_IFCHR | mode, os.makedev(major, minor))
    os.chown(full, 0, gid)
    os.chmod(full, mode)


def react_command(root: str) -> str:
    """The command a stub driver library runs to play the driver's reaction to a change (a partition mode, MIG
    instances): the simulator, rebuilding what the change moves (testing/react.py)."""
    import sys

    return f"{sys.executable} -m gpuhook.testing.react {root}"
