"""NVIDIA's devices for Kubernetes' DRA: whole GPUs and MIG devices, with the attributes and capacities NVIDIA's
own DRA driver (gpu.nvidia.com) publishes where the two overlap: type (gpu, mig), uuid, productName, brand,
architecture, cudaComputeCapability, driverVersion, cudaDriverVersion, and a MIG device's parentUUID and profile;
memory as a capacity. Device names follow its forms too: gpu-<minor>, and gpu-<minor>-mig-<profile>-<gi>-<ci>.

The facts come from discovery, NVML (compute capability, brand, memory; a MIG device's memory) and the host's
libcuda (the CUDA version). What NVML cannot say is left out, never guessed."""

from __future__ import annotations

from gpuhook.errors import DiscoveryError
from gpuhook.vendors.contract import DraDevice
from gpuhook.vendors.nvidia.node_labels import cuda_version, family, library, memory_bytes

TYPE_CHECKING = False
if TYPE_CHECKING:
    from gpuhook.host.inventory import Gpu, VendorInventory
    from gpuhook.host.root import Root

DOMAIN = "gpu.nvidia.com"
_MIB = 1024 * 1024
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
        attrs, memory = _gpu_attributes(g, facts.get(g.uuid))
        out.append(DraDevice(name=f"gpu-{_minor(g)}", gpu=g, kind="gpu", domain=DOMAIN,
                             attributes=(("type", "gpu"), *attrs, *common), versions=versions,
                             capacity=(("memory", memory),) if memory else ()))
    for s in inv.slices:
        parent = by_key.get(s.parent)
        attrs, _ = _gpu_attributes(parent, facts.get(s.parent)) if parent else ([], 0)
        gi, ci = _place(s.place)
        mib = migs.get((s.parent, gi, ci), 0)
        own = [("type", "mig"), *(("uuid", s.uuid),) * bool(s.uuid), ("parentUUID", s.parent),
               *(("profile", s.profile),) * bool(s.profile)]
        name = f"gpu-{_minor(parent or s)}-mig-{_label(s.profile) or 'unknown'}-{gi}-{ci}"
        out.append(DraDevice(name=name, gpu=s, kind="mig", domain=DOMAIN,
                             attributes=(*own, *[a for a in attrs if a[0] != "uuid"], *common),
                             versions=versions, capacity=(("memory", mib * _MIB),) if mib else ()))
    return tuple(out)


def _gpu_attributes(g: Gpu, facts: tuple[str, str, int] | None) -> tuple[list[tuple[str, str | int | bool]], int]:
    """A GPU's own attributes and its memory in bytes (0: unknown)."""
    attrs: list[tuple[str, str | int | bool]] = [("uuid", g.uuid)] if g.uuid else []
    if g.model:
        attrs.append(("productName", g.model))
    if facts is None:
        return attrs, 0
    capability, brand, memory = facts
    if brand:
        attrs.append(("brand", brand))
    major, _, minor = capability.partition(".")
    if major.isdigit() and minor.isdigit():
        attrs.append(("cudaComputeCapability", capability))
        arch = _ARCHITECTURES.get(family(int(major), int(minor)))
        if arch:
            attrs.append(("architecture", arch))
    return attrs, memory


def _nvml(inv: VendorInventory, root: Root) -> tuple[dict[str, tuple[str, str, int]],
                                                    dict[tuple[str, int, int], int], str]:
    """({GPU UUID: (compute capability, brand, memory bytes)}, {(GPU UUID, GI, CI): MIG memory MiB}, CUDA
    version); empty where NVML or libcuda cannot say."""
    from gpuhook.host import nvml

    cuda = cuda_version(inv, root) or ""
    facts: dict[str, tuple[str, str, int]] = {}
    migs: dict[tuple[str, int, int], int] = {}
    lib = library(inv, "libnvidia-ml.so.")
    if lib is None:
        return facts, migs, cuda
    try:
        with nvml.session(root.lexical(lib)) as pynvml:
            for g in inv.gpus:
                if not g.uuid:
                    continue
                capability, brand = nvml.device_facts(pynvml, g.uuid)
                facts[g.uuid] = (capability, brand, memory_bytes(pynvml, g.uuid))
                if any(s.parent == g.uuid for s in inv.slices):
                    migs.update({k: mib for k, (_, _, mib) in nvml.mig_devices(pynvml, g.uuid).items()})
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

