"""NVIDIA's stack part: CUDA. Which CUDA release a driver runs, and which driver a CUDA release needs, by NVIDIA's
table; an image states what it needs in its env (CUDA_VERSION, NVIDIA_REQUIRE_*), which plan/compat evaluates with
these answers, CUDA's forward compatibility included. Pure."""

from __future__ import annotations

from gpuhook.request.requirements import version_tuple
from gpuhook.vendors.nvidia.vendor import STACK as STACK

TYPE_CHECKING = False
if TYPE_CHECKING:
    from gpuhook.host.image import InRoot
    from gpuhook.host.inventory import VendorInventory

IMAGE = False  # an image states its CUDA in env; its forward-compatibility libraries are read by host/facts.py

# Minimum Linux x86_64 driver of each CUDA toolkit release (NVIDIA CUDA Toolkit release notes,
# "CUDA Toolkit and Corresponding Driver Versions").
CUDA_MIN_DRIVER: tuple[tuple[str, str], ...] = (
    ("11.0", "450.36.06"), ("11.1", "455.23"), ("11.2", "460.27.03"), ("11.3", "465.19.01"),
    ("11.4", "470.42.01"), ("11.5", "495.29.05"), ("11.6", "510.39.01"), ("11.7", "515.43.04"),
    ("11.8", "520.61.05"), ("12.0", "525.60.13"), ("12.1", "530.30.02"), ("12.2", "535.54.03"),
    ("12.3", "545.23.06"), ("12.4", "550.54.14"), ("12.5", "555.42.02"), ("12.6", "560.28.03"),
    ("12.8", "570.26"), ("12.9", "575.51.03"), ("13.0", "580.65.06"),
)


def image_stack(image: InRoot, notes: list[str]) -> str | None:
    """None: an image's CUDA is what its env states."""
    return None


def stack_window(inv: VendorInventory) -> tuple[str, str] | None:
    """None: a driver runs every CUDA up to its own (release_of_driver), and newer ones with forward compatibility."""
    return None


def min_driver(release: str) -> str | None:
    """The oldest Linux driver for CUDA release `release` (None when newer than the table)."""
    want = version_tuple(release)[:2]
    for cuda, driver in CUDA_MIN_DRIVER:
        if version_tuple(cuda)[:2] >= want:
            return driver
    return None


def release_of_driver(driver: str) -> str | None:
    """The newest CUDA release a driver version supports, by the table."""
    have = version_tuple(driver)
    found = None
    for cuda, minimum in CUDA_MIN_DRIVER:
        if version_tuple(minimum) <= have:
            found = cuda
    return found


def check_release(inv: VendorInventory, release: str, strict: bool) -> str | None:
    """None: CUDA is checked by the image's requirements (plan/compat)."""
    return None
