"""Hygon's stack part: the DTK an image ships (dtk.py) against the window of the host's driver."""

from __future__ import annotations

from gpuhook.vendors.hygon.vendor import STACK as STACK

TYPE_CHECKING = False
if TYPE_CHECKING:
    from gpuhook.host.image import InRoot
    from gpuhook.host.inventory import VendorInventory

IMAGE = True


def image_stack(image: InRoot, notes: list[str]) -> str | None:
    """The DTK release the image ships (/opt/dtk/.info/version, else the newest /opt/dtk-<version>). Reads the
    image root, never out of it."""
    from gpuhook.vendors.hygon import dtk

    return dtk.image_version(image, notes)


def stack_window(inv: VendorInventory) -> tuple[str, str] | None:
    """(oldest, newest) DTK the host's driver runs; None when its version or series is unknown."""
    from gpuhook.vendors.hygon import dtk

    return dtk.window(inv.driver_version) if inv.driver_version else None


def release_of_driver(driver: str) -> str | None:
    """None: a driver's DTK is a window (stack_window), not one release."""
    return None


def min_driver(release: str) -> str | None:
    """None: gpuhook keeps no table from DTK releases to drivers."""
    return None


def check_release(inv: VendorInventory, release: str, strict: bool) -> str | None:
    """The image's DTK against the driver's window (vendors/stack_window.py)."""
    from gpuhook.vendors.hygon.vendor import LABEL
    from gpuhook.vendors.stack_window import check

    return check(LABEL, STACK, inv, release, stack_window(inv), strict)
