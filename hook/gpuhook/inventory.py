"""What the host has: frozen values produced by discovery and consumed by planning."""

from __future__ import annotations

from gpuhook.record import record


@record
class DeviceNode:
    """A device node as the host has it: path (host-absolute), type, numbers, permissions."""

    path: str
    kind: str  # "c" or "b"
    major: int
    minor: int
    mode: int  # permission bits only
    uid: int
    gid: int

    def needs_group(self) -> bool:
        """Whether a process needs the node's group (others lack read+write) to open it."""
        return (self.mode & 0o006) != 0o006


@record
class Gpu:
    """One GPU: its identities and the device nodes that belong to it alone."""

    vendor: str
    index: int
    uuid: str
    pci: str
    model: str
    nodes: tuple[DeviceNode, ...]
    missing: tuple[str, ...] = ()  # node paths the GPU should have but the host lacks
    arch: str = ""  # NVIDIA: empty here; AMD: gfx target, e.g. gfx90a
    sysfs: str = ""  # AMD: the PCI device's sysfs directory (host-absolute), where amdgpu's tunables are


@record
class DriverFile:
    """A driver library or tool on the host, for one capability.

    `source` is the real file (host-absolute, links resolved); `target` is where it goes
    in the container (libraries: the real file's path; tools: the name users call).
    """

    capability: str
    kind: str  # "lib" or "bin"
    source: str
    target: str


@record
class VendorInventory:
    """Everything one vendor's driver offers on the host."""

    vendor: str
    driver_version: str | None
    gpus: tuple[Gpu, ...]
    shared_nodes: tuple[DeviceNode, ...]  # control nodes every container of the vendor needs
    files: tuple[DriverFile, ...] = ()
    notes: tuple[str, ...] = ()  # what discovery found odd, for doctor and logs


@record
class Inventory:
    """The whole host: one entry per vendor whose driver is present."""

    root: str
    vendors: tuple[VendorInventory, ...]

    def vendor(self, name: str) -> VendorInventory | None:
        """The inventory of one vendor, or None when its driver is absent."""
        for v in self.vendors:
            if v.vendor == name:
                return v
        return None

    def with_gpus(self) -> tuple[VendorInventory, ...]:
        """Vendors that have at least one GPU."""
        return tuple(v for v in self.vendors if v.gpus)
