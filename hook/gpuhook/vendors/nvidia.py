"""NVIDIA: procfs GPUs, /dev/nvidia* nodes, driver libraries and tools per capability."""

from __future__ import annotations

import os

from gpuhook import ldcache
from gpuhook.devnodes import read_node
from gpuhook.edits import DeviceRule, Edits, Mount
from gpuhook.inventory import DeviceNode, DriverFile, Gpu, VendorInventory
from gpuhook.request import normalize_pci
from gpuhook.root import Root

TYPE_CHECKING = False  # typing and collections cost milliseconds to import: this runs before a container starts
if TYPE_CHECKING:
    from collections.abc import Sequence

NAME = "nvidia"
LABEL = "NVIDIA"

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
CONTROL_NODES = ("/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools")
MODESET_NODE = "/dev/nvidia-modeset"
_PROC = "/proc/driver/nvidia"


def discover(root: Root) -> VendorInventory | None:
    """NVIDIA driver, GPUs (in PCI order, as NVML numbers them), nodes and files; None without the driver."""
    if not root.exists(f"{_PROC}/version") and not root.exists(f"{_PROC}/gpus"):
        return None
    version = _driver_version(root)
    infos = [_read_information(root, bdf) for bdf in root.listdir(f"{_PROC}/gpus")]
    infos.sort(key=lambda i: i["Bus Location"])
    gpus = []
    for index, info in enumerate(infos):
        minor = info.get("Device Minor", "")
        path = f"/dev/nvidia{minor}"
        node = read_node(root, path) if minor.isdigit() else None
        gpus.append(Gpu(NAME, index, info.get("GPU UUID", ""), info["Bus Location"],
                        info.get("Model", ""), (node,) if node else (), () if node else (path,)))
    shared = tuple(n for p in (*CONTROL_NODES, MODESET_NODE) if (n := read_node(root, p)))
    return VendorInventory(NAME, version, tuple(gpus), shared, _driver_files(root, version))


def plan(inv: VendorInventory, gpus: Sequence[Gpu], capabilities: frozenset[str], host_base: str) -> Edits:
    """GPU nodes, control nodes, the capabilities' libraries and tools (read-only), linker cache dirs."""
    nodes: list[DeviceNode] = [n for g in gpus for n in g.nodes]
    wanted = list(CONTROL_NODES)
    if capabilities & {"graphics", "display"}:
        wanted.append(MODESET_NODE)
    nodes += [n for n in inv.shared_nodes if n.path in wanted]
    files = [f for f in inv.files if f.capability in capabilities]
    mounts = tuple(Mount(_on_host(host_base, f.source), f.target) for f in files)
    lib_dirs = tuple(dict.fromkeys(os.path.dirname(f.target) for f in files if f.kind == "lib"))
    return Edits(
        device_nodes=tuple(nodes),
        device_rules=tuple(DeviceRule(n.kind, n.major, n.minor) for n in nodes),
        mounts=mounts,
        additional_gids=tuple(dict.fromkeys(n.gid for n in nodes if n.needs_group() and n.gid)),
        ldcache_dirs=lib_dirs,
    )


def _on_host(host_base: str, path: str) -> str:
    return path if host_base == "/" else host_base.rstrip("/") + path


def _driver_version(root: Root) -> str | None:
    """The first version-like word of the NVRM line (closed and open kernel modules word it differently)."""
    try:
        words = root.read_text(f"{_PROC}/version").split("\n", 1)[0].split()
    except OSError:
        return None
    for w in words:
        parts = w.split(".")
        if len(parts) in (2, 3) and all(p.isdigit() for p in parts):
            return w
    return None


def _read_information(root: Root, bdf: str) -> dict[str, str]:
    info = {"Bus Location": bdf}
    try:
        text = root.read_text(f"{_PROC}/gpus/{bdf}/information")
    except OSError:
        text = ""
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep:
            info[key.strip()] = value.strip()
    info["Bus Location"] = normalize_pci(info["Bus Location"])
    return info


def _driver_files(root: Root, version: str | None) -> tuple[DriverFile, ...]:
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
