"""amdgpu's RAS error counters (AMD GPUs and Hygon DCUs, whose driver keeps amdgpu's files): the PCI device's
ras/<block>_err_count files, each "ue: <uncorrectable>\\nce: <correctable>\\n", counted since the driver loaded.
A GPU without RAS (no ras/ directory) has no counters. Reads sysfs."""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from gpuhook.host.inventory import Gpu
    from gpuhook.host.root import Root

_SUFFIX = "_err_count"


def uncorrectable(root: Root, gpu: Gpu) -> dict[str, int]:
    """{block: uncorrectable errors} of the GPU's RAS blocks (umc, gfx, sdma, ...); {} where it has none."""
    device = gpu.sysfs or (f"/sys/bus/pci/devices/{gpu.pci}" if gpu.pci else "")
    if not device:
        return {}
    out: dict[str, int] = {}
    for name in root.listdir(f"{device}/ras"):
        if not name.endswith(_SUFFIX):
            continue
        try:
            text = root.read_text(f"{device}/ras/{name}")
        except (OSError, ValueError):
            continue
        out[name[:-len(_SUFFIX)]] = _count(text, "ue")
    return out


def _count(text: str, field: str) -> int:
    """The number after "<field>:" in a counter file; 0 where there is none."""
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep and key.strip() == field and value.strip().isdigit():
            return int(value.strip())
    return 0
