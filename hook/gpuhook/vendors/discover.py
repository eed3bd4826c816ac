"""Read-only inventory of the host under host_root."""

from __future__ import annotations

from gpuhook.host.inventory import Inventory
from gpuhook.host.root import Root
from gpuhook.vendors.registry import all_vendors


def discover(root: Root, only: frozenset[str] | None = None) -> Inventory:
    """Every vendor's driver, GPUs, device nodes and driver files found under `root` (only the vendors named
    in `only`, when given: a container that names its vendor need not wait for the others). Reads only."""
    vendors = (v for v in all_vendors() if only is None or v.NAME in only)
    return Inventory(root.base, tuple(inv for v in vendors if (inv := v.discover(root)) is not None))


def refresh() -> None:
    """What vendors remember of a host between discoveries (NVIDIA's driver files), read again where it changed:
    the warm helper's daemon calls it between calls, so that the workers it forks find it current."""
    for v in all_vendors():
        v.refresh()


def identified(root: Root, inventory: Inventory, idents: tuple[str, ...] | None = None) -> Inventory:
    """`inventory` with what each vendor's library alone knows of the GPUs `idents` name (NVIDIA's MIG UUIDs
    from NVML; None: of every GPU, for listings); the same value when nothing needs it. May load a library."""
    if idents is not None and not idents:
        return inventory
    from gpuhook.frozen import replace
    from gpuhook.vendors.registry import get

    vendors = tuple(get(inv.vendor).identify(root, inv, idents) for inv in inventory.vendors)
    return inventory if vendors == inventory.vendors else replace(inventory, vendors=vendors)
