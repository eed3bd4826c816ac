"""Hygon's tuning part: the DCU's sysfs files, as hy-smi --setsclk and --setperflevel write them (AMD's
settings.py and backends.SysfsBackend); no MPS, no partition layouts yet."""

from __future__ import annotations

from gpuhook.vendors.hygon.vendor import NAME, discover

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
    device directory (amd/settings.py, as hy-smi --setsclk and --setperflevel write them)."""
    from gpuhook.vendors.amd.settings import settings as sysfs_settings

    return sysfs_settings(NAME, "a Hygon DCU", tuning, gpu)


def sharing(tuning: Tuning, gpus: Sequence[Gpu], directory: str) -> tuple[tuple[Setting, ...], Edits]:
    """No daemon shares these GPUs: MPS is NVIDIA's."""
    from gpuhook.vendors.amd.settings import no_daemon

    return no_daemon("Hygon DCU", tuning, gpus)


def repartition(root: Root, gpu: Gpu, layout: dict[str, object], dry_run: bool = False) -> str:
    """Not yet: Hygon's DCU MIG mode is hy-smi's (hy-smi -mig, hy-smi mig -cgi)."""
    from gpuhook.errors import GpuhookError

    raise GpuhookError(f"Hygon DCU {gpu.index}: gpuhook does not apply DCU partitions: use hy-smi mig")


def backend(root: Root, state_dir: str) -> Backend:
    """The DCU's sysfs files (the PCI device directory discovery finds)."""
    from gpuhook.vendors.amd.backends import SysfsBackend

    return SysfsBackend(root, discover)
