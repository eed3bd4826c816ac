"""The NVIDIA driver's files on the host: libraries (SONAME stems) and tools per capability, found through the
linker cache (one pass) or the standard library directories, inside a Root."""

from __future__ import annotations

import os
import time

from gpuhook.host import ldcache
from gpuhook.host.inventory import DriverFile, VendorInventory

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable

    from gpuhook.host.root import Root

# Driver libraries (SONAME stems) and tools per capability, after NVIDIA's own container toolkit lists.
LIBRARIES: dict[str, tuple[str, ...]] = {
    "utility": ("libnvidia-ml.so", "libnvidia-cfg.so"),
    "compute": ("libcuda.so", "libcudadebugger.so", "libnvidia-opencl.so", "libnvidia-ptxjitcompiler.so",
                "libnvidia-fatbinaryloader.so", "libnvidia-allocator.so", "libnvidia-compiler.so",
                "libnvidia-nvvm.so", "libnvidia-gpucomp.so", "libnvidia-pkcs11.so",
                "libnvidia-pkcs11-openssl3.so"),
    "video": ("libvdpau_nvidia.so", "libnvidia-encode.so", "libnvidia-opticalflow.so", "libnvcuvid.so"),
    "graphics": ("libnvidia-eglcore.so", "libnvidia-glcore.so", "libnvidia-tls.so", "libnvidia-glsi.so",
                 "libnvidia-fbc.so", "libnvidia-ifr.so", "libnvidia-rtcore.so", "libnvoptix.so",
                 "libGLX_nvidia.so", "libEGL_nvidia.so", "libGLESv2_nvidia.so", "libGLESv1_CM_nvidia.so",
                 "libnvidia-glvkspirv.so", "libnvidia-cbl.so"),
    "ngx": ("libnvidia-ngx.so",),
}
BINARIES: dict[str, tuple[str, ...]] = {
    "utility": ("nvidia-smi", "nvidia-debugdump", "nvidia-persistenced"),
    "compute": ("nvidia-cuda-mps-control", "nvidia-cuda-mps-server"),
}
LIB_DIRS = ("/usr/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu/nvidia/current", "/usr/lib64",
            "/usr/lib/aarch64-linux-gnu", "/usr/lib", "/lib64", "/lib")
BIN_DIRS = ("/usr/bin", "/usr/sbin", "/usr/local/bin", "/bin", "/sbin")


# (host root, driver version) -> (the directories the answer was read from, with their identities; the answer;
# whether they had all been still for _SETTLED_NS when read): a process that discovers again and again (the warm
# helper's workers, the device plugin, the exporter) reads the driver's files once per change there, not once per
# container (0.3 ms on a simulated host's 20-entry linker cache; a GPU host's cache has thousands of entries to
# parse). Unsettled answers are never reused: a file system's clock is coarse, and a change in the same tick as the
# read would leave the directory's mtime as it was.
_SETTLED_NS = 2_000_000_000
_MAX_REMEMBERED = 8  # host roots and driver versions: one in a daemon's life, a few in a test run
_MEMO: dict[tuple[str, str | None],
            tuple[tuple[tuple[str, int, int, int], ...], tuple[DriverFile, ...], bool]] = {}


def driver_files(root: Root, version: str | None) -> tuple[DriverFile, ...]:
    """The driver's libraries (of the loaded version where several are there) and tools, per capability. Reads:
    the last answer again while the linker cache and every directory it came from are as they were (a driver
    installed or removed adds, removes or renames entries there, and rewrites the cache)."""
    key = (root.base, version)
    known = _MEMO.get(key)
    if known is not None and known[2] and _unchanged(known[0]):
        return known[1]
    found, read = _driver_files(root, version)
    identities = _identities(sorted(read))
    settled = time.time_ns() - _SETTLED_NS
    if len(_MEMO) >= _MAX_REMEMBERED and key not in _MEMO:
        _MEMO.clear()
    _MEMO[key] = (identities, found, all(mtime < settled for *_, mtime in identities))
    return found


def refresh() -> None:
    """Read again what changed, or had not settled, since it was remembered (the warm helper's daemon, between
    calls: the workers it forks then find the answer in memory)."""
    for (base, version), (identities, _, settled) in list(_MEMO.items()):
        if not settled or not _unchanged(identities):
            from gpuhook.errors import GpuhookError
            from gpuhook.host.root import Root

            try:
                driver_files(Root(base), version)
            except (GpuhookError, OSError):  # the root went (a simulated host removed): nothing to remember
                _MEMO.pop((base, version), None)


def _unchanged(identities: tuple[tuple[str, int, int, int], ...]) -> bool:
    """Whether every path of `identities` is still what it was. Stats them."""
    return _identities(path for path, *_ in identities) == identities


def _identities(paths: Iterable[str]) -> tuple[tuple[str, int, int, int], ...]:
    """(path, device, inode, mtime) of each path; zeros for one that is not there."""
    out = []
    for path in paths:
        try:
            st = os.stat(path)
            out.append((path, st.st_dev, st.st_ino, st.st_mtime_ns))
        except OSError:
            out.append((path, 0, 0, 0))
    return tuple(out)


def _driver_files(root: Root, version: str | None) -> tuple[tuple[DriverFile, ...], set[str]]:
    """driver_files' answer, and the real paths it depends on: the linker cache and the directories read."""
    cache_path = root.resolve("/etc/ld.so.cache")
    cache = _cached_libraries(cache_path)
    read = {cache_path} | {root.resolve(d) for d in (BIN_DIRS if cache is not None else (*BIN_DIRS, *LIB_DIRS))}
    out: list[DriverFile] = []
    for cap, stems in LIBRARIES.items():
        for stem in stems:
            found = _find_library(root, cache, stem, read)
            matching = [p for p in found if version and p.endswith(f".so.{version}")]
            for real in matching or found:
                host = root.to_host(real)
                out.append(DriverFile(cap, "lib", host, host))
    for cap, names in BINARIES.items():
        for name in names:
            for d in BIN_DIRS:
                real = root.resolve(f"{d}/{name}")
                if os.path.isfile(real):
                    read.add(os.path.dirname(real))
                    out.append(DriverFile(cap, "bin", root.to_host(real), f"{d}/{name}"))
                    break
    return tuple(out), read


def _cached_libraries(path: str) -> dict[str, list[str]] | None:
    """The linker cache's paths by SONAME stem (libcuda.so.1 -> libcuda.so): one pass over a cache that
    holds every library of the host, where a scan per driver library would cost milliseconds."""
    try:
        with open(path, "rb") as f:
            entries = ldcache.parse(f.read())
    except OSError:
        return None
    by_stem: dict[str, list[str]] = {}
    for soname, path in entries:
        base, versioned, _ = soname.partition(".so.")
        if versioned:
            by_stem.setdefault(base + ".so", []).append(path)
    return by_stem


def _find_library(root: Root, cache: dict[str, list[str]] | None, stem: str, read: set[str]) -> list[str]:
    """Real files (links resolved inside the root) of library `stem`, from the cache or the usual dirs; adds
    the directories of the names and of the files found to `read`."""
    if cache is not None:
        candidates = cache.get(stem, [])
    else:
        candidates = [f"{d}/{e}" for d in LIB_DIRS for e in root.listdir(d) if e.startswith(stem + ".")]
    reals = [root.resolve(c) for c in candidates]
    found = list(dict.fromkeys(r for r in reals if os.path.isfile(r)))
    read.update(root.resolve(os.path.dirname(c)) for c in candidates)
    read.update(os.path.dirname(r) for r in found)
    return found


def nvml_library(inv: VendorInventory | None) -> str | None:
    """The driver's libnvidia-ml.so.<version> among the files discovery found (host path), if any."""
    return next((f.source for f in (inv.files if inv else ()) if os.path.basename(f.source).startswith(
        "libnvidia-ml.so.")), None)
