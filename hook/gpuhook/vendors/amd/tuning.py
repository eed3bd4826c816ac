"""AMD's tuning part: the performance level, sclk levels, the power cap and fans through amd-smi where it loads,
else amdgpu's sysfs files (backends.py, settings.py; the refusals naming a GPU's own ranges: ranges.py); compute and
memory partition modes (partitions.py)."""

from __future__ import annotations

import os

from gpuhook.vendors.amd.vendor import NAME, discover

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence

    from gpuhook.edits import Edits
    from gpuhook.host.inventory import Gpu
    from gpuhook.host.root import Root
    from gpuhook.request.tuning import Tuning
    from gpuhook.vendors.contract import Backend, Setting


def settings(tuning: Tuning, gpu: Gpu) -> tuple[Setting, ...]:
    """The performance level (manual for a clock range), sclk levels, the hwmon power cap and fan, by the GPU's PCI
    device directory (amd/settings.py)."""
    from gpuhook.vendors.amd.settings import settings as sysfs_settings

    return sysfs_settings(NAME, "AMD", tuning, gpu)


def sharing(tuning: Tuning, gpus: Sequence[Gpu], directory: str) -> tuple[tuple[Setting, ...], Edits]:
    """No daemon shares these GPUs: MPS is NVIDIA's."""
    from gpuhook.vendors.amd.settings import no_daemon

    return no_daemon("AMD", tuning, gpus)


def repartition(root: Root, gpu: Gpu, layout: dict[str, object], dry_run: bool = False) -> str:
    """Compute (SPX, DPX, QPX, CPX) and memory (NPS1, NPS4) partition modes (partitions.py)."""
    from gpuhook.vendors.amd import partitions as amd_partitions

    return amd_partitions.repartition(root, gpu.pci, layout, dry_run=dry_run)


def backend(root: Root, state_dir: str) -> Backend:
    """amd-smi on the host's /opt/rocm/lib/libamd_smi.so where it loads, else amdgpu's sysfs files."""
    from gpuhook.errors import TuningError
    from gpuhook.vendors.amd.backends import AmdSmiBackend, SysfsBackend

    library = os.path.join(root.resolve("/opt/rocm"), "lib/libamd_smi.so")
    if os.path.exists(library):
        try:
            return AmdSmiBackend(library, SysfsBackend(root, discover))
        except TuningError:
            pass  # a library that does not start or list its GPUs: the kernel's files still work
    return SysfsBackend(root, discover)
