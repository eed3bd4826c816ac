"""Before a GPU container starts: do the image's CUDA / driver / arch / brand / ROCm needs fit the host?

Pure: the facts (the host's CUDA, NVML's answers, the image's ROCm and compat libraries) come gathered in
gpuhook.host.facts. Refusals say what the image needs, what the host has and the ways out. CUDA forward
compatibility: when the host driver is too old but the image ships newer compat libraries, the container may
start and its linker cache prefers the image's compat directory; the compat library is never loaded by
gpuhook (its version is read from its file name) and nothing from the image goes onto host paths.
Each vendor's user space is its stack part's (vendors/<v>/stack.py: CUDA, ROCm, DTK): the container's ROCm or DTK is
checked by that part against the host's driver; requirements (NVIDIA_REQUIRE_*, gpuhook.dev/require) speak of CUDA
and ROCm by name, and the vendors whose stacks those are answer for them (which release a driver runs, which driver
a release needs). No vendor is named here.
"""

from __future__ import annotations

from gpuhook.edits import Edits
from gpuhook.errors import PolicyError
from gpuhook.frozen import frozen
from gpuhook.request import requirements as require
from gpuhook.request.requirements import Condition, Facts, Requirement, version_tuple
from gpuhook.vendors.contract import CUDA, ROCM
from gpuhook.vendors.registry import get, stack

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping

    from gpuhook.host.facts import HostFacts
    from gpuhook.host.inventory import Gpu, VendorInventory

@frozen
class Verdict:
    """The container may start: with these extra edits, after these warnings."""

    edits: Edits = Edits()
    warnings: tuple[str, ...] = ()


def needs(selected: tuple[tuple[VendorInventory, tuple[Gpu, ...]], ...], env: Mapping[str, str],
          annotations: Mapping[str, str]) -> tuple[bool, tuple[str, ...]]:
    """(whether the host's CUDA version is needed, the GPUs whose NVML facts are) for `check`."""
    cuda = next((gpus for inv, gpus in selected if get(inv.vendor).STACK == CUDA), None)
    if cuda is None:
        return False, ()
    keys = {c.key for r in require.from_container(env, annotations) for alt in r.alternatives for c in alt}
    return "cuda" in keys, tuple(g.uuid for g in cuda) if keys & {"arch", "brand"} else ()


def cuda_vendor(selected: tuple[tuple[VendorInventory, tuple[Gpu, ...]], ...]) -> str:
    """The selected vendor whose stack is CUDA (whose driver's CUDA and NVML facts requirements read); ""."""
    return next((inv.vendor for inv, _ in selected if get(inv.vendor).STACK == CUDA), "")


def check(selected: tuple[tuple[VendorInventory, tuple[Gpu, ...]], ...], env: Mapping[str, str],
          annotations: Mapping[str, str], facts: HostFacts, rocm_policy: str = "warn",
          user_rocm: str | None = None) -> Verdict:
    """Raise PolicyError when the image cannot work on the selected GPUs; else the Verdict.
    `user_rocm` is the ROCm the container will run when it is not the image's (gpuhook.dev/host-rocm)."""
    requirements = require.from_container(env, annotations)
    warnings: list[str] = []
    edits = Edits()
    by_vendor = {inv.vendor: (inv, gpus) for inv, gpus in selected}
    by_stack = {get(v).STACK: (inv, gpus) for v, (inv, gpus) in by_vendor.items() if get(v).STACK}
    strict = rocm_policy == "strict"
    rocm_release = None
    if ROCM in by_stack:
        inv = by_stack[ROCM][0]
        part = stack(inv.vendor)
        rocm_release = part.release_of_driver(inv.driver_version) if inv.driver_version else None
        user = user_rocm or facts.image_rocm
        warned = part.check_release(inv, user, strict) if user else None
        warnings += [warned] if warned else []
    for vendor, release in facts.image_stacks:
        if vendor in by_vendor:
            warned = stack(vendor).check_release(by_vendor[vendor][0], release, strict)
            warnings += [warned] if warned else []
    cuda = by_stack.get(CUDA)
    for req in requirements:
        if cuda is None and req.source != require.ANNOTATION:
            continue  # NVIDIA_REQUIRE_* speak of CUDA's drivers only
        for gpu, host in _facts(cuda, facts, requirements, rocm_release, warnings):
            cond = require.unmet(req, host)
            if cond is None:
                continue
            compat = _forward_compat(cuda[0], facts, host) if cond.key == "cuda" and cuda else None
            if compat and require.unmet(req, Facts(cuda=compat[1], driver=host.driver, arch=host.arch,
                                                   brand=host.brand)) is None:
                edits = Edits(ldcache_dirs=(compat[0],))
                warnings.append(f"host driver {host.driver} supports CUDA {host.cuda}; using the image's CUDA "
                                f"{compat[1]} forward-compatibility libraries in {compat[0]}")
                continue
            raise PolicyError(_message(req, cond, host, gpu, cuda[0] if cuda else None))
    return Verdict(edits, tuple(warnings))


def _facts(selected: tuple[VendorInventory, tuple[Gpu, ...]] | None, facts: HostFacts,
           requirements: tuple[Requirement, ...], rocm_release: str | None,
           warnings: list[str]) -> list[tuple[Gpu | None, Facts]]:
    """The facts requirements are held to, per GPU of CUDA's vendor where they name arch or brand."""
    if selected is None:
        return [(None, Facts(rocm=rocm_release))]
    inv, gpus = selected
    keys = {c.key for r in requirements for alt in r.alternatives for c in alt}
    cuda = facts.host_cuda if "cuda" in keys else None
    if "cuda" in keys and cuda is None and facts.cuda_unknown:
        warnings.append(f"cannot tell which CUDA the host driver supports ({facts.cuda_unknown}); "
                        "cuda requirements unchecked")
    if not keys & {"arch", "brand"} or not gpus:
        return [(None, Facts(cuda=cuda, driver=inv.driver_version, rocm=rocm_release))]
    return [(gpu, Facts(cuda=cuda, driver=inv.driver_version, arch=facts.gpu_facts(gpu.uuid)[0],
                        brand=facts.gpu_facts(gpu.uuid)[1], rocm=rocm_release)) for gpu in gpus]


def _forward_compat(inv: VendorInventory, facts: HostFacts, host: Facts) -> tuple[str, str] | None:
    """(compat dir inside the image, CUDA it provides) when the image's compat libcuda is newer than the host's."""
    if not facts.image_read or host.driver is None:
        return None
    best = max(facts.compat_versions, key=version_tuple, default=None)
    if best is None or version_tuple(best)[0] <= version_tuple(host.driver)[0]:
        return None
    cuda = stack(inv.vendor).release_of_driver(best)
    return (facts.compat_dir, cuda) if cuda else None


def _message(req: Requirement, cond: Condition, facts: Facts, gpu: Gpu | None, inv: VendorInventory | None) -> str:
    way_out = ("or set NVIDIA_DISABLE_REQUIRE=1" if req.source != require.ANNOTATION
               else f"or change {require.ANNOTATION}")
    where = f" ({req.source}={req.raw!r})" if req.source not in ("CUDA_VERSION", "NVIDIA_REQUIRE_CUDA") else ""
    if cond.key == "cuda":
        fix = stack(inv.vendor).min_driver(cond.value) if inv else None
        upgrade = f"upgrade the driver to >= {fix}" if fix else "upgrade the driver"
        return (f"image requires {cond}{where} but the host driver {facts.driver} supports CUDA {facts.cuda}: "
                f"{upgrade}, use an image for CUDA <= {facts.cuda}, {way_out}")
    if cond.key == "driver":
        return f"image requires {cond}{where} but the host driver is {facts.driver}: change the driver, {way_out}"
    if cond.key == "rocm":
        return (f"image requires {cond}{where} but the host amdgpu driver belongs to ROCm {facts.rocm}: "
                f"change the host driver {way_out}")
    which = f"GPU {gpu.index} ({gpu.uuid})" if gpu else "the GPU"
    have = facts.arch if cond.key == "arch" else facts.brand
    return (f"image requires {cond}{where} but {which} has {cond.key} {have}: pick other GPUs with "
            f"gpuhook.dev/gpus, use an image built for {cond.key} {have}, {way_out}")
