"""What the device plugin advertises: one device per GPU, or `replicas` shares of it (time-slicing), each
Healthy only while discovery sees the GPU, its device nodes exist and its driver is loaded (host/health.py, the
rule the exporter's gpuhook_gpu_healthy shares). Pure: derived from the same discovery the runtime uses, tested
with literals.

Slices that are not GPUs of their own (NVIDIA's MIG devices) are advertised by `[kubernetes] mig_strategy`, as
NVIDIA's device plugin does: `none`, whole GPUs only; `single`, each MIG device is one of the vendor's resource
(nvidia.com/gpu) in place of its GPU; `mixed`, whole GPUs under the vendor's resource and MIG devices under
the vendor's SLICE_RESOURCE (nvidia.com/mig-1g.10gb), one resource per profile. Each slice's health is its own.

In the device plugin API (k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1): the Device list ListAndWatch sends.
"""

from __future__ import annotations

from gpuhook.frozen import frozen
from gpuhook.host.health import problem, vanished
from gpuhook.plan.allocate import Unit, pick

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping, Sequence

    from gpuhook.host.inventory import Gpu, VendorInventory

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
    name: str = ""  # a slice: how the vendor's env and CDI name it (a MIG device's UUID or <gpu>:<mig>; else index)


def gpu_key(uuid: str, pci: str) -> str:
    """How a GPU is named in device ids and records: its UUID, else its PCI address."""
    return uuid or pci


def resources(inv: VendorInventory, resource: str, strategy: str,
              per_profile: str = "nvidia.com/mig-{profile}") -> dict[str, tuple[Gpu, ...]]:
    """The resource names to serve for `inv` under `strategy` (none, single, mixed; `per_profile`: the vendor's
    name for a profile's resource), each with what it advertises; a mixed profile NVML did not name is left out."""
    if strategy == "none" or not inv.slices:
        return {resource: inv.gpus}
    parents = {s.parent for s in inv.slices}
    whole = tuple(g for g in inv.gpus if g.key() not in parents)
    if strategy == "single":
        return {resource: (*whole, *inv.slices)}
    out = {resource: whole}
    for s in inv.slices:
        if s.profile:
            name = per_profile.format(profile=s.profile)
            out[name] = (*out.get(name, ()), s)
    return out


def advertise(inv: VendorInventory | None, replicas: int, numa: Mapping[str, int],
              known: Sequence[Device] = (), gpus: Sequence[Gpu] | None = None) -> tuple[Device, ...]:
    """The devices to advertise now: `gpus` (by default the vendor's GPUs; or `replicas` shares of each), healthy
    unless a device node is missing; devices advertised before (`known`) whose GPU discovery no longer sees stay
    listed, unhealthy, so the kubelet stops handing them out."""
    out: dict[str, Device] = {}
    slices = inv.slices if inv is not None else ()
    for gpu in (inv.gpus if gpus is None else gpus) if inv is not None else ():
        key = gpu.key()
        why = problem(gpu)
        # a MIG device by its UUID or index form; a partition that is a GPU of its own by its index (ROCm's)
        name = ("" if not gpu.parent else (gpu.uuid or gpu.slice) if gpu in slices else str(gpu.index))
        for share in _share_ids(key, replicas):
            out[share] = Device(id=share, gpu=key, index=gpu.index, numa=numa.get(gpu.pci, -1), healthy=not why,
                                why=why, name=name)
    gone = vanished(inv is not None)
    for old in known:
        if old.id not in out:
            out[old.id] = Device(id=old.id, gpu=old.gpu, index=old.index, numa=old.numa, healthy=False, why=gone)
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
