"""NVIDIA's node labels: gpuhook's own (`cuda`) and the keys NVIDIA's GPU Feature Discovery publishes
(`nvidia.com/gpu.product`, `nvidia.com/cuda.driver-version.major`, ...), in GFD's value formats, so that
nodeSelectors written for GFD pick gpuhook's nodes too.

GFD describes one GPU model per node; with several models gpuhook describes the first GPU's (in PCI order)
and counts the GPUs of that model. The CUDA version is asked of the host's libcuda, compute capability,
memory and MIG support of its NVML; what they cannot tell is left out (mig.capable stays false).

MIG, as GFD labels it under a strategy ([kubernetes] mig_strategy): `mig.strategy`; with `single` (every MIG
device is an nvidia.com/gpu, so every GPU must be in MIG mode with one profile) gpu.count, gpu.product
(<product>-MIG-<profile>), gpu.memory and gpu.slices.gi/ci describe the MIG devices; with `mixed` each profile
gets mig-<profile>.count, .memory, .slices.gi and .slices.ci.
"""

from __future__ import annotations

import os

from gpuhook.errors import DiscoveryError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from types import ModuleType

    from gpuhook.host.inventory import VendorInventory
    from gpuhook.host.root import Root

PREFIX = "nvidia.com/"
_MIB = 1024 * 1024
# GFD's architecture families by compute-capability major (7 and 8 also look at the minor: see `family`)
_FAMILIES = {1: "tesla", 2: "fermi", 3: "kepler", 5: "maxwell", 6: "pascal", 9: "hopper", 10: "blackwell",
             12: "blackwell", 13: "rubin"}
_PCI_MODES = {"0x0302": "compute", "0x0300": "graphics"}  # PCI class 3D controller / VGA, as GFD's gpu.mode


def labels(inv: VendorInventory, root: Root, replicas: int, strategy: str = "none",
           sharing: str = "time-slicing") -> dict[str, str]:
    """gpuhook's `cuda` and GFD's nvidia.com/ labels (MIG's under `strategy`). Loads the host's libcuda and NVML,
    reads PCI sysfs."""
    cuda = cuda_version(inv, root)
    out = {"cuda": cuda} if cuda else {}
    if not inv.gpus:
        return out  # as GFD: no device labels without GPUs
    first = inv.gpus[0]
    capability, memory, mig = _nvml_facts(inv, root, first.uuid)
    out.update(gfd(model=first.model, count=sum(g.model == first.model for g in inv.gpus),
                   driver=inv.driver_version or "", cuda=cuda or "", capability=capability, memory_mib=memory,
                   mig_capable=mig, mode=_mode(root, [g.pci for g in inv.gpus]), replicas=replicas,
                   sharing=sharing))
    if strategy != "none":
        out.update(mig_labels(strategy, first.model, _mig_devices(inv, root), len(inv.gpus)))
    return out


def mig_labels(strategy: str, model: str, devices: list[tuple[str, str, int]], gpus: int) -> dict[str, str]:
    """GFD's MIG labels (full keys) for MIG devices as (parent GPU, profile, memory MiB) under `strategy`. Pure."""
    out = {"mig.strategy": strategy}
    profiles = sorted({p for _, p, _ in devices if p})
    if strategy == "single":
        in_mig = len({parent for parent, _, _ in devices})
        if devices and in_mig == gpus and len(profiles) == 1:  # else GFD's whole-GPU labels stand
            gi, ci = _slices(profiles[0])
            out.update({"gpu.count": str(len(devices)), "gpu.product": f"{sanitise(model)}-MIG-{profiles[0]}",
                        "gpu.memory": str(devices[0][2]), "gpu.slices.gi": str(gi), "gpu.slices.ci": str(ci)})
    elif strategy == "mixed":
        for profile in profiles:
            same = [d for d in devices if d[1] == profile]
            gi, ci = _slices(profile)
            out.update({f"mig-{profile}.count": str(len(same)), f"mig-{profile}.memory": str(same[0][2]),
                        f"mig-{profile}.slices.gi": str(gi), f"mig-{profile}.slices.ci": str(ci)})
    return {PREFIX + k: v for k, v in out.items()}


def _slices(profile: str) -> tuple[int, int]:
    """(GI slices, CI slices) of a profile name: 3g.40gb -> (3, 3); 1c.2g.20gb -> (2, 1)."""
    parts = profile.split(".")
    gi = next((int(p[:-1]) for p in parts if p.endswith("g") and p[:-1].isdigit()), 0)
    ci = next((int(p[:-1]) for p in parts if p.endswith("c") and p[:-1].isdigit()), gi)
    return gi, ci


def _mig_devices(inv: VendorInventory, root: Root) -> list[tuple[str, str, int]]:
    """(parent GPU UUID, profile, memory MiB) of every MIG device NVML reports; [] when it cannot say."""
    lib = library(inv, "libnvidia-ml.so.")
    if lib is None:
        return []
    from gpuhook.host import nvml

    try:
        with nvml.session(root.lexical(lib)) as pynvml:
            return [(key[0], profile, mib) for g in inv.gpus if g.uuid
                    for key, (_, profile, mib) in sorted(nvml.mig_devices(pynvml, g.uuid).items())]
    except (DiscoveryError, ImportError):
        return []


def gfd(*, model: str, count: int, driver: str, cuda: str, capability: str, memory_mib: int, mig_capable: bool,
        mode: str, replicas: int, sharing: str = "time-slicing") -> dict[str, str]:
    """GFD's labels (full keys) for `count` GPUs of `model` shared `replicas` ways by `sharing` (time-slicing, mps);
    "" or 0 for what is unknown leaves its labels out."""
    shared = replicas > 1
    out = {"gpu.present": "true", "gpu.count": str(count), "gpu.replicas": str(replicas),
           "gpu.sharing-strategy": sharing if shared else "none", "gpu.mode": mode,
           "mig.capable": "true" if mig_capable else "false"}
    product = sanitise(model)
    if product:
        out["gpu.product"] = f"{product}-SHARED" if shared else product
    if memory_mib:
        out["gpu.memory"] = str(memory_mib)
    major, _, minor = capability.partition(".")
    if major.isdigit() and minor.isdigit() and int(major):
        out.update({"gpu.family": family(int(major), int(minor)), "gpu.compute.major": major,
                    "gpu.compute.minor": minor})
    if driver:
        parts = driver.split(".")
        d_major, d_minor, d_rev = parts[0], parts[1] if len(parts) > 1 else "", parts[2] if len(parts) > 2 else ""
        out.update({"cuda.driver-version.major": d_major, "cuda.driver-version.minor": d_minor,
                    "cuda.driver-version.revision": d_rev, "cuda.driver-version.full": driver,
                    "cuda.driver.major": d_major, "cuda.driver.minor": d_minor, "cuda.driver.rev": d_rev})
    if cuda:
        c_major, _, c_minor = cuda.partition(".")
        out.update({"cuda.runtime-version.major": c_major, "cuda.runtime-version.minor": c_minor,
                    "cuda.runtime-version.full": cuda, "cuda.runtime.major": c_major, "cuda.runtime.minor": c_minor})
    return {PREFIX + k: v for k, v in out.items()}


def family(major: int, minor: int) -> str:
    """GFD's architecture family of compute capability major.minor (hopper for 9.0), `undefined` if unknown."""
    if major == 7:
        return "volta" if minor < 5 else "turing"
    if major == 8:
        return "ada-lovelace" if minor == 9 else "ampere"
    return _FAMILIES.get(major, "undefined")


def sanitise(text: str) -> str:
    """GFD's sanitising: characters outside [A-Za-z0-9-_. ] dropped, blanks collapsed, words joined by '-'."""
    kept = "".join(c for c in text if (c.isascii() and c.isalnum()) or c in "-_. ")
    return "-".join(kept.split())


def cuda_version(inv: VendorInventory, root: Root) -> str | None:
    """The CUDA version the driver supports, asked of the host's libcuda; None when it cannot say."""
    from gpuhook.host import libcuda

    lib = library(inv, "libcuda.so.")
    if lib is None:
        return None
    try:
        return libcuda.driver_cuda_version(root.lexical(lib))
    except DiscoveryError:
        return None


def _nvml_facts(inv: VendorInventory, root: Root, uuid: str) -> tuple[str, int, bool]:
    """(compute capability, total memory in MiB, MIG capable) of one GPU from the host's NVML; ("", 0, False)
    for what it cannot tell (a GPU or an NVML without MIG support is not MIG capable)."""
    lib = library(inv, "libnvidia-ml.so.")
    if lib is None:
        return "", 0, False
    from gpuhook.host import nvml

    try:
        with nvml.session(root.lexical(lib)) as pynvml:
            capability = nvml.device_facts(pynvml, uuid)[0]
            return capability, _memory_mib(pynvml, uuid), _mig_capable(pynvml, uuid)
    except (DiscoveryError, ImportError):
        return "", 0, False


def _memory_mib(pynvml: ModuleType, uuid: str) -> int:
    return memory_bytes(pynvml, uuid) // _MIB


def memory_bytes(pynvml: ModuleType, uuid: str) -> int:
    """A GPU's total memory as NVML reports it; 0 where it cannot say."""
    try:
        return int(pynvml.nvmlDeviceGetMemoryInfo(pynvml.nvmlDeviceGetHandleByUUID(uuid)).total)
    except pynvml.NVMLError:
        return 0


def _mig_capable(pynvml: ModuleType, uuid: str) -> bool:
    try:
        pynvml.nvmlDeviceGetMigMode(pynvml.nvmlDeviceGetHandleByUUID(uuid))
    except pynvml.NVMLError:  # NOT_SUPPORTED, or a library without the call
        return False
    return True


def _mode(root: Root, pcis: list[str]) -> str:
    """GFD's gpu.mode from the GPUs' PCI class: compute (3D controller), graphics (VGA), unknown when they
    differ; compute where sysfs does not say (a data-centre GPU's class)."""
    modes = set()
    for pci in pcis:
        try:
            modes.add(_PCI_MODES.get(root.read_text(f"/sys/bus/pci/devices/{pci}/class").strip()[:6], "unknown"))
        except OSError:
            continue
    return modes.pop() if len(modes) == 1 else "unknown" if modes else "compute"


def library(inv: VendorInventory, prefix: str) -> str | None:
    """The driver's file whose name starts with `prefix` (libcuda.so., libnvidia-ml.so.), host-absolute; None."""
    return next((f.source for f in inv.files if os.path.basename(f.source).startswith(prefix)), None)
