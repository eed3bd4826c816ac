"""The NVIDIA driver's files on the host: libraries (SONAME stems) and tools per capability, found through the
linker cache (one pass) or the standard library directories, inside a Root."""

from __future__ import annotations

import os

from gpuhook.host import ldcache
from gpuhook.host.inventory import DriverFile

TYPE_CHECKING = False
if TYPE_CHECKING:
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


def driver_files(root: Root, version: str | None) -> tuple[DriverFile, ...]:
    """The driver's libraries (of the loaded version where several are there) and tools, per capability. Reads."""
    cache = _cached_libraries(root)
    out: list[DriverFile] = []
    for cap, stems in LIBRARIES.items():
        for stem in stems:
            found = _find_library(root, cache, stem)
            matching = [p for p in found if version and p.endswith(f".so.{version}")]
            for real in matching or found:
                host = root.to_host(real)
                out.append(DriverFile(cap, "lib", host, host))
    for cap, names in BINARIES.items():
        for name in names:
            for d in BIN_DIRS:
                real = root.resolve(f"{d}/{name}")
                if os.path.isfile(real):
                    out.append(DriverFile(cap, "bin", root.to_host(real), f"{d}/{name}"))
                    break
    return tuple(out)


def _cached_libraries(root: Root) -> dict[str, list[str]] | None:
    """The linker cache's paths by SONAME stem (libcuda.so.1 -> libcuda.so): one pass over a cache that
    holds every library of the host, where a scan per driver library would cost milliseconds."""
    try:
        with open(root.resolve("/etc/ld.so.cache"), "rb") as f:
            entries = ldcache.parse(f.read())
    except OSError:
        return None
    by_stem: dict[str, list[str]] = {}
    for soname, path in entries:
        base, versioned, _ = soname.partition(".so.")
        if versioned:
            by_stem.setdefault(base + ".so", []).append(path)
    return by_stem


def _find_library(root: Root, cache: dict[str, list[str]] | None, stem: str) -> list[str]:
    """Real files (links resolved inside the root) of library `stem`, from the cache or the usual dirs."""
    if cache is not None:
        candidates = cache.get(stem, [])
    else:
        candidates = [f"{d}/{e}" for d in LIB_DIRS for e in root.listdir(d) if e.startswith(stem + ".")]
    reals = [root.resolve(c) for c in candidates]
    return list(dict.fromkeys(r for r in reals if os.path.isfile(r)))
