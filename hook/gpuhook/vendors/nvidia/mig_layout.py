"""MIG layouts applied to a GPU through NVML, as NVIDIA's MIG manager applies its configs: MIG mode on or off, then
the GPU instances the layout names (each with one compute instance of its size), in the layout's order, after the
old ones are destroyed (compute instances first). A profile's name is NVML's: <slices>g.<memory GB>gb from the
profile's slice count and memory. The capability nodes the driver publishes for the new instances are made as
nvidia-modprobe makes them (/dev/nvidia-caps/nvidia-cap<minor>, mode from procfs), since the runtime refuses a MIG
device whose node is missing. Loads NVML; writes the driver's state and device nodes."""

from __future__ import annotations

import os
import stat
from collections import Counter

from gpuhook.errors import GpuhookError
from gpuhook.vendors.nvidia.mig import CAPS, NODE_DIR, parse_access, parse_devices

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from ctypes import c_void_p

    from gpuhook.host.inventory import Gpu
    from gpuhook.host.nvml_lib import Nvml
    from gpuhook.host.root import Root


MAX_INSTANCES = 7  # GPU instances a MIG GPU holds at most (seven 1g slices)


def apply(root: Root, library: str, gpu: Gpu, layout: dict[str, object], dry_run: bool = False) -> str:
    """Give `gpu` the layout's `mig` (a list of profile names; [] turns MIG off). What changed, '' for nothing;
    with `dry_run` every check, and what would change, without a write."""
    from gpuhook.host import nvml_lib

    unknown = sorted(set(layout) - {"mig"})
    asked = layout.get("mig")
    if unknown or not isinstance(asked, list) or not all(isinstance(p, str) for p in asked):
        raise GpuhookError(f"NVIDIA GPU {gpu.index}: a layout is mig = [profile names] (e.g. [\"3g.40gb\", "
                           f"\"1g.10gb\"], [] for MIG off)" + (f"; unknown key {unknown[0]!r}" if unknown else ""))
    if len(asked) > MAX_INSTANCES:
        raise GpuhookError(f"NVIDIA GPU {gpu.index}: mig names {len(asked)} profiles: a GPU holds at most "
                           f"{MAX_INSTANCES} MIG devices")
    wanted = [p.strip().lower() for p in asked]
    with nvml_lib.session(library) as nvml:
        try:
            h = nvml.handle(gpu.uuid)
            return _apply(nvml, root, gpu, h, wanted, dry_run)
        except nvml_lib.NvmlError as e:
            raise GpuhookError(f"NVIDIA GPU {gpu.index} ({gpu.uuid}): NVML: {e}") from e


def _apply(nvml: Nvml, root: Root, gpu: Gpu, h: c_void_p, wanted: list[str], dry_run: bool) -> str:
    from gpuhook.host.nvml_lib import NOT_SUPPORTED, NvmlError

    try:
        current, _ = nvml.mig_mode(h)
    except NvmlError as e:
        if e.code == NOT_SUPPORTED:
            raise GpuhookError(f"NVIDIA GPU {gpu.index} ({gpu.uuid}) is not MIG capable: mig {wanted} refused") \
                from e
        raise
    offered = profiles(nvml, h)
    missing = [p for p in wanted if p not in offered]
    if missing:
        raise GpuhookError(f"NVIDIA GPU {gpu.index} ({gpu.uuid}) has MIG profiles {', '.join(offered)}: "
                           f"{missing[0]} refused")
    have = _instances(nvml, h, offered) if current else []
    if bool(current) == bool(wanted) and Counter(n for n, _ in have) == Counter(wanted):
        return ""
    if dry_run:
        before = ", ".join(n for n, _ in have) if current else "MIG off"
        return f"{before or 'no MIG devices'} -> {', '.join(wanted) or 'MIG off'}"
    for _, gi in have:  # compute instances first: a GPU instance with one is in use
        for ci_profile in range(_ci_count()):
            for ci in listed(nvml.compute_instances, gi, ci_profile):
                nvml.destroy_compute_instance(ci)
        nvml.destroy_gpu_instance(gi)
    if bool(current) != bool(wanted):
        nvml.set_mig_mode(h, 1 if wanted else 0)
        now, pending = nvml.mig_mode(h)
        if bool(now) != bool(wanted):
            raise GpuhookError(f"NVIDIA GPU {gpu.index} ({gpu.uuid}): MIG mode {'on' if wanted else 'off'} is pending "
                               f"{pending}: reset the GPU with nothing running (nvidia-smi -r -i {gpu.index}), then "
                               "apply again")
    made: list[str] = []
    for name in wanted:
        profile_id, slices = offered[name]
        gi = nvml.create_gpu_instance(h, profile_id)
        ci_id = next((p for p in range(_ci_count()) if ci_slices(nvml, gi, p) == slices), None)
        if ci_id is None:
            raise GpuhookError(f"NVIDIA GPU {gpu.index}: no compute instance profile fills a {name} GPU instance; "
                               f"the GPU has {', '.join(made) or 'no MIG devices'} now")
        nvml.create_compute_instance(gi, ci_id)
        made.append(name)
    make_nodes(root, gpu)
    before = ", ".join(n for n, _ in have) if current else "MIG off"
    return f"{before or 'no MIG devices'} -> {', '.join(made) or 'MIG off'}"


def profiles(nvml: Nvml, h: c_void_p) -> dict[str, tuple[int, int]]:
    """NVML's GPU instance profiles of the GPU: name -> (profile id, slices), the first of each name."""
    from gpuhook.host.nvml_lib import GI_PROFILES, NvmlError

    out: dict[str, tuple[int, int]] = {}
    for p in range(GI_PROFILES):
        try:
            info = nvml.gi_profile(h, p)
        except NvmlError:
            continue
        name = f"{info.sliceCount}g.{(info.memorySizeMB + 1023) // 1024}gb"
        out.setdefault(name, (int(info.id), int(info.sliceCount)))
    return out


def _instances(nvml: Nvml, h: c_void_p, profiles: dict[str, tuple[int, int]]) -> list[tuple[str, c_void_p]]:
    return [(name, gi) for name, (pid, _) in profiles.items() for gi in listed(nvml.gpu_instances, h, pid)]


def _ci_count() -> int:
    from gpuhook.host.nvml_lib import CI_PROFILES

    return CI_PROFILES


def ci_slices(nvml: Nvml, gi: c_void_p, profile: int) -> int:
    """The slices of a compute instance profile in a GPU instance; -1 where it has no such profile."""
    from gpuhook.host.nvml_lib import NvmlError

    try:
        return int(nvml.ci_profile(gi, profile).sliceCount)
    except NvmlError:
        return -1


def listed(call: Callable[[c_void_p, int], list[c_void_p]], handle: c_void_p, profile: int) -> list[c_void_p]:
    """The instances NVML lists for a profile ([] where the GPU has no such profile)."""
    from gpuhook.host.nvml_lib import NvmlError

    try:
        return call(handle, profile)
    except NvmlError:
        return []


def make_nodes(root: Root, gpu: Gpu) -> None:
    """The capability nodes of the GPU's MIG devices the host lacks, as nvidia-modprobe makes them."""
    minor = next((n.minor for n in gpu.nodes if n.path.startswith("/dev/nvidia") and n.path[11:].isdigit()), None)
    try:
        major = parse_devices(root.read_text("/proc/devices"), "nvidia-caps")
    except OSError:
        major = None
    if minor is None or major is None:
        return
    base = f"{CAPS}/gpu{minor}/mig"
    for gi in (d for d in root.listdir(base) if d.startswith("gi")):
        for access in [f"{base}/{gi}/access", *(f"{base}/{gi}/{c}/access" for c in root.listdir(f"{base}/{gi}")
                                                  if c.startswith("ci"))]:
            try:
                text = root.read_text(access)
            except OSError:
                continue
            n = parse_access(text)
            mode = next((int(v.strip()) for k, _, v in (ln.partition(":") for ln in text.splitlines())
                         if k.strip() == "DeviceFileMode" and v.strip().isdigit()), 0o444)
            path = root.lexical(f"{NODE_DIR}/nvidia-cap{n}")
            if n is None or os.path.lexists(path):
                continue
            os.makedirs(os.path.dirname(path), mode=0o755, exist_ok=True)
            os.mknod(path, stat.S_IFCHR | (mode & 0o777), os.makedev(major, n))
