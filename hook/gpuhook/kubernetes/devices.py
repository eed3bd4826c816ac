"""What the device plugin advertises: one device per GPU, or `replicas` shares of it (time-slicing), each
Healthy only while discovery sees the GPU, its device nodes exist and its driver is loaded (host/health.py, the
rule the exporter's gpuhook_gpu_healthy shares). Pure: derived from the same discovery the runtime uses, tested
with literals.
"""

from __future__ import annotations

from gpuhook.frozen import frozen
from gpuhook.host.health import problem, vanished
from gpuhook.plan.allocate import Unit, pick

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping, Sequence

    from gpuhook.host.inventory import VendorInventory

SHARE = "::"  # a share's id: <GPU id>::<n>, as NVIDIA's plugin names time-sliced replicas


@frozen
class Device:
    """One advertised device."""

    id: str
    gpu: str  # the GPU's id (UUID, else PCI address)
    index: int
    numa: int  # -1: unknown
    healthy: bool
    why: str = ""  # what makes it unhealthy


def gpu_key(uuid: str, pci: str) -> str:
    """How a GPU is named in device ids and records: its UUID, else its PCI address."""
    return uuid or pci


def advertise(inv: VendorInventory | None, replicas: int, numa: Mapping[str, int],
              known: Sequence[Device] = ()) -> tuple[Device, ...]:
    """The devices to advertise now: the vendor's GPUs (or `replicas` shares of each), healthy unless a device
    node is missing; devices advertised before (`known`) whose GPU discovery no longer sees stay listed,
    unhealthy, so the kubelet stops handing them out."""
    out: dict[str, Device] = {}
    for gpu in inv.gpus if inv is not None else ():
        key = gpu_key(gpu.uuid, gpu.pci)
        why = problem(gpu)
        for share in _share_ids(key, replicas):
            out[share] = Device(share, key, gpu.index, numa.get(gpu.pci, -1), not why, why)
    gone = vanished(inv is not None)
    for old in known:
        if old.id not in out:
            out[old.id] = Device(old.id, old.gpu, old.index, old.numa, False, gone)
    return tuple(sorted(out.values(), key=lambda d: (d.index, d.id)))


def _share_ids(key: str, replicas: int) -> list[str]:
    return [key] if replicas <= 1 else [f"{key}{SHARE}{n}" for n in range(replicas)]


def gpus_of(devices: Iterable[str], advertised: Sequence[Device]) -> tuple[str, ...]:
    """The GPUs behind device ids, each once, in order; KeyError names an id that was never advertised."""
    by_id = {d.id: d for d in advertised}
    return tuple(dict.fromkeys(by_id[i].gpu for i in devices))


def preferred(advertised: Sequence[Device], available: Sequence[str], must: Sequence[str],
              size: int) -> tuple[str, ...]:
    """The kubelet's preferred allocation: must-include first, one NUMA node, the least shared GPUs."""
    free = set(available)
    units = [Unit(d.id, d.gpu, d.numa, d.index) for d in advertised if d.id in free and d.healthy]
    units += [Unit(d.id, d.gpu, d.numa, d.index) for d in advertised if d.id in must and d.id in free
              and not d.healthy]
    in_use: dict[str, int] = {}
    for d in advertised:
        if d.id not in free:
            in_use[d.gpu] = in_use.get(d.gpu, 0) + 1
    return pick(units, size, must, in_use)
