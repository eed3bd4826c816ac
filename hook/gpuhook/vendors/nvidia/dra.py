"""NVIDIA's devices for Kubernetes' DRA: whole GPUs and MIG devices, with every attribute and capacity NVIDIA's own
DRA driver (gpu.nvidia.com, kubernetes-sigs/dra-driver-nvidia-gpu) publishes for them, under its names: type (gpu,
mig), uuid, productName, brand (its spelling: Tesla), architecture, cudaComputeCapability, driverVersion,
cudaDriverVersion, addressingMode (HMM, ATS, None: where the driver says), a MIG device's parentUUID and profile;
capacities memory, and a MIG device's multiprocessors, copyEngines, decoders, encoders, jpegEngines, ofaEngines
and memorySlice<N> (one for each memory slice its GPU instance sits on, where NVML tells the placement). The
facts gpuhook's own domain carried before (all but addressingMode and the MIG counts) are published bare too
(kubernetes/dra/devices.py). Device names follow its forms too: gpu-<minor>, and gpu-<minor>-mig-<profile>-<gi>-<ci>.
Its Fabric Manager attributes (gpuModuleID, partition<N>, behind a feature gate) and VFIO devices are not
published: gpuhook gives neither.

The facts come from discovery, NVML (compute capability, brand, memory, addressing mode; a MIG device's memory,
engines and placement) and the host's libcuda (the CUDA version). A MIG device's counts are its own (NVML's
device attributes), as NVIDIA's driver's are its GPU instance's: the same where the compute instance fills the GPU
instance, as a MIG device made by `nvidia-smi mig -cgi ... -C` does. What NVML cannot say is left out, never
guessed."""

from __future__ import annotations

from gpuhook.errors import DiscoveryError
from gpuhook.frozen import frozen
from gpuhook.vendors.contract import DraDevice
from gpuhook.vendors.nvidia.node_labels import cuda_version, family, library, memory_bytes

TYPE_CHECKING = False
if TYPE_CHECKING:
    from gpuhook.host.inventory import Gpu, VendorInventory
    from gpuhook.host.root import Root

DOMAIN = "gpu.nvidia.com"
_MIB = 1024 * 1024
_MAX_SLICES = 16  # memory slices a GPU has (8 on A100 and H100): a placement past this is no placement
# NVIDIA's MIG capacity names, by NVML's device attribute of the same count
_MIG_COUNTS = (("multiprocessors", "multiprocessorCount"), ("copyEngines", "sharedCopyEngineCount"),
               ("decoders", "sharedDecoderCount"), ("encoders", "sharedEncoderCount"),
               ("jpegEngines", "sharedJpegCount"), ("ofaEngines", "sharedOfaCount"))
# NVML's brands as NVIDIA's driver spells them, by gpuhook's word for each (host/nvml.brand_name)
_BRANDS = {"unknown": "Unknown", "quadro": "Quadro", "tesla": "Tesla", "nvs": "NVS", "grid": "Grid",
           "geforce": "GeForce", "titan": "Titan", "vapps": "NvidiaVApps", "vpc": "NvidiaVPC", "vcs": "NvidiaVCS",
           "vws": "NvidiaVWS", "cloudgaming": "NvidiaCloudGaming", "quadrortx": "QuadroRTX", "nvidiartx": "NvidiaRTX",
           "nvidia": "Nvidia", "geforcertx": "GeForceRTX", "titanrtx": "TitanRTX"}
# the architecture names NVIDIA's tools print, by GFD's family
_ARCHITECTURES = {"kepler": "Kepler", "maxwell": "Maxwell", "pascal": "Pascal", "volta": "Volta", "turing": "Turing",
                  "ampere": "Ampere", "ada-lovelace": "Ada Lovelace", "hopper": "Hopper", "blackwell": "Blackwell",
                  "rubin": "Rubin"}


def dra_devices(inv: VendorInventory, root: Root) -> tuple[DraDevice, ...]:
    """The GPUs not in MIG mode, and every MIG device. Loads NVML and the host's libcuda; reads procfs."""
    parents = {s.parent for s in inv.slices}
    facts, migs, cuda = _nvml(inv, root)
    common: list[tuple[str, str | int | bool]] = []
    if inv.driver_version:
        common.append(("driverVersion", inv.driver_version))
    if cuda:
        common.append(("cudaDriverVersion", cuda))
    versions = ("cudaComputeCapability", "driverVersion", "cudaDriverVersion")
    out = []
    by_key = {g.key(): g for g in inv.gpus}
    for g in inv.gpus:
        if g.key() in parents:
            continue  # in MIG mode: its MIG devices are what can be given
        gpu = facts.get(g.uuid)
        attrs = _gpu_attributes(g, gpu)
        out.append(DraDevice(name=f"gpu-{_minor(g)}", gpu=g, kind="gpu", domain=DOMAIN,
                             attributes=(("type", "gpu"), *attrs, *common), versions=versions,
                             capacity=(("memory", gpu.memory),) if gpu and gpu.memory else (),
                             domain_attributes=_addressing(gpu)))
    for s in inv.slices:
        parent = by_key.get(s.parent)
        gpu = facts.get(s.parent)
        attrs = _gpu_attributes(parent, gpu) if parent else []
        gi, ci = _place(s.place)
        counts = migs.get((s.parent, gi, ci), {})
        own = [("type", "mig"), *(("uuid", s.uuid),) * bool(s.uuid), ("parentUUID", s.parent),
               *(("profile", s.profile),) * bool(s.profile)]
        name = f"gpu-{_minor(parent or s)}-mig-{_label(s.profile) or 'unknown'}-{gi}-{ci}"
        mib = counts.get("memorySizeMB", 0)
        out.append(DraDevice(name=name, gpu=s, kind="mig", domain=DOMAIN,
                             attributes=(*own, *[a for a in attrs if a[0] != "uuid"], *common),
                             versions=versions, capacity=(("memory", mib * _MIB),) if mib else (),
                             domain_attributes=_addressing(gpu), domain_capacity=_mig_capacity(counts)))
    return tuple(out)


@frozen
class _Facts:
    """What NVML says of one GPU."""

    capability: str  # major.minor
    brand: str  # gpuhook's word for it (tesla)
    memory: int  # bytes, 0: unknown
    addressing: str  # HMM, ATS, None; "": NVML cannot say


def _gpu_attributes(g: Gpu, facts: _Facts | None) -> list[tuple[str, str | int | bool]]:
    """A GPU's own attributes (a MIG device's parent's, for it)."""
    attrs: list[tuple[str, str | int | bool]] = [("uuid", g.uuid)] if g.uuid else []
    if g.model:
        attrs.append(("productName", g.model))
    if facts is None:
        return attrs
    if _BRANDS.get(facts.brand):
        attrs.append(("brand", _BRANDS[facts.brand]))
    major, _, minor = facts.capability.partition(".")
    if major.isdigit() and minor.isdigit():
        attrs.append(("cudaComputeCapability", facts.capability))
        arch = _ARCHITECTURES.get(family(int(major), int(minor)))
        if arch:
            attrs.append(("architecture", arch))
    return attrs


def _addressing(facts: _Facts | None) -> tuple[tuple[str, str | int | bool], ...]:
    """addressingMode, where NVML tells it (NVIDIA's driver publishes it for GPUs and their MIG devices alike)."""
    return (("addressingMode", facts.addressing),) if facts and facts.addressing else ()


def _mig_capacity(counts: dict[str, int]) -> tuple[tuple[str, int], ...]:
    """A MIG device's counts under NVIDIA's capacity names, and a memorySlice<N> of 1 for each slice it sits on."""
    out = tuple((name, counts[key]) for name, key in _MIG_COUNTS if key in counts)
    start, size = counts.get("placementStart", -1), counts.get("placementSize", 0)
    if start >= 0 and 0 < size <= _MAX_SLICES and start + size <= _MAX_SLICES:
        out += tuple((f"memorySlice{n}", 1) for n in range(start, start + size))
    return out


def _nvml(inv: VendorInventory, root: Root) -> tuple[dict[str, _Facts], dict[tuple[str, int, int], dict[str, int]],
                                                    str]:
    """({GPU UUID: its facts}, {(GPU UUID, GI, CI): NVML's counts of the MIG device}, CUDA version); empty where NVML
    or libcuda cannot say."""
    from gpuhook.host import nvml

    cuda = cuda_version(inv, root) or ""
    facts: dict[str, _Facts] = {}
    migs: dict[tuple[str, int, int], dict[str, int]] = {}
    lib = library(inv, "libnvidia-ml.so.")
    if lib is None:
        return facts, migs, cuda
    try:
        with nvml.session(root.lexical(lib)) as pynvml:
            for g in inv.gpus:
                if not g.uuid:
                    continue
                capability, brand = nvml.device_facts(pynvml, g.uuid)
                facts[g.uuid] = _Facts(capability=capability, brand=brand, memory=memory_bytes(pynvml, g.uuid),
                                       addressing=nvml.addressing_mode(pynvml, g.uuid))
                if any(s.parent == g.uuid for s in inv.slices):
                    migs.update(nvml.mig_resources(pynvml, g.uuid))
            if not cuda:
                cuda = nvml.cuda_version(pynvml)
    except (DiscoveryError, ImportError):
        pass  # published without what NVML would have told
    return facts, migs, cuda


def _minor(g: Gpu) -> str:
    """The GPU's device minor (/dev/nvidia<N>), else its index."""
    for n in g.nodes:
        tail = n.path.removeprefix("/dev/nvidia")
        if tail != n.path and tail.isdigit():
            return tail
    return str(g.index)


def _place(place: str) -> tuple[int, int]:
    """(GI, CI) of a MIG device's place, gi<G>/ci<C>."""
    gi, _, ci = place.partition("/")
    g, c = gi.removeprefix("gi"), ci.removeprefix("ci")
    return (int(g) if g.isdigit() else 0), (int(c) if c.isdigit() else 0)


def _label(profile: str) -> str:
    """A profile as a DNS label's part, as NVIDIA's driver writes it: 1g.10gb -> 1g10gb."""
    return "".join(c for c in profile.lower().replace(".", "") if c.isalnum() or c == "-").strip("-")

