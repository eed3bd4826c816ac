"""NVIDIA MIG devices made on demand (KEP-4815's partitionable devices, [kubernetes] partitions = "dynamic"): each
MIG-capable GPU is offered whole and as every GPU instance profile at every placement NVML lists for it, over one
counter per memory slice (memory-slice-0 ... memory-slice-7 on an H100): a placement (start, size) takes the slices
it covers, the whole GPU takes them all, so that the scheduler never allocates two that overlap. NVML's placements
say where an instance may start; its slice count and memory bound the rest, so the memory slices are the one
counter the hardware needs (NVIDIA's driver counts multiprocessors and engines beside them, which placements imply).

Making one turns MIG mode on where it is off, makes the GPU instance at the allocated placement and one compute
instance of its size, then the capability nodes as nvidia-modprobe would (mig_layout.py); removing it destroys the
compute instance, then the GPU instance, and turns MIG mode off when it was the last. The whole GPU turns MIG mode
off where it is on with no instance left.
Loads NVML; writes the driver's state and device nodes."""

from __future__ import annotations

import contextlib

from gpuhook.errors import DiscoveryError, GpuhookError
from gpuhook.vendors.contract import DraDevice, Partition, Partitionable

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ctypes import c_void_p

    from gpuhook.host.inventory import Gpu, VendorInventory
    from gpuhook.host.nvml_lib import Nvml
    from gpuhook.host.root import Root

COUNTER = "memory-slice-{n}"
_MIB = 1024 * 1024


def offer(inv: VendorInventory, root: Root) -> tuple[Partitionable, ...]:
    """Every MIG-capable GPU with its counters and partitions; () where NVML cannot say. Loads NVML."""
    from gpuhook.frozen import replace
    from gpuhook.host import nvml_lib
    from gpuhook.vendors.nvidia.dra import dra_devices
    from gpuhook.vendors.nvidia.node_labels import library

    lib = library(inv, "libnvidia-ml.so.")
    if lib is None:
        return ()
    wholes = {d.gpu.key(): d for d in dra_devices(replace(inv, slices=()), root)}
    out = []
    try:
        with nvml_lib.session(root.lexical(lib)) as nvml:
            for g in inv.gpus:
                whole = wholes.get(g.key())
                if whole is not None and g.uuid:
                    found = _shapes(nvml, g.uuid)
                    if found:
                        out.append(partitionable(whole, found))
    except DiscoveryError:
        return ()
    return tuple(out)


def partitionable(whole: DraDevice, shapes: list[tuple[str, int, int, list[tuple[int, int]]]]) -> Partitionable:
    """The GPU of `whole` offered as itself and as each profile (name, memory MiB, multiprocessors, placements)
    at each placement. Pure."""
    slices = max((start + size for *_, places in shapes for start, size in places), default=0)
    counters = tuple((COUNTER.format(n=n), 1) for n in range(slices))
    base = whole.name  # gpu-<minor>
    inherited = [a for a in whole.attributes if a[0] not in ("type", "uuid")]
    parts = [Partition(device=whole, consumes=counters)]
    for name, mib, sms, places in shapes:
        capacity = tuple(c for c in (("memory", mib * _MIB), ("multiprocessors", sms)) if c[1])
        for start, size in places:
            device = DraDevice(name=f"{base}-mig-{_label(name)}-p{start}", gpu=whole.gpu, kind="mig",
                               domain=whole.domain,
                               attributes=(("type", "mig"), ("parentUUID", whole.gpu.uuid), ("profile", name),
                                           *inherited),
                               versions=whole.versions, capacity=capacity)
            parts.append(Partition(device=device,
                                   consumes=tuple((COUNTER.format(n=n), 1) for n in range(start, start + size)),
                                   layout=(("profile", name), ("start", str(start)), ("size", str(size)))))
    return Partitionable(gpu=whole.gpu, counter_set=f"{base}-counters", counters=counters, partitions=tuple(parts))


def make(root: Root, library: str, gpu: Gpu, layout: tuple[tuple[str, str], ...]) -> str:
    """The MIG device `layout` names made on `gpu` (its place, gi<G>/ci<C>), or for () the GPU whole (MIG mode
    off; ""). GpuhookError with one line where NVML refuses. Loads NVML; writes the driver's state."""
    from gpuhook.host import nvml_lib
    from gpuhook.vendors.nvidia.mig_layout import make_nodes

    asked = dict(layout)
    where = f"NVIDIA GPU {gpu.index} ({gpu.uuid})"
    try:
        with nvml_lib.session(library) as nvml:
            h = nvml.handle(gpu.uuid)
            if not asked:
                _whole(nvml, h, where)
                return ""
            gid = _make(nvml, h, where, asked)
    except nvml_lib.NvmlError as e:
        raise GpuhookError(f"{where}: NVML: {e}") from e
    make_nodes(root, gpu)
    return f"gi{gid}/ci{_first_ci(root, gpu, gid)}"


def remove(root: Root, library: str, gpu: Gpu, place: str) -> None:
    """The MIG device at `place` (gi<G>/ci<C>) destroyed, compute instance first; gone already is fine. Loads NVML;
    writes the driver's state."""
    from gpuhook.host import nvml_lib
    from gpuhook.host.nvml_lib import CI_PROFILES
    from gpuhook.vendors.nvidia.mig_layout import listed, profiles

    gi_text = place.partition("/")[0].removeprefix("gi")
    if not gi_text.isdigit():
        raise GpuhookError(f"NVIDIA GPU {gpu.index}: {place!r} is no MIG device's place")
    try:
        with nvml_lib.session(library) as nvml:
            h = nvml.handle(gpu.uuid)
            for pid, _ in profiles(nvml, h).values():
                for gi in listed(nvml.gpu_instances, h, pid):
                    if nvml.gi_id(gi) != int(gi_text):
                        continue
                    for ci_profile in range(CI_PROFILES):
                        for ci in listed(nvml.compute_instances, gi, ci_profile):
                            nvml.destroy_compute_instance(ci)
                    nvml.destroy_gpu_instance(gi)
            if not any(listed(nvml.gpu_instances, h, pid) for pid, _ in profiles(nvml, h).values()):
                with contextlib.suppress(nvml_lib.NvmlError):  # the last one gone: the GPU as it was, MIG off
                    nvml.set_mig_mode(h, 0)
    except nvml_lib.NvmlError as e:
        raise GpuhookError(f"NVIDIA GPU {gpu.index} ({gpu.uuid}): NVML: {e}") from e


def _shapes(nvml: Nvml, uuid: str) -> list[tuple[str, int, int, list[tuple[int, int]]]]:
    """The GPU's GPU instance profiles (name, memory MiB, multiprocessors, placements); [] where it is not MIG
    capable or NVML has no placements."""
    from gpuhook.host.nvml_lib import GI_PROFILES, NvmlError

    try:
        h = nvml.handle(uuid)
        nvml.mig_mode(h)
    except NvmlError:
        return []
    out: dict[str, tuple[str, int, int, list[tuple[int, int]]]] = {}
    for p in range(GI_PROFILES):
        try:
            info = nvml.gi_profile(h, p)
            places = nvml.gi_placements(h, int(info.id))
        except (NvmlError, AttributeError):  # no such profile, or a library without placements
            continue
        name = f"{info.sliceCount}g.{(info.memorySizeMB + 1023) // 1024}gb"
        if places and name not in out:
            out[name] = (name, int(info.memorySizeMB), int(info.multiprocessorCount), places)
    return list(out.values())


def _whole(nvml: Nvml, h: c_void_p, where: str) -> None:
    """MIG mode off, where it is on and no instance is left."""
    from gpuhook.vendors.nvidia.mig_layout import listed, profiles

    current, _ = nvml.mig_mode(h)
    if not current:
        return
    if any(listed(nvml.gpu_instances, h, pid) for pid, _ in profiles(nvml, h).values()):
        raise GpuhookError(f"{where} has MIG devices: it is not given whole until they go")
    nvml.set_mig_mode(h, 0)
    if nvml.mig_mode(h)[0]:
        raise GpuhookError(f"{where}: MIG mode off is pending: reset the GPU with nothing running")


def _make(nvml: Nvml, h: c_void_p, where: str, asked: dict[str, str]) -> int:
    """The GPU instance and its compute instance made; the GPU instance's id."""
    from gpuhook.host.nvml_lib import CI_PROFILES, NvmlError
    from gpuhook.vendors.nvidia.mig_layout import ci_slices, profiles

    name, start, size = asked.get("profile", ""), asked.get("start", ""), asked.get("size", "")
    found = profiles(nvml, h).get(name)
    if found is None or not start.isdigit() or not size.isdigit():
        raise GpuhookError(f"{where} has no MIG profile {name!r} at placement {start}:{size}")
    if not nvml.mig_mode(h)[0]:
        nvml.set_mig_mode(h, 1)
        if not nvml.mig_mode(h)[0]:
            raise GpuhookError(f"{where}: MIG mode on is pending: reset the GPU with nothing running")
    profile_id, slices = found
    try:
        gi = nvml.create_gpu_instance_at(h, profile_id, int(start), int(size))
    except NvmlError as e:
        raise GpuhookError(f"{where}: a {name} MIG device cannot be made at placement {start}:{size} (NVML: {e}): "
                           "another instance holds its memory slices") from e
    ci_id = next((p for p in range(CI_PROFILES) if ci_slices(nvml, gi, p) == slices), None)
    if ci_id is None:
        nvml.destroy_gpu_instance(gi)
        raise GpuhookError(f"{where}: no compute instance profile fills a {name} GPU instance")
    try:
        nvml.create_compute_instance(gi, ci_id)
    except NvmlError:
        nvml.destroy_gpu_instance(gi)
        raise
    return nvml.gi_id(gi)


def _first_ci(root: Root, gpu: Gpu, gid: int) -> int:
    """The compute instance the driver lists for GPU instance `gid` (0 where procfs does not say). Reads procfs."""
    from gpuhook.vendors.nvidia.mig import CAPS

    minor = gpu.nodes[0].minor if gpu.nodes else gpu.index
    names = root.listdir(f"{CAPS}/gpu{minor}/mig/gi{gid}") if root.exists(f"{CAPS}/gpu{minor}/mig/gi{gid}") else []
    found = sorted(int(n[2:]) for n in names if n.startswith("ci") and n[2:].isdigit())
    return found[0] if found else 0


def _label(profile: str) -> str:
    """A profile as a DNS label's part: 1g.10gb -> 1g10gb."""
    return "".join(c for c in profile.lower().replace(".", "") if c.isalnum())
