"""GPU vendors, one module each, behind one small Protocol."""

from __future__ import annotations

TYPE_CHECKING = False  # typing costs milliseconds to import: the GPU path sits in front of a container start
if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Protocol

    from gpuhook.edits import Edits
    from gpuhook.inventory import Gpu, VendorInventory
    from gpuhook.root import Root
else:
    Protocol = object


class Vendor(Protocol):
    """What a vendor module provides: read-only discovery, and pure planning."""

    NAME: str
    LABEL: str

    def discover(self, root: Root) -> VendorInventory | None:
        """The vendor's driver, GPUs, nodes and files on the host; None when its driver is absent."""
        ...

    def plan(self, inv: VendorInventory, gpus: Sequence[Gpu], capabilities: frozenset[str],
             host_base: str) -> Edits:
        """Edits that give a container `gpus` (and the driver parts for `capabilities`). Pure."""
        ...


def all_vendors() -> tuple[Vendor, ...]:
    """Every vendor module gpuhook knows, in a stable order."""
    from gpuhook.vendors import amd, nvidia

    return (nvidia, amd)
