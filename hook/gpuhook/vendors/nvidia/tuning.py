"""NVIDIA's tuning part: locked clocks, the power limit, fans and the compute mode through NVML (nvml_tuning.py),
MPS control daemons on the host (mps.py), MIG layouts (mig_layout.py)."""

from __future__ import annotations

import os

from gpuhook.edits import Edits, Mount
from gpuhook.errors import RequestError
from gpuhook.vendors.nvidia.files import nvml_library
from gpuhook.vendors.nvidia.vendor import NAME, discover

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence

    from gpuhook.host.inventory import Gpu
    from gpuhook.host.root import Root
    from gpuhook.request.tuning import Tuning
    from gpuhook.vendors.contract import Backend, Setting


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

    lib = nvml_library(discover(root))
    if lib is None:
        raise GpuhookError(f"no libnvidia-ml under {root.base}: MIG layouts need the driver's NVML")
    return mig_layout.apply(root, root.lexical(lib), gpu, layout, dry_run)


def backend(root: Root, state_dir: str) -> Backend:
    """NVML, bound to the host root's own libnvidia-ml; the host's nvidia-cuda-mps-control for MPS (the daemons
    it starts recorded in `state_dir`)."""
    from gpuhook.errors import GpuhookError, TuningError
    from gpuhook.vendors.nvidia.nvml_tuning import NvmlBackend

    inv = discover(root)
    lib = nvml_library(inv)
    if lib is None:
        raise TuningError(f"no libnvidia-ml under {root.base}: NVIDIA tuning needs the driver's NVML")
    control = next((f.source for f in (inv.files if inv else ()) if f.kind == "bin"
                    and os.path.basename(f.source) == "nvidia-cuda-mps-control"), None)
    try:
        return NvmlBackend(root.lexical(lib), root.lexical(control) if control else "", state_dir)
    except GpuhookError as e:
        raise TuningError(str(e)) from e
