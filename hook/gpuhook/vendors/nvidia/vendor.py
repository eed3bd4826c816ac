"""NVIDIA's GPU path: procfs GPUs, /dev/nvidia* nodes, driver libraries and tools per capability, MIG devices.
Its other parts: tuning.py, telemetry.py, kubernetes.py, sim.py, doctor.py."""

from __future__ import annotations

import os

from gpuhook.edits import DeviceNode, Edits, Mount, merge
from gpuhook.host.devnodes import read_node
from gpuhook.host.inventory import Gpu, VendorInventory
from gpuhook.request.ids import is_hex, normalize_pci
from gpuhook.vendors.nvidia import files
from gpuhook.vendors.nvidia import mig as nvidia_mig
from gpuhook.vendors.nvidia.files import driver_files, nvml_library

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence

    from gpuhook.config import Policy
    from gpuhook.host.root import Root

NAME = "nvidia"
LABEL = "NVIDIA"
STACK = "CUDA"  # the user space its images carry: its stack part (stack.py) checks it
NODE_PREFIXES: tuple[str, ...] = ("/dev/nvidia",)
ENV_KEY = "NVIDIA_VISIBLE_DEVICES"
NONE_MEANS_DRIVER = True
CAPABILITIES_ENV: str | None = "NVIDIA_DRIVER_CAPABILITIES"
CDI_KIND = "nvidia.com/gpu"
DOCKER_GPUS_HOOK: str | None = "nvidia-container-runtime-hook"  # gpuhook ships one: cli/nvidia_hook.py
_UUID_GROUPS = (8, 4, 4, 4, 12)  # GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx

CONTROL_NODES = ("/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools")
MODESET_NODE = "/dev/nvidia-modeset"
_PROC = "/proc/driver/nvidia"


def discover(root: Root) -> VendorInventory | None:
    """NVIDIA driver, GPUs (in PCI order, as NVML numbers them), nodes and files; None without the driver."""
    if not root.exists(f"{_PROC}/version") and not root.exists(f"{_PROC}/gpus"):
        return None
    version = driver_version(root)
    infos = [_read_information(root, bdf) for bdf in root.listdir(f"{_PROC}/gpus")]
    infos.sort(key=lambda i: i["Bus Location"])
    gpus = []
    for index, info in enumerate(infos):
        minor = info.get("Device Minor", "")
        path = f"/dev/nvidia{minor}"
        node = read_node(root, path) if minor.isdigit() else None
        gpus.append(Gpu(vendor=NAME, index=index, uuid=info.get("GPU UUID", ""), pci=info["Bus Location"],
                        model=info.get("Model", ""), nodes=(node,) if node else (), missing=() if node else (path,)))
    shared = tuple(n for p in (*CONTROL_NODES, MODESET_NODE) if (n := read_node(root, p)))
    slices, notes = nvidia_mig.discover(root, gpus)
    return VendorInventory(vendor=NAME, driver_version=version, gpus=tuple(gpus), shared_nodes=shared,
                           files=driver_files(root, version), notes=notes, slices=slices)


def refresh() -> None:
    """What discovery remembers of the host between calls (the driver's files), read again where it changed."""
    files.refresh()


def parse_id(item: str) -> str | None:
    """A GPU UUID (GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx), lower-cased, a MIG device's UUID (MIG-…) or index
    form (<gpu>:<mig>); None for anything else."""
    mig = nvidia_mig.parse_id(item)
    if mig is not None:
        return mig
    if item.startswith("GPU-") and [len(g) for g in item[4:].split("-")] == list(_UUID_GROUPS) \
            and is_hex(item[4:].replace("-", ""), 32, 32):
        return "GPU-" + item[4:].lower()
    return None


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
    return merge([Edits.for_nodes(nodes), Edits(mounts=mounts, ldcache_dirs=lib_dirs)])


def identify(root: Root, inv: VendorInventory, idents: Sequence[str] | None) -> VendorInventory:
    """MIG devices' UUIDs and profiles from NVML when `idents` name a MIG UUID (or are None); else `inv` as it is.
    Loads NVML."""
    lib = nvml_library(inv)
    if not inv.slices or lib is None or (idents is not None and not any(i.startswith("MIG-") for i in idents)):
        return inv
    return nvidia_mig.with_uuids(inv, root.lexical(lib))


def claims(gpu: Gpu) -> tuple[DeviceNode, ...]:
    """A spec with the GPU's /dev/nvidiaN has the GPU; one with a MIG device's GI and CI nodes has that device."""
    return nvidia_mig.claims(gpu) if gpu.place else gpu.nodes


def hardening(policy: Policy) -> Edits:
    """Nothing beyond the procfs copy (procfs_files)."""
    return Edits()


def procfs_files(root: Root, gpus: Sequence[Gpu], policy: Policy) -> tuple[str, dict[str, str]] | None:
    """/proc/driver/nvidia for the container: params with ModifyDeviceFiles 0 (the libraries never try to
    create device nodes), version, registry, its own GPUs' information and its own MIG devices' capabilities
    only. Reads the host's procfs."""
    if not policy.nvidia_procfs:
        return None
    files: dict[str, str] = {}
    for name in ("params", "version", "registry"):
        if root.exists(f"{_PROC}/{name}"):
            files[name] = root.read_text(f"{_PROC}/{name}")
    if "params" in files:
        files["params"] = "".join(("ModifyDeviceFiles: 0\n" if line.startswith("ModifyDeviceFiles:") else line + "\n")
                                  for line in files["params"].splitlines())
    for gpu in gpus:
        info = f"{_PROC}/gpus/{gpu.pci}/information"
        if root.exists(info):
            files[f"gpus/{gpu.pci}/information"] = root.read_text(info)
    files.update(nvidia_mig.procfs_files(root, gpus))
    return _PROC, files


def _on_host(host_base: str, path: str) -> str:
    return path if host_base == "/" else host_base.rstrip("/") + path


def driver_version(root: Root) -> str | None:
    """The loaded driver's version: the first version-like word of the NVRM line (closed and open kernel modules word
    it differently); None without one. Reads one procfs file."""
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
