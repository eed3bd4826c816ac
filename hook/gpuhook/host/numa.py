"""Which NUMA node a GPU sits on: the kernel's `numa_node` of its PCI device. Read only by the allocators
(the device plugin, count requests), never on the injection path."""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from gpuhook.host.root import Root


def numa_node(root: Root, pci: str) -> int:
    """The NUMA node of PCI device `pci`, or -1 where the host does not say (one node, or no sysfs). Reads sysfs."""
    try:
        text = root.read_text(f"/sys/bus/pci/devices/{pci}/numa_node")[:16].strip()
    except (OSError, ValueError):
        return -1
    return int(text) if text.lstrip("-").isdigit() and text.isascii() else -1
