"""The simulator's NVIDIA driver: procfs text, real device nodes, real stub ELF libraries and tools."""

from __future__ import annotations

import os
import shutil

from gpuhook.errors import SimulatorError
from gpuhook.proc import run
from gpuhook.simulator import stub_libs as stubs
from gpuhook.simulator import telemetry as sim_telemetry
from gpuhook.simulator.host import SIM_STATE, HostSpec, node, pci_device, react_command, write
from gpuhook.vendors.nvidia.sim_options import Options, options

LDCONFIG = "/sbin/ldconfig"
NV_MAJOR, UVM_MAJOR = 195, 509
LIB_DIR = "/usr/lib/x86_64-linux-gnu"
# stem -> (SONAME, stub source); "{v}" is the driver version.
NVIDIA_LIBS = {
    "libnvidia-ml.so": ("libnvidia-ml.so.1", "nvml.c"),
    "libnvidia-cfg.so": ("libnvidia-cfg.so.1", "generic.c"),
    "libcuda.so": ("libcuda.so.1", "cuda.c"),
    "libnvidia-ptxjitcompiler.so": ("libnvidia-ptxjitcompiler.so.1", "generic.c"),
    "libnvidia-nvvm.so": ("libnvidia-nvvm.so.4", "generic.c"),
    "libnvidia-opencl.so": ("libnvidia-opencl.so.1", "generic.c"),
    "libnvcuvid.so": ("libnvcuvid.so.1", "generic.c"),
    "libnvidia-encode.so": ("libnvidia-encode.so.1", "generic.c"),
    "libEGL_nvidia.so": ("libEGL_nvidia.so.0", "generic.c"),
    "libGLX_nvidia.so": ("libGLX_nvidia.so.0", "generic.c"),
    "libnvidia-glcore.so": ("libnvidia-glcore.so.{v}", "generic.c"),
    "libnvidia-eglcore.so": ("libnvidia-eglcore.so.{v}", "generic.c"),
}
NVIDIA_TOOLS = {"nvidia-smi": "nvidia_smi.c", "nvidia-debugdump": "tool.c", "nvidia-cuda-mps-control": "mps_control.c"}
# What the stub NVML reports for a GPU without a telemetry line (stubs/nvml.c): an idle H100 80GB HBM3
IDLE = sim_telemetry.Telemetry(0, 567017472, 85520809984, 72000, 33, 1980)


STATE = "nvml"  # the stub NVML's tunables, fans and MIG instances (nvml, nvml.mig, nvml.migmode)
REACTIONS: tuple[str, ...] = ("mig-sync",)
DEMO = "ls -l /dev/nvidia*; nvidia-smi; dlopen-probe libcuda.so.1; grep libcuda /proc/self/mountinfo"

OPTIONS: type = Options



def react(root: str, spec: HostSpec, what: str, index: int, value: str) -> HostSpec | None:
    """mig-sync: the stub NVML created or destroyed MIG instances; the driver's procfs capabilities of them follow
    in place."""
    from gpuhook.vendors.nvidia import sim_mig

    sim_mig.sync(root)
    return None


def settle(root: str) -> None:
    """The MIG devices' procfs capabilities and nodes follow the stub NVML's kept table, if it has one."""
    if os.path.exists(f"{root}{SIM_STATE}/nvml.mig"):
        from gpuhook.vendors.nvidia import sim_mig

        sim_mig.sync(root, nodes=True)


def build(root: str, spec: HostSpec, count: int) -> None:
    """procfs, /dev/nvidia* nodes, stub driver libraries (SONAMEs, a real ld.so.cache) and tools."""
    v = options(spec).nvidia_driver
    write(root, "/proc/driver/nvidia/params",
           "ResmanDebugLevel: 4294967295\nRmLogonRC: 1\nModifyDeviceFiles: 1\nDeviceFileUID: 0\n"
           "DeviceFileGID: 0\nDeviceFileMode: 438\nInitializeSystemMemoryAllocations: 1\n")
    write(root, "/proc/driver/nvidia/registry", "Binary: \"\"\n")
    write(root, "/proc/driver/nvidia/version",
           f"NVRM version: NVIDIA UNIX x86_64 Kernel Module  {v}  Thu Jan  1 00:00:00 UTC 2026\n"
           "GCC version:  gcc version 12.2.0 (Debian 12.2.0-14)\n")
    for i in range(count):
        bdf = f"0000:{0x10 + i:02x}:00.0"
        write(root, f"/proc/driver/nvidia/gpus/{bdf}/information",
               f"Model: \t\t NVIDIA H100 80GB HBM3\nIRQ:   \t\t {100 + i}\n"
               f"GPU UUID: \t GPU-{i:08x}-5a1e-4000-8000-{0xD00D0000 + i:012x}\n"
               f"Video BIOS: \t 96.00.99.00.01\nBus Type: \t PCIe\nDMA Size: \t 52 bits\n"
               f"Bus Location: \t {bdf}\nDevice Minor: \t {i}\nGPU Excluded:\t No\n")
        node(root, f"/dev/nvidia{i}", NV_MAJOR, i, 0o666, 0)
        pci_device(root, bdf, i, count, spec, "0x10de")
    node(root, "/dev/nvidiactl", NV_MAJOR, 255, 0o666, 0)
    node(root, "/dev/nvidia-modeset", NV_MAJOR, 254, 0o666, 0)
    node(root, "/dev/nvidia-uvm", UVM_MAJOR, 0, 0o666, 0)
    node(root, "/dev/nvidia-uvm-tools", UVM_MAJOR, 1, 0o666, 0)
    write(root, "/dev/kmsg", "")  # the kernel log, a plain file: where the driver logs XIDs (testing/faults.py)
    if options(spec).mig or options(spec).mig_capable:
        from gpuhook.vendors.nvidia import sim_mig

        sim_mig.build(root, spec, count)
    if not 0 <= spec.fans <= 4:
        raise SimulatorError(f"fans={spec.fans}: the stub NVML models 0-4 fans a GPU")
    cc_major, cc_minor = options(spec).nvidia_arch.split(".")
    os.makedirs(root + SIM_STATE, exist_ok=True)
    defines = {"STUB_DRIVER_VERSION": f'"{v}"', "STUB_CUDA_VERSION": str(options(spec).cuda_version),
               "STUB_CC_MAJOR": cc_major, "STUB_CC_MINOR": cc_minor, "STUB_BRAND": str(options(spec).nvidia_brand),
               "STUB_STATE": f'"{root}{SIM_STATE}/nvml"', "STUB_NV_GPUS": str(max(count, 1)),
               "STUB_FANS": str(spec.fans), "STUB_REACT": f'"{react_command(root)}"'}
    os.makedirs(root + LIB_DIR, exist_ok=True)
    for stem, (soname, source) in NVIDIA_LIBS.items():
        so = soname.format(v=v)
        built = stubs.build(source, f"{stem}.{v}", soname=so, defines={**defines, "STUB_NAME": f'"{so}"'})
        shutil.copy2(built, f"{root}{LIB_DIR}/{stem}.{v}")
    os.makedirs(root + "/usr/bin", exist_ok=True)
    for name, source in NVIDIA_TOOLS.items():
        shutil.copy2(stubs.build(source, name), f"{root}/usr/bin/{name}")
    write(root, "/etc/ld.so.conf", f"{LIB_DIR}\n")
    run([LDCONFIG, "-r", root])  # the host's ldconfig, chrooted into the fake host: links + a real cache


def set_telemetry(root: str, index: int, **values: int) -> sim_telemetry.Telemetry:
    """Change what the stub NVML reports for GPU `index` (utilization=%, memory_used=, memory_total= bytes,
    power_mw=, temperature= C, clock_mhz=); the rest stays. Takes effect on the next NVML call."""
    return sim_telemetry.put(root, "nvml", index, IDLE, **values)
