"""Before a GPU container starts: do the image's CUDA / driver / arch / brand / ROCm needs fit the host?

Pure: the facts (the host's CUDA, NVML's answers, the image's ROCm and compat libraries) come gathered in
gpuhook.host.facts. Refusals say what the image needs, what the host has and the ways out. CUDA forward
compatibility: when the host driver is too old but the image ships newer compat libraries, the container may
start and its linker cache prefers the image's compat directory; the compat library is never loaded by
gpuhook (its version is read from its file name) and nothing from the image goes onto host paths.
CUDA requirements are NVIDIA's, ROCm windows AMD's: they are looked up by those vendors' names. Any other vendor's
user space (its STACK, e.g. Hygon's DTK) is checked against the window its module gives for the host's driver.
"""

from __future__ import annotations

from gpuhook.edits import Edits
from gpuhook.errors import PolicyError
from gpuhook.frozen import frozen
from gpuhook.host import rocm
from gpuhook.request import requirements as require
from gpuhook.request.requirements import Condition, Facts, Requirement, in_window, version_tuple
from gpuhook.vendors.registry import get, stack

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping

    from gpuhook.host.facts import HostFacts
    from gpuhook.host.inventory import Gpu, VendorInventory

# Minimum Linux x86_64 driver of each CUDA toolkit release (NVIDIA CUDA Toolkit release notes,
# "CUDA Toolkit and Corresponding Driver Versions").
CUDA_MIN_DRIVER: tuple[tuple[str, str], ...] = (
    ("11.0", "450.36.06"), ("11.1", "455.23"), ("11.2", "460.27.03"), ("11.3", "465.19.01"),
    ("11.4", "470.42.01"), ("11.5", "495.29.05"), ("11.6", "510.39.01"), ("11.7", "515.43.04"),
    ("11.8", "520.61.05"), ("12.0", "525.60.13"), ("12.1", "530.30.02"), ("12.2", "535.54.03"),
    ("12.3", "545.23.06"), ("12.4", "550.54.14"), ("12.5", "555.42.02"), ("12.6", "560.28.03"),
    ("12.8", "570.26"), ("12.9", "575.51.03"), ("13.0", "580.65.06"),
)


@frozen
class Verdict:
    """The container may start: with these extra edits, after these warnings."""

    edits: Edits = Edits()
    warnings: tuple[str, ...] = ()


def needs(selected: tuple[tuple[VendorInventory, tuple[Gpu, ...]], ...], env: Mapping[str, str],
          annotations: Mapping[str, str]) -> tuple[bool, tuple[str, ...]]:
    """(whether the host's CUDA version is needed, the GPUs whose NVML facts are) for `check`."""
    nvidia = next((gpus for inv, gpus in selected if inv.vendor == "nvidia"), None)
    if nvidia is None:
        return False, ()
    keys = {c.key for r in require.from_container(env, annotations) for alt in r.alternatives for c in alt}
    return "cuda" in keys, tuple(g.uuid for g in nvidia) if keys & {"arch", "brand"} else ()


def check(selected: tuple[tuple[VendorInventory, tuple[Gpu, ...]], ...], env: Mapping[str, str],
          annotations: Mapping[str, str], facts: HostFacts, rocm_policy: str = "warn",
          user_rocm: str | None = None) -> Verdict:
    """Raise PolicyError when the image cannot work on the selected GPUs; else the Verdict.
    `user_rocm` is the ROCm the container will run when it is not the image's (gpuhook.dev/host-rocm)."""
    requirements = require.from_container(env, annotations)
    warnings: list[str] = []
    edits = Edits()
    by_vendor = {inv.vendor: (inv, gpus) for inv, gpus in selected}
    rocm_release = None
    if "amd" in by_vendor:
        rocm_release = _check_rocm(by_vendor["amd"][0], facts, rocm_policy, warnings, user_rocm)
    for vendor, release in facts.image_stacks:
        if vendor in by_vendor:
            _check_stack(by_vendor[vendor][0], release, rocm_policy, warnings)
    nvidia = by_vendor.get("nvidia")
    for req in requirements:
        if nvidia is None and req.source != require.ANNOTATION:
            continue  # NVIDIA_REQUIRE_* speak of NVIDIA drivers only
        for gpu, host in _facts(nvidia, facts, requirements, rocm_release, warnings):
            cond = require.unmet(req, host)
            if cond is None:
                continue
            compat = _forward_compat(facts, host) if cond.key == "cuda" and nvidia else None
            if compat and require.unmet(req, Facts(compat[1], host.driver, host.arch, host.brand)) is None:
                edits = Edits(ldcache_dirs=(compat[0],))
                warnings.append(f"host driver {host.driver} supports CUDA {host.cuda}; using the image's CUDA "
                                f"{compat[1]} forward-compatibility libraries in {compat[0]}")
                continue
            raise PolicyError(_message(req, cond, host, gpu))
    return Verdict(edits, tuple(warnings))


def min_driver(cuda: str) -> str | None:
    """The oldest Linux driver for CUDA release `cuda` (None when newer than this table)."""
    want = version_tuple(cuda)[:2]
    for release, driver in CUDA_MIN_DRIVER:
        if version_tuple(release)[:2] >= want:
            return driver
    return None


def cuda_of_driver(driver: str) -> str | None:
    """The newest CUDA release a driver version supports, by the table."""
    have = version_tuple(driver)
    found = None
    for release, minimum in CUDA_MIN_DRIVER:
        if version_tuple(minimum) <= have:
            found = release
    return found


def _facts(nvidia: tuple[VendorInventory, tuple[Gpu, ...]] | None, facts: HostFacts,
           requirements: tuple[Requirement, ...], rocm_release: str | None,
           warnings: list[str]) -> list[tuple[Gpu | None, Facts]]:
    if nvidia is None:
        return [(None, Facts(rocm=rocm_release))]
    inv, gpus = nvidia
    keys = {c.key for r in requirements for alt in r.alternatives for c in alt}
    cuda = facts.host_cuda if "cuda" in keys else None
    if "cuda" in keys and cuda is None and facts.cuda_unknown:
        warnings.append(f"cannot tell which CUDA the host driver supports ({facts.cuda_unknown}); "
                        "cuda requirements unchecked")
    if not keys & {"arch", "brand"} or not gpus:
        return [(None, Facts(cuda, inv.driver_version, rocm=rocm_release))]
    return [(gpu, Facts(cuda, inv.driver_version, *facts.gpu_facts(gpu.uuid), rocm_release)) for gpu in gpus]


def _forward_compat(facts: HostFacts, host: Facts) -> tuple[str, str] | None:
    """(compat dir inside the image, CUDA it provides) when the image's compat libcuda is newer than the host's."""
    if not facts.image_read or host.driver is None:
        return None
    best = max(facts.compat_versions, key=version_tuple, default=None)
    if best is None or version_tuple(best)[0] <= version_tuple(host.driver)[0]:
        return None
    cuda = cuda_of_driver(best)
    return (facts.compat_dir, cuda) if cuda else None


def _check_rocm(inv: VendorInventory, facts: HostFacts, policy: str, warnings: list[str],
                user_rocm: str | None = None) -> str | None:
    """The host KMD's ROCm release (for rocm requirements); checks the container's ROCm against its window."""
    release = rocm.release_of_driver(inv.driver_version) if inv.driver_version else None
    user = user_rocm or facts.image_rocm
    if user is None:
        return release
    if inv.driver_version is None:
        warnings.append(f"the image ships ROCm {user} but the host runs the in-kernel amdgpu driver, which has "
                        "no version to check against AMD's support matrix")
        return release
    if release is None:
        warnings.append(f"the host's amdgpu driver {inv.driver_version} is not in gpuhook's table of ROCm "
                        f"releases; the image's ROCm {user} was not checked")
        return release
    if rocm.supported(user, release) is False:
        lo, hi = rocm.window(release) or ("?", "?")
        msg = (f"the image ships ROCm {user} but the host amdgpu driver {inv.driver_version} (ROCm {release}) "
               f"supports ROCm user space {lo} to {hi}: use an image with ROCm {lo}-{hi} or a host driver "
               f"that supports {user}")
        if policy == "strict":
            raise PolicyError(msg + ' (refused by [policy] rocm_compatibility = "strict")')
        warnings.append(msg)
    return release


def _check_stack(inv: VendorInventory, release: str, policy: str, warnings: list[str]) -> None:
    """The image's release of a vendor's user space (its STACK: Hygon's DTK) against the window of the host's
    driver the vendor gives: a warning, or under [policy] rocm_compatibility = "strict" a refusal, outside it."""
    vendor, part = get(inv.vendor), stack(inv.vendor)
    name, driver = part.STACK, f"{vendor.LABEL} driver {inv.driver_version}"
    span = part.stack_window(inv)
    if span is None:
        warnings.append(f"the image ships {name} {release}, but gpuhook does not know which {name} releases the "
                        f"host's {vendor.LABEL} driver {inv.driver_version or '(no version)'} runs: not checked")
        return
    if in_window(release, span):
        return
    lo, hi = span
    msg = (f"the image ships {name} {release} but the host's {driver} runs {name} {lo} to {hi}: use an image "
           f"with {name} {lo}-{hi} or a host driver that runs {release}")
    if policy == "strict":
        raise PolicyError(msg + ' (refused by [policy] rocm_compatibility = "strict")')
    warnings.append(msg)


def _message(req: Requirement, cond: Condition, facts: Facts, gpu: Gpu | None) -> str:
    way_out = ("or set NVIDIA_DISABLE_REQUIRE=1" if req.source != require.ANNOTATION
               else f"or change {require.ANNOTATION}")
    where = f" ({req.source}={req.raw!r})" if req.source not in ("CUDA_VERSION", "NVIDIA_REQUIRE_CUDA") else ""
    if cond.key == "cuda":
        fix = min_driver(cond.value)
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
