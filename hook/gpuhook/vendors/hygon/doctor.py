"""Hygon's doctor part: the HAL on the host, a driver whose DTK window gpuhook does not know."""

from __future__ import annotations

from gpuhook.vendors.hygon.vendor import HAL

TYPE_CHECKING = False
if TYPE_CHECKING:
    from gpuhook.host.inventory import VendorInventory


def checks(inv: VendorInventory) -> tuple[tuple[str, str, str], ...]:
    """The HAL's absence, and a driver whose DTK window gpuhook does not know."""
    from gpuhook.vendors.hygon import dtk

    out = []
    if not any(f.kind == "dir" for f in inv.files):
        out.append(("warn", f"{HAL} is missing on the host",
                    "install the DCU driver's HAL (it comes with the driver): Hygon's images expect it mounted"))
    if inv.driver_version and dtk.window(inv.driver_version) is None:
        out.append(("warn", f"Hygon driver {inv.driver_version} is not in gpuhook's DTK table",
                    "images' DTK releases go unchecked against it (docs/vendors.md#hygon-dcu)"))
    return tuple(out)
