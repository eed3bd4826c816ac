"""What the host has: frozen values produced by discovery and consumed by planning."""

from __future__ import annotations

from gpuhook.edits import DeviceNode
from gpuhook.frozen import frozen


@frozen
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
    parent: str = ""  # a slice (NVIDIA MIG device, AMD partition): the physical GPU's UUID, else its PCI address
    slice: str = ""  # a slice's own name: NVIDIA's index form "<gpu>:<mig>"; AMD: the partition's index on its device
    profile: str = ""  # a slice's shape: a MIG profile (1g.10gb, from NVML) or an AMD compute partition mode (CPX)
    place: str = ""  # where a slice sits on its GPU, in the driver's terms: MIG gi<G>/ci<C>; AMD the partition index

    def key(self) -> str:
        """The GPU's identity in leases, records and the ledger: its UUID, else a slice's name, else its PCI address."""
        return self.uuid or (f"{self.parent}/{self.slice}" if self.slice else self.pci)


@frozen
class DriverFile:
    """A driver library or tool on the host, for one capability.

    `source` is the real file (host-absolute, links resolved); `target` is where it goes
    in the container (libraries: the real file's path; tools: the name users call).
    """

    capability: str
    kind: str  # "lib", "bin", or "dir" (a directory mounted whole, e.g. Hygon's /opt/hyhal)
    source: str
    target: str


@frozen
class VendorInventory:
    """Everything one vendor's driver offers on the host."""

    vendor: str
    driver_version: str | None
    gpus: tuple[Gpu, ...]
    shared_nodes: tuple[DeviceNode, ...]  # control nodes every container of the vendor needs
    files: tuple[DriverFile, ...] = ()
    notes: tuple[str, ...] = ()  # what discovery found odd, for doctor and logs
    slices: tuple[Gpu, ...] = ()  # slices that are not GPUs of their own in `gpus` (NVIDIA MIG devices)

    def siblings(self, gpu: Gpu) -> tuple[Gpu, ...]:
        """Every slice (in `gpus` and `slices`) of the physical GPU `gpu` is a slice of; () for a whole GPU."""
        if not gpu.parent:
            return ()
        return tuple(g for g in (*self.gpus, *self.slices) if g.parent == gpu.parent)


@frozen
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
