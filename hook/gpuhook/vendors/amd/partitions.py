"""AMD compute partitions (MI300X SPX/DPX/QPX/CPX, memory NPS1/NPS4): each partition is its own KFD node with its
own render node, numbered as ROCm numbers devices; this module says which physical GPU each one shares.

amdgpu reports the modes on the PCI device: `current_compute_partition` and `current_memory_partition`. In a mode
with several partitions, KFD ORs the partition's number into the function bits of each node's `location_id`, so
partition 3 of 0000:80:00.0 reports 0000:80:00.3; partition 0's render node sits on the PCI device, the others'
on platform devices (amdgpu_xcp_<N>). A node whose function-bit address is no PCI device but whose function-0
address has `current_compute_partition` is that device's partition. Reads sysfs.
"""

from __future__ import annotations

import os
import time

from gpuhook.frozen import replace

TYPE_CHECKING = False
if TYPE_CHECKING:
    from gpuhook.host.inventory import Gpu, VendorInventory
    from gpuhook.host.root import Root

COMPUTE = "current_compute_partition"
MEMORY = "current_memory_partition"


def physical(root: Root, pci: str) -> tuple[str, int]:
    """(the physical GPU's PCI address, the partition's number on it) of a KFD node's address; (pci, 0) for a
    node that is its own PCI device."""
    base, _, function = pci.rpartition(".")
    if function == "0" or root.exists(f"/sys/bus/pci/devices/{pci}/{COMPUTE}"):
        return pci, 0
    whole = f"{base}.0"
    if not root.exists(f"/sys/bus/pci/devices/{pci}") and root.exists(f"/sys/bus/pci/devices/{whole}/{COMPUTE}"):
        return whole, int(function)
    return pci, 0


def modes(root: Root, pci: str) -> tuple[str, str]:
    """(compute mode, memory mode) of a PCI device as amdgpu reports them; "" where the driver has no such file."""
    out = []
    for name in (COMPUTE, MEMORY):
        try:
            out.append(root.read_text(f"/sys/bus/pci/devices/{pci}/{name}").strip())
        except OSError:
            out.append("")
    return out[0], out[1]


def mark(root: Root, gpus: list[Gpu], parts: list[int]) -> list[Gpu]:
    """`gpus` (KFD order) with each partition of a GPU in a multi-partition mode marked: its parent (the physical
    GPU's unique id, else PCI address), its number on it, the modes, and the physical device's sysfs directory
    (where the tunables of all its partitions are); a partition gets its render node only, never the device's
    card node (a primary node reaches the whole GPU)."""
    by_device: dict[str, list[int]] = {}
    for i, g in enumerate(gpus):
        by_device.setdefault(g.pci, []).append(i)
    out = list(gpus)
    for pci, members in by_device.items():
        compute, memory = modes(root, pci)
        if len(members) < 2 and compute in ("", "SPX"):
            continue
        parent = next((gpus[i].uuid for i in members if gpus[i].uuid), "") or pci
        sysfs = os.path.realpath(root.lexical(f"/sys/bus/pci/devices/{pci}"))
        for order, i in enumerate(members):
            number = parts[i] if any(parts[j] for j in members) else order
            render = tuple(n for n in gpus[i].nodes if "/renderD" in n.path)
            missing = tuple(m for m in gpus[i].missing if "/renderD" in m)
            place = f"{compute or 'partition'} {number}" + (f" {memory}" if memory else "")
            out[i] = replace(gpus[i], uuid="", nodes=render, missing=missing, parent=parent, slice=str(number),
                             profile=compute, place=place, sysfs=root.to_host(sysfs))
    return out


def labels(root: Root, inv: VendorInventory) -> dict[str, str]:
    """The partition labels as AMD's node labeller names them (amd.com/gpu.compute-memory-partition=cpx_nps1 when
    every GPU reports one and the same modes; gpu.compute-partitioning-supported and
    gpu.memory-partitioning-supported: whether amdgpu exposes the modes) and gpuhook's own partitions count.
    Reads sysfs."""
    found = {modes(root, pci) for pci in dict.fromkeys(g.pci for g in inv.gpus)}
    parts = sum(1 for g in inv.gpus if g.parent)
    out = {"partitions": str(parts)} if parts else {}
    if not found:
        return out
    out["amd.com/gpu.compute-partitioning-supported"] = str(all(c for c, _ in found)).lower()
    out["amd.com/gpu.memory-partitioning-supported"] = str(all(m for _, m in found)).lower()
    if len(found) == 1:
        ((compute, memory),) = found
        if compute and memory:
            out["amd.com/gpu.compute-memory-partition"] = f"{compute}_{memory}".lower()
    return out


NAMES = {"compute": ("SPX", "DPX", "TPX", "QPX", "CPX"), "memory": ("NPS1", "NPS2", "NPS4", "NPS8")}


def repartition(root: Root, pci: str, layout: dict[str, object], wait: float = 60.0, dry_run: bool = False) -> str:
    """Put the GPU at `pci` in `layout`'s modes (`compute`: SPX..CPX, `memory`: NPS1..NPS8, each optional): through
    amd-smi where the host's libamd_smi loads, else amdgpu's sysfs files (memory first: a compute mode may need
    it), then wait until the driver reports them. What changed ('' when it was so already); GpuhookError naming
    what the GPU offers. With `dry_run` every check, and what would change, without a write. Writes the driver's
    files or calls its library."""
    from gpuhook.errors import GpuhookError

    unknown = sorted(set(layout) - {"compute", "memory"})
    if unknown:
        raise GpuhookError(f"AMD GPU {pci}: unknown key {unknown[0]!r}: an AMD layout has compute and memory")
    for key, value in layout.items():
        if not isinstance(value, str) or value.strip().upper() not in NAMES[key]:
            raise GpuhookError(f"AMD GPU {pci}: {key} = {str(value)[:40]!r}: expected one of "
                               f"{', '.join(NAMES[key])} (a quoted name)")
    want = {k: str(v).strip().upper() for k, v in layout.items()}
    now = dict(zip(("compute", "memory"), modes(root, pci), strict=True))
    changes = []
    for key, name, offered_file in (("memory", MEMORY, "available_memory_partition"),
                                    ("compute", COMPUTE, "available_compute_partition")):
        if key not in want or want[key] == now[key]:
            continue
        if not now[key]:
            raise GpuhookError(f"AMD GPU {pci} has no {name}: it cannot be partitioned ({key} {want[key]} refused)")
        offered = _offered(root, pci, offered_file)
        if offered and want[key] not in offered:
            raise GpuhookError(f"AMD GPU {pci} offers {key} partitions {', '.join(offered)}: {want[key]} refused")
        changes.append((key, name, want[key]))
    if not changes or dry_run:
        return ", ".join(f"{k} {now[k]} -> {m}" for k, _, m in changes)
    _write_modes(root, pci, changes)
    deadline = time.monotonic() + wait
    while dict(zip(("compute", "memory"), modes(root, pci), strict=True)) != {**now, **{k: m for k, _, m in changes}}:
        if time.monotonic() > deadline:
            raise GpuhookError(f"AMD GPU {pci} does not report {', '.join(f'{k} {m}' for k, _, m in changes)} "
                               f"{wait:g} s after it was set: see the kernel log (dmesg)")
        time.sleep(0.1)
    return ", ".join(f"{k} {now[k]} -> {m}" for k, _, m in changes)


def _offered(root: Root, pci: str, name: str) -> list[str]:
    try:
        text = root.read_text(f"/sys/bus/pci/devices/{pci}/{name}")
    except OSError:
        return []
    return [m.strip().upper() for m in text.replace(",", " ").split() if m.strip()]


def _write_modes(root: Root, pci: str, changes: list[tuple[str, str, str]]) -> None:
    """Through amd-smi (its library re-lays the devices), else the sysfs files amdgpu reads."""
    from gpuhook.errors import GpuhookError, TuningError
    from gpuhook.host import amd_smi_lib

    library = os.path.join(root.resolve("/opt/rocm"), "lib/libamd_smi.so")
    if os.path.exists(library):
        try:
            with amd_smi_lib.session(library) as smi:
                handle = smi.processors().get(pci)
                if handle is not None:
                    for key, _, mode in changes:
                        (smi.set_memory_partition if key == "memory" else smi.set_compute_partition)(handle, mode)
                    return
        except amd_smi_lib.AmdSmiError as e:
            raise GpuhookError(f"amd-smi cannot set {', '.join(f'{k} {m}' for k, _, m in changes)} on GPU {pci}: "
                               f"{e}") from e
        except TuningError:
            pass  # a library that does not start: the kernel's files still work
    device = root.lexical(f"/sys/bus/pci/devices/{pci}")
    for _, name, mode in changes:
        try:
            fd = os.open(f"{os.path.realpath(device)}/{name}", os.O_WRONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
            try:
                os.write(fd, (mode + "\n").encode())
            finally:
                os.close(fd)
        except OSError as e:
            raise GpuhookError(f"cannot write {mode} to {name} of GPU {pci}: {e.strerror}") from e
