"""AMD partitions made on demand (KEP-4815's partitionable devices, [kubernetes] partitions = "dynamic").

A compute partition mode (SPX, DPX, QPX, CPX) and a memory partition mode (NPS1, NPS4) apply to the whole GPU: an
MI300X in CPX is eight partitions, never four of CPX beside two of DPX. So each GPU whose driver has the mode files
is offered as every partition of every mode it lists (SPX the GPU whole), each consuming its share of one counter
per XCD (xcd-0 ... xcd-7: partition i of a mode with n partitions takes the n-th part starting at i), so that the
scheduler never allocates two partitions that share compute dies; and since counters cannot say "all of one mode",
the driver refuses, with one line, a partition of another mode while a claim holds one of the GPU's (the claim then
waits for its preparation to be retried), and makes nothing until the GPU is free. Making one sets the GPU's modes
(partitions.repartition: amd-smi, else amdgpu's files) where they differ; the last claim going sets SPX again.

Devices are named after the GPU's PCI address, which a mode change keeps (render minors it renumbers):
amdgpu-<domain>-<bus>-<device>-<function>-<mode>-<memory mode>[-<partition>]. Reads sysfs and KFD; a change writes
the driver's files or calls amd-smi."""

from __future__ import annotations

from gpuhook.errors import GpuhookError
from gpuhook.frozen import replace
from gpuhook.vendors.amd.partitions import modes
from gpuhook.vendors.contract import DraDevice, Partition, Partitionable

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence

    from gpuhook.host.inventory import Gpu, VendorInventory
    from gpuhook.host.root import Root

COUNTS = {"SPX": 1, "DPX": 2, "QPX": 4, "CPX": 8}  # partitions of each compute mode
COUNTER = "xcd-{n}"


def offer(inv: VendorInventory, root: Root) -> tuple[Partitionable, ...]:
    """Every GPU with partition modes, with its counters and every partition of every mode. Reads sysfs and KFD."""
    from gpuhook.vendors.amd.dra import dra_devices

    groups: dict[str, list[DraDevice]] = {}
    for d in dra_devices(inv, root):
        groups.setdefault(d.gpu.parent or d.gpu.key(), []).append(d)
    out = []
    for key, devices in groups.items():
        g = devices[0].gpu
        compute, memory = modes(root, g.pci)
        computes = [m for m in _listed(root, g.pci, "available_compute_partition") if m in COUNTS]
        if not compute or not computes:
            continue
        memories = _listed(root, g.pci, "available_memory_partition") or [memory]
        whole = g if not g.parent else replace(g, uuid=key, parent="", slice="", profile="", place="", nodes=())
        out.append(partitionable(whole, devices, computes, memories))
    return tuple(out)


def partitionable(whole: Gpu, devices: Sequence[DraDevice], computes: Sequence[str],
                  memories: Sequence[str]) -> Partitionable:
    """The GPU `whole` (now published as `devices`: itself, or its partitions) offered as every partition of each
    compute mode with each memory mode. Pure."""
    xcds = max(COUNTS[m] for m in computes)
    totals: dict[str, int] = {}
    for d in devices:
        for name, value in d.capacity:
            totals[name] = totals.get(name, 0) + value
    inherited = [a for a in devices[0].attributes if a[0] not in ("type", "partitionProfile")]
    base = "amdgpu-" + whole.pci.replace(":", "-").replace(".", "-")
    parts = []
    for memory in memories:
        for compute in computes:
            n = COUNTS[compute]
            for i in range(n):
                tail = f"-{i}" if n > 1 else ""
                profile = "_".join(m.lower() for m in (compute, memory) if m)
                device = DraDevice(
                    name=f"{base}-{compute.lower()}{'-' + memory.lower() if memory else ''}{tail}", gpu=whole,
                    kind="gpu" if n == 1 else "partition", domain=devices[0].domain,
                    attributes=(("type", "amdgpu" if n == 1 else "amdgpu-partition"), ("partitionProfile", profile),
                                *inherited),
                    versions=devices[0].versions, numa_in_domain=devices[0].numa_in_domain,
                    capacity=tuple((k, v // n) for k, v in totals.items() if v // n))
                span = range(i * xcds // n, (i + 1) * xcds // n)
                parts.append(Partition(device=device, consumes=tuple((COUNTER.format(n=x), 1) for x in span),
                                       layout=(("compute", compute), ("memory", memory), ("index", str(i))),
                                       mode=f"{compute} {memory}".strip()))
    return Partitionable(gpu=whole, counter_set=f"{base}-counters",
                         counters=tuple((COUNTER.format(n=x), 1) for x in range(xcds)), partitions=tuple(parts))


def make(root: Root, gpu: Gpu, layout: tuple[tuple[str, str], ...]) -> str:
    """The GPU in the layout's modes (the GPU whole, SPX, for ()); the place of its partition (as discovery marks
    it: "<mode> <number> <memory mode>"; "" for SPX). GpuhookError with one line where the driver refuses. Writes
    the driver's files or calls amd-smi."""
    from gpuhook.vendors.amd.partitions import repartition

    asked = dict(layout) or {"compute": "SPX"}
    compute, memory, index = asked.get("compute", ""), asked.get("memory", ""), asked.get("index", "0")
    if compute not in COUNTS or not index.isdigit() or int(index) >= COUNTS[compute]:
        raise GpuhookError(f"AMD GPU {gpu.pci} has no partition {index} in {compute!r}")
    repartition(root, gpu.pci, {"compute": compute, **({"memory": memory} if memory else {})})
    if compute == "SPX":
        return ""
    _, now = modes(root, gpu.pci)
    return f"{compute} {int(index)}" + (f" {now}" if now else "")


def remove(root: Root, gpu: Gpu) -> None:
    """The GPU whole again (SPX; its memory mode is left). Writes the driver's files or calls amd-smi."""
    from gpuhook.vendors.amd.partitions import repartition

    repartition(root, gpu.pci, {"compute": "SPX"})


def _listed(root: Root, pci: str, name: str) -> list[str]:
    """The modes a sysfs file of the PCI device lists ([] where there is none)."""
    try:
        text = root.read_text(f"/sys/bus/pci/devices/{pci}/{name}")
    except OSError:
        return []
    return [m.strip().upper() for m in text.replace(",", " ").split() if m.strip()]
