"""AMD's stack part: ROCm. The host's amdgpu driver belongs to a ROCm release (host/rocm.py's table), whose support
matrix says which ROCm user space runs on it; the container's ROCm (the image's, or the host's tree gpuhook.dev/
host-rocm mounts) is checked against that window. The image's ROCm is read with its other facts (host/facts.py):
host-rocm needs it too."""

from __future__ import annotations

from gpuhook.errors import PolicyError
from gpuhook.host import rocm
from gpuhook.vendors.amd.vendor import STACK as STACK

TYPE_CHECKING = False
if TYPE_CHECKING:
    from gpuhook.host.image import InRoot
    from gpuhook.host.inventory import VendorInventory

IMAGE = False  # read by host/facts.py as image_rocm, beside the host-rocm trees


def image_stack(image: InRoot, notes: list[str]) -> str | None:
    """None: host/facts.py reads the image's ROCm itself."""
    return None


def stack_window(inv: VendorInventory) -> tuple[str, str] | None:
    """(oldest, newest) ROCm user space the host's amdgpu driver runs; None for the in-kernel driver or one
    gpuhook's table lacks."""
    release = release_of_driver(inv.driver_version) if inv.driver_version else None
    return rocm.window(release) if release else None


def release_of_driver(driver: str) -> str | None:
    """The ROCm release an amdgpu (DKMS) driver version belongs to."""
    return rocm.release_of_driver(driver)


def min_driver(release: str) -> str | None:
    """None: the way out of a ROCm mismatch is named by the window, not a driver version."""
    return None


def check_release(inv: VendorInventory, release: str, strict: bool) -> str | None:
    """The container's ROCm against the host driver's window, as AMD's support matrix gives it."""
    driver = inv.driver_version
    if driver is None:
        return (f"the image ships ROCm {release} but the host runs the in-kernel amdgpu driver, which has no version "
                "to check against AMD's support matrix")
    host = release_of_driver(driver)
    if host is None:
        return (f"the host's amdgpu driver {driver} is not in gpuhook's table of ROCm releases; the image's ROCm "
                f"{release} was not checked")
    if rocm.supported(release, host) is not False:
        return None
    lo, hi = rocm.window(host) or ("?", "?")
    msg = (f"the image ships ROCm {release} but the host amdgpu driver {driver} (ROCm {host}) supports ROCm user "
           f"space {lo} to {hi}: use an image with ROCm {lo}-{hi} or a host driver that supports {release}")
    if strict:
        raise PolicyError(msg + ' (refused by [policy] rocm_compatibility = "strict")')
    return msg
