"""Hygon's stack part: the DTK an image ships (dtk.py) against the window of the host's driver."""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from gpuhook.host.image import InRoot
    from gpuhook.host.inventory import VendorInventory

STACK = "DTK"


def image_stack(image: InRoot, notes: list[str]) -> str | None:
    """The DTK release the image ships (/opt/dtk/.info/version, else the newest /opt/dtk-<version>). Reads the
    image root, never out of it."""
    from gpuhook.vendors.hygon import dtk

    return dtk.image_version(image, notes)


def stack_window(inv: VendorInventory) -> tuple[str, str] | None:
    """(oldest, newest) DTK the host's driver runs; None when its version or series is unknown."""
    from gpuhook.vendors.hygon import dtk

    return dtk.window(inv.driver_version) if inv.driver_version else None
