"""Read-only inventory of the host under host_root."""

from __future__ import annotations

from gpuhook.inventory import Inventory
from gpuhook.root import Root
from gpuhook.vendors import all_vendors


def discover(root: Root) -> Inventory:
    """Every vendor's driver, GPUs, device nodes and driver files found under `root`. Reads only."""
    found = tuple(inv for v in all_vendors() if (inv := v.discover(root)) is not None)
    return Inventory(root.base, found)
