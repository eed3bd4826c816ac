"""NVIDIA: procfs GPUs, /dev/nvidia* nodes, driver libraries and tools per capability; NVML tuning and telemetry."""

from __future__ import annotations

import os

from gpuhook.edits import DeviceNode, Edits, Mount, merge
from gpuhook.errors import RequestError
from gpuhook.host.devnodes import read_node
from gpuhook.host.inventory import Gpu, VendorInventory
from gpuhook.request.ids import is_hex, normalize_pci
from gpuhook.vendors.nvidia import files
from gpuhook.vendors.nvidia import mig as nvidia_mig
from gpuhook.vendors.nvidia.files import driver_files

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence

    from gpuhook.config import Policy
    from gpuhook.host.image import InRoot
    from gpuhook.host.root import Root
    from gpuhook.request.tuning import Tuning
    from gpuhook.simulator.host import HostSpec
    from gpuhook.vendors.contract import Backend, DraDevice, Setting, Source

NAME = "nvidia"
LABEL = "NVIDIA"
NODE_PREFIXES: tuple[str, ...] = ("/dev/nvidia",)
ENV_KEY = "NVIDIA_VISIBLE_DEVICES"
NONE_MEANS_DRIVER = True
CAPABILITIES_ENV: str | None = "NVIDIA_DRIVER_CAPABILITIES"
CDI_KIND = "nvidia.com/gpu"
DOCKER_GPUS_HOOK: str | None = "nvidia-container-runtime-hook"  # gpuhook ships one: cli/nvidia_hook.py
SHARING: tuple[str, ...] = ("time-slicing", "mps")
STACK: str | None = None
SLICE_RESOURCE = "nvidia.com/mig-{profile}"  # NVIDIA's device plugin's mixed strategy
_UUID_GROUPS = (8, 4, 4, 4, 12)  # GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx

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
    slices, notes = nvidia_mig.discover(root, gpus)
    return VendorInventory(NAME, version, tuple(gpus), shared, driver_files(root, version), notes, slices)


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
    lib = _nvml_library(inv)
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


def settings(tuning: Tuning, gpu: Gpu) -> tuple[Setting, ...]:
    """Locked clocks, the power limit (NVML speaks milliwatts), the fans and the compute mode, by the GPU's UUID."""
    from gpuhook.vendors.contract import Setting

    if tuning.perf_level:
        raise RequestError(f"gpuhook.dev/perf-level={tuning.perf_level!r} is an AMD setting but GPU "
                           f"{gpu.index} is NVIDIA: use gpuhook.dev/clocks or gpuhook.dev/power-limit")
    asked = []
    if tuning.clocks:
        asked.append(("clocks", f"{tuning.clocks[0]}-{tuning.clocks[1]}"))
    if tuning.power_limit:
        asked.append(("power_limit", str(tuning.power_limit * 1000)))
    if tuning.fan:
        asked.append(("fan", tuning.fan))
    if tuning.compute_mode:
        asked.append(("compute_mode", tuning.compute_mode))
    return tuple(Setting(NAME, gpu.uuid or gpu.pci, gpu.index, gpu.pci, gpu.uuid, n, v) for n, v in asked)


MPS_PIPE = "/tmp/nvidia-mps"  # where CUDA looks for the MPS control daemon's pipes when nothing says otherwise


def sharing(tuning: Tuning, gpus: Sequence[Gpu], directory: str) -> tuple[tuple[Setting, ...], Edits]:
    """MPS: one control daemon per GPU on the host (the setting `mps`, its value the daemon's directory
    <directory>/<UUID>), its pipe directory mounted read-write at CUDA's default /tmp/nvidia-mps, and the client's
    limits in env (CUDA_MPS_ACTIVE_THREAD_PERCENTAGE, CUDA_MPS_PINNED_DEVICE_MEM_LIMIT). One GPU a container: a
    client reaches one control daemon."""
    from gpuhook.vendors.contract import Setting

    if not tuning.mps:
        return (), Edits()
    if len(gpus) != 1:
        raise RequestError(f"gpuhook.dev/mps shares one GPU a container (an MPS client reaches one control daemon), "
                           f"but this container asks for {len(gpus)}: ask for one GPU, or drop gpuhook.dev/mps")
    gpu = gpus[0]
    if gpu.parent or not gpu.uuid:
        raise RequestError(f"gpuhook.dev/mps on MIG device {gpu.slice or gpu.index}: gpuhook runs MPS on whole GPUs "
                           "only; ask for a whole GPU, or use the MIG device without MPS")
    home = f"{directory.rstrip('/')}/{gpu.uuid}"
    env = [f"CUDA_MPS_PIPE_DIRECTORY={MPS_PIPE}"]
    if tuning.mps_threads:
        env.append(f"CUDA_MPS_ACTIVE_THREAD_PERCENTAGE={tuning.mps_threads}")
    if tuning.mps_memory:
        env.append(f"CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=0={tuning.mps_memory}M")
    mount = Mount(f"{home}/pipe", MPS_PIPE, ("rw", "nosuid", "nodev", "bind"))
    return ((Setting(NAME, gpu.uuid, gpu.index, gpu.pci, gpu.uuid, "mps", home),),
            Edits(mounts=(mount,), env=tuple(env)))


def repartition(root: Root, gpu: Gpu, layout: dict[str, object], dry_run: bool = False) -> str:
    """A MIG layout (`mig`: profile names, [] for MIG off) through NVML's GPU and compute instances
    (mig_layout.py)."""
    from gpuhook.errors import GpuhookError
    from gpuhook.vendors.nvidia import mig_layout

    lib = _nvml_library(discover(root))
    if lib is None:
        raise GpuhookError(f"no libnvidia-ml under {root.base}: MIG layouts need the driver's NVML")
    return mig_layout.apply(root, root.lexical(lib), gpu, layout, dry_run)


def backend(root: Root, state_dir: str) -> Backend:
    """NVML, bound to the host root's own libnvidia-ml; the host's nvidia-cuda-mps-control for MPS (the daemons
    it starts recorded in `state_dir`)."""
    from gpuhook.errors import GpuhookError, TuningError
    from gpuhook.vendors.nvidia.tuning import NvmlBackend

    inv = discover(root)
    lib = _nvml_library(inv)
    if lib is None:
        raise TuningError(f"no libnvidia-ml under {root.base}: NVIDIA tuning needs the driver's NVML")
    control = next((f.source for f in (inv.files if inv else ()) if f.kind == "bin"
                    and os.path.basename(f.source) == "nvidia-cuda-mps-control"), None)
    try:
        return NvmlBackend(root.lexical(lib), root.lexical(control) if control else "", state_dir)
    except GpuhookError as e:
        raise TuningError(str(e)) from e


def telemetry(root: Root, inv: VendorInventory) -> Source:
    """NVML, bound to the host root's own libnvidia-ml, held open until closed."""
    from gpuhook.errors import DiscoveryError
    from gpuhook.vendors.nvidia.readings import NvmlTelemetry

    lib = _nvml_library(inv)
    if lib is None:
        raise DiscoveryError(f"no libnvidia-ml under {root.base}: NVIDIA telemetry needs the driver's NVML")
    return NvmlTelemetry(root.lexical(lib))


def _nvml_library(inv: VendorInventory | None) -> str | None:
    """The driver's libnvidia-ml.so.<version> among the files discovery found (host path), if any."""
    return next((f.source for f in (inv.files if inv else ()) if os.path.basename(f.source).startswith(
        "libnvidia-ml.so.")), None)


def labels(inv: VendorInventory, root: Root, replicas: int, strategy: str = "none",
           sharing: str = "time-slicing") -> dict[str, str]:
    """The driver's CUDA version and GFD's nvidia.com/ labels, MIG's too (node_labels.py). Loads libcuda, NVML."""
    from gpuhook.vendors.nvidia import node_labels as nvidia_labels

    return nvidia_labels.labels(inv, root, replicas, strategy, sharing)


def dra_devices(inv: VendorInventory, root: Root) -> tuple[DraDevice, ...]:
    """The DRA driver's devices: whole GPUs not in MIG mode and MIG devices, as gpu.nvidia.com names them
    (dra.py). Loads NVML, libcuda."""
    from gpuhook.vendors.nvidia import dra

    return dra.dra_devices(inv, root)


def image_stack(image: InRoot, notes: list[str]) -> str | None:
    """No STACK: the image's CUDA is checked by plan/compat itself."""
    return None


def stack_window(inv: VendorInventory) -> tuple[str, str] | None:
    """No STACK."""
    return None


def checks(inv: VendorInventory) -> tuple[tuple[str, str, str], ...]:
    """The driver libraries a CUDA container needs; MIG devices' caps nodes."""
    libs = sorted({os.path.basename(f.source).split(".so")[0] for f in inv.files if f.kind == "lib"})
    missing = [s for s in ("libcuda", "libnvidia-ml") if s not in libs]
    if missing:
        found = ("fail", f"NVIDIA driver libraries missing: {', '.join(missing)}",
                 "install the driver's user-space packages (libcuda1, libnvidia-ml1)")
    else:
        found = ("ok", f"{len(libs)} NVIDIA driver libraries found", "")
    broken = [s for s in inv.slices if s.missing]
    if broken:
        shown = ", ".join(f"{s.slice} ({s.missing[0]})" for s in broken)
        mig = ("warn", f"MIG devices without their caps nodes: {shown}",
               "make them with nvidia-modprobe -f <the capability's access file under /proc/driver/nvidia/"
               "capabilities>, as NVIDIA's toolkit does, or with the driver's udev rules")
        return found, mig
    return (found, ("ok", f"{len(inv.slices)} MIG devices, each with its caps nodes", "")) if inv.slices else (found,)


def simulate(root: str, spec: HostSpec, count: int) -> None:
    """The simulator's NVIDIA driver: procfs, nodes, stub libraries and tools."""
    from gpuhook.vendors.nvidia import sim as sim_nvidia

    sim_nvidia.build(root, spec, count)


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
