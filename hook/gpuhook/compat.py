"""Before a GPU container starts: do the image's CUDA / driver / arch / brand / ROCm needs fit the host?

Refusals say what the image needs, what the host has and the ways out. CUDA forward compatibility:
when the host driver is too old but the image ships newer compat libraries, the container may start and
its linker cache prefers the image's compat directory; the compat library is never loaded by gpuhook
(its version is read from its file name) and nothing from the image goes onto host paths.
"""

from __future__ import annotations

import os

from gpuhook import require, rocm
from gpuhook.edits import Edits
from gpuhook.errors import DiscoveryError, PolicyError
from gpuhook.inventory import Gpu, VendorInventory
from gpuhook.record import record
from gpuhook.require import Condition, Facts, Requirement, version_tuple
from gpuhook.root import Root
from gpuhook.safepath import InRoot

TYPE_CHECKING = False  # typing and collections cost milliseconds to import: this runs before a container starts
if TYPE_CHECKING:
    from collections.abc import Mapping

# Minimum Linux x86_64 driver of each CUDA toolkit release (NVIDIA CUDA Toolkit release notes,
# "CUDA Toolkit and Corresponding Driver Versions").
CUDA_MIN_DRIVER: tuple[tuple[str, str], ...] = (
    ("11.0", "450.36.06"), ("11.1", "455.23"), ("11.2", "460.27.03"), ("11.3", "465.19.01"),
    ("11.4", "470.42.01"), ("11.5", "495.29.05"), ("11.6", "510.39.01"), ("11.7", "515.43.04"),
    ("11.8", "520.61.05"), ("12.0", "525.60.13"), ("12.1", "530.30.02"), ("12.2", "535.54.03"),
    ("12.3", "545.23.06"), ("12.4", "550.54.14"), ("12.5", "555.42.02"), ("12.6", "560.28.03"),
    ("12.8", "570.26"), ("12.9", "575.51.03"), ("13.0", "580.65.06"),
)
COMPAT_DIR = "/usr/local/cuda/compat"


@record
class Verdict:
    """The container may start: with these extra edits, after these warnings."""

    edits: Edits = Edits()
    warnings: tuple[str, ...] = ()


def check(selected: tuple[tuple[VendorInventory, tuple[Gpu, ...]], ...], env: Mapping[str, str],
          annotations: Mapping[str, str], host: Root, image: InRoot | None, rocm_policy: str = "warn",
          user_rocm: str | None = None) -> Verdict:
    """Raise PolicyError when the image cannot work on the selected GPUs; else the Verdict. Reads host files,
    loads the host's libcuda/NVML when a requirement needs them, reads (never runs) the image's files.
    `user_rocm` is the ROCm the container will run when it is not the image's (gpuhook.dev/host-rocm)."""
    requirements = require.from_container(env, annotations)
    warnings: list[str] = []
    edits = Edits()
    by_vendor = {inv.vendor: (inv, gpus) for inv, gpus in selected}
    rocm_release = None
    if "amd" in by_vendor:
        rocm_release = _check_rocm(by_vendor["amd"][0], image, rocm_policy, warnings, user_rocm)
    nvidia = by_vendor.get("nvidia")
    for req in requirements:
        if nvidia is None and req.source != require.ANNOTATION:
            continue  # NVIDIA_REQUIRE_* speak of NVIDIA drivers only
        for gpu, facts in _facts(nvidia, host, requirements, rocm_release, warnings):
            cond = require.unmet(req, facts)
            if cond is None:
                continue
            compat = _forward_compat(image, facts) if cond.key == "cuda" and nvidia else None
            if compat and require.unmet(req, Facts(compat[1], facts.driver, facts.arch, facts.brand)) is None:
                edits = Edits(ldcache_dirs=(compat[0],))
                warnings.append(f"host driver {facts.driver} supports CUDA {facts.cuda}; using the image's CUDA "
                                f"{compat[1]} forward-compatibility libraries in {compat[0]}")
                continue
            raise PolicyError(_message(req, cond, facts, gpu))
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


def _facts(nvidia: tuple[VendorInventory, tuple[Gpu, ...]] | None, host: Root, requirements: tuple[Requirement, ...],
           rocm_release: str | None, warnings: list[str]) -> list[tuple[Gpu | None, Facts]]:
    if nvidia is None:
        return [(None, Facts(rocm=rocm_release))]
    inv, gpus = nvidia
    keys = {c.key for r in requirements for alt in r.alternatives for c in alt}
    cuda = _host_cuda(inv, host, warnings) if "cuda" in keys else None
    if not keys & {"arch", "brand"} or not gpus:
        return [(None, Facts(cuda, inv.driver_version, rocm=rocm_release))]
    from gpuhook import nvml

    out: list[tuple[Gpu | None, Facts]] = []
    with nvml.session(_driver_file(inv, host, "libnvidia-ml.so.")) as lib:
        for gpu in gpus:
            arch, brand = nvml.device_facts(lib, gpu.uuid)
            out.append((gpu, Facts(cuda, inv.driver_version, arch, brand, rocm_release)))
    return out


def _host_cuda(inv: VendorInventory, host: Root, warnings: list[str]) -> str | None:
    from gpuhook import libcuda

    try:
        return libcuda.driver_cuda_version(_driver_file(inv, host, "libcuda.so."))
    except DiscoveryError as first:
        try:
            from gpuhook import nvml

            with nvml.session(_driver_file(inv, host, "libnvidia-ml.so.")) as lib:
                return nvml.cuda_version(lib)
        except DiscoveryError:
            warnings.append(f"cannot tell which CUDA the host driver supports ({first}); cuda requirements unchecked")
            return None


def _driver_file(inv: VendorInventory, host: Root, prefix: str) -> str:
    for f in inv.files:
        if os.path.basename(f.source).startswith(prefix):
            return host.lexical(f.source)
    raise DiscoveryError(f"the host driver has no {prefix}* library under {host.base}")


def _forward_compat(image: InRoot | None, facts: Facts) -> tuple[str, str] | None:
    """(compat dir inside the image, CUDA it provides) when the image's compat libcuda is newer than the host's."""
    if image is None or facts.driver is None:
        return None
    names = image.listdir(COMPAT_DIR)
    versions = [n[len("libcuda.so."):] for n in names if n.startswith("libcuda.so.") and n.count(".") >= 4]
    best = max(versions, key=version_tuple, default=None)
    if best is None or version_tuple(best)[0] <= version_tuple(facts.driver)[0]:
        return None
    cuda = cuda_of_driver(best)
    return (image.real_path(COMPAT_DIR), cuda) if cuda else None


def _check_rocm(inv: VendorInventory, image: InRoot | None, policy: str, warnings: list[str],
                user_rocm: str | None = None) -> str | None:
    """The host KMD's ROCm release (for rocm requirements); checks the container's ROCm against its window."""
    release = rocm.release_of_driver(inv.driver_version) if inv.driver_version else None
    user = user_rocm or (rocm.image_version(image) if image else None)
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
