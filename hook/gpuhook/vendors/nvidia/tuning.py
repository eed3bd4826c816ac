"""NVIDIA's tuning part: locked clocks, the power limit, fans and the compute mode through NVML (nvml_tuning.py),
MPS control daemons on the host (mps.py), MIG layouts (mig_layout.py)."""

from __future__ import annotations

import os

from gpuhook.edits import Edits, Mount
from gpuhook.errors import RequestError
from gpuhook.request.knobs import Sets
from gpuhook.vendors.nvidia.files import nvml_library
from gpuhook.vendors.nvidia.vendor import NAME, discover

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence

    from gpuhook.host.inventory import Gpu
    from gpuhook.host.root import Root
    from gpuhook.request.tuning import Tuning
    from gpuhook.vendors.contract import Backend, Setting


# knob -> the NVML setting it sets, and its value there (NVML speaks milliwatts)
SETTINGS = (Sets("clocks", "clocks", lambda mhz: f"{mhz[0]}-{mhz[1]}"),
            Sets("power-limit", "power_limit", lambda watts: str(watts * 1000)),
            Sets("fan", "fan", str), Sets("compute-mode", "compute_mode", str))
# another vendor's knob -> whose setting it is, and what to ask instead
FOREIGN = {"perf-level": ("an AMD setting", "use gpuhook.dev/clocks or gpuhook.dev/power-limit")}


def settings(tuning: Tuning, gpu: Gpu) -> tuple[Setting, ...]:
    """Locked clocks, the power limit, the fans and the compute mode (SETTINGS), by the GPU's UUID."""
    from gpuhook.vendors.contract import Setting

    return tuple(Setting(vendor=NAME, gpu=gpu.uuid or gpu.pci, index=gpu.index, pci=gpu.pci, device=gpu.uuid,
                         name=n, value=v)
                 for n, v in tuning.settings(SETTINGS, FOREIGN, f"GPU {gpu.index} is NVIDIA"))


MPS_PIPE = "/tmp/nvidia-mps"  # where CUDA looks for the MPS control daemon's pipes when nothing says otherwise
MPS_LOG = "/var/log/nvidia-mps"  # and for its logs
# NVIDIA's DRA driver gives a client its claim's pipe directory at /tmp/nvidia-mps and the daemon's shm at /dev/shm
# (rw, nosuid, nodev, bind), its device plugin the same shm at /dev/shm; the daemon's tmpfs is noexec as theirs is
_RW = ("rw", "nosuid", "nodev", "bind")


def sharing(tuning: Tuning, gpus: Sequence[Gpu], directory: str) -> tuple[tuple[Setting, ...], Edits]:
    """MPS: one control daemon per GPU on the host (the setting `mps`, its value the daemon's directory
    <directory>/<UUID>, mps.py), and what its clients need of it, as NVIDIA's drivers lay it out: its pipe
    directory read-write at CUDA's default /tmp/nvidia-mps, its shared memory (<UUID>/shm/shared, a tmpfs of the
    daemon's) at /dev/shm in place of the runtime's, its log directory read-only at /var/log/nvidia-mps, both
    directories in env (CUDA_MPS_PIPE_DIRECTORY, CUDA_MPS_LOG_DIRECTORY), and the client's limits
    (CUDA_MPS_ACTIVE_THREAD_PERCENTAGE, CUDA_MPS_PINNED_DEVICE_MEM_LIMIT). One GPU a container: a client reaches one
    control daemon."""
    from gpuhook.edits import SHARED_MEMORY
    from gpuhook.statefile import SHARED
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
    env = [f"CUDA_MPS_PIPE_DIRECTORY={MPS_PIPE}", f"CUDA_MPS_LOG_DIRECTORY={MPS_LOG}"]
    if tuning.mps_threads:
        env.append(f"CUDA_MPS_ACTIVE_THREAD_PERCENTAGE={tuning.mps_threads}")
    if tuning.mps_memory:
        env.append(f"CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=0={tuning.mps_memory}M")
    mounts = (Mount(f"{home}/pipe", MPS_PIPE, _RW),
              Mount(f"{home}/shm/{SHARED}", SHARED_MEMORY, (*_RW[:3], "noexec", "bind")),
              Mount(f"{home}/log", MPS_LOG, ("ro", "nosuid", "nodev", "noexec", "bind")))
    return ((Setting(vendor=NAME, gpu=gpu.uuid, index=gpu.index, pci=gpu.pci, device=gpu.uuid, name="mps",
                     value=home),),
            Edits(mounts=mounts, env=tuple(env)))


def repartition(root: Root, gpu: Gpu, layout: dict[str, object], dry_run: bool = False) -> str:
    """A MIG layout (`mig`: profile names, [] for MIG off) through NVML's GPU and compute instances
    (mig_layout.py)."""
    from gpuhook.errors import GpuhookError
    from gpuhook.vendors.nvidia import mig_layout

    lib = nvml_library(discover(root))
    if lib is None:
        raise GpuhookError(f"no libnvidia-ml under {root.base}: MIG layouts need the driver's NVML")
    return mig_layout.apply(root, root.lexical(lib), gpu, layout, dry_run)


def backend(root: Root, state_dir: str) -> Backend:
    """NVML, bound to the host root's own libnvidia-ml (of the loaded driver: its version and the driver's files,
    not a discovery of every GPU); the host's nvidia-cuda-mps-control for MPS (the daemons it starts recorded in
    `state_dir`)."""
    from gpuhook.errors import GpuhookError, TuningError
    from gpuhook.vendors.nvidia.files import driver_files
    from gpuhook.vendors.nvidia.nvml_tuning import NvmlBackend
    from gpuhook.vendors.nvidia.vendor import driver_version

    found = driver_files(root, driver_version(root))
    lib = next((f.source for f in found if os.path.basename(f.source).startswith("libnvidia-ml.so.")), None)
    if lib is None:
        raise TuningError(f"no libnvidia-ml under {root.base}: NVIDIA tuning needs the driver's NVML")
    control = next((f.source for f in found if f.kind == "bin"
                    and os.path.basename(f.source) == "nvidia-cuda-mps-control"), None)
    try:
        return NvmlBackend(root.lexical(lib), root.lexical(control) if control else "", state_dir)
    except GpuhookError as e:
        raise TuningError(str(e)) from e
