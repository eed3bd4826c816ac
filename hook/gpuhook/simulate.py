"""Build a fake GPU host tree: procfs/sysfs text, real device nodes, real stub ELF libraries."""

from __future__ import annotations

import os
import shutil
import stat
from dataclasses import dataclass

from gpuhook import stubs
from gpuhook.errors import SimulatorError
from gpuhook.proc import run

MARKER = ".gpuhook-simulated"
SIM_STATE = "/var/lib/gpuhook-sim"  # the stub NVML's and amd_smi's state, under the simulated root
LDCONFIG = "/sbin/ldconfig"
RENDER_GID = 109
VIDEO_GID = 44
NV_MAJOR, UVM_MAJOR, KFD_MAJOR, DRI_MAJOR = 195, 509, 511, 226
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
NVIDIA_TOOLS = {"nvidia-smi": "nvidia_smi.c", "nvidia-debugdump": "tool.c", "nvidia-cuda-mps-control": "tool.c"}


@dataclass(frozen=True, slots=True)
class HostSpec:
    """What the simulated host has."""

    nvidia: int = 0
    amd: int = 0
    nvidia_driver: str = "550.54.15"
    cuda_version: int = 12040  # what the stub libcuda's cuDriverGetVersion reports
    nvidia_arch: str = "9.0"  # compute capability the stub NVML reports for every GPU
    nvidia_brand: int = 2  # nvmlBrandType_t the stub NVML reports (2: Tesla)
    amd_driver: str | None = "6.7.0"  # None: the in-kernel amdgpu (no /sys/module/amdgpu/version)
    gfx_target_version: int = 90402  # gfx942
    bmc_card: bool = True  # a VGA card0 (a BMC) before the AMD GPUs' card nodes, as on servers
    drivers_without_gpus: tuple[str, ...] = ()  # vendors whose driver is loaded even with no GPU
    amdsmi: bool = True  # a stub libamd_smi.so in /opt/rocm/lib (else tuning falls back to amdgpu sysfs)
    host_rocm: tuple[str, ...] = ()  # ROCm user-space trees under /opt/rocm-<version>; /opt/rocm -> the last
    rocm_data_mb: int = 0  # a sparse data file of this size in each ROCm tree, like rocBLAS's kernel libraries


def build_host(root: str, spec: HostSpec) -> str:
    """Create (or re-create) a simulated host at `root`; return its absolute path. Needs root for mknod."""
    root = os.path.abspath(root)
    _prepare(root)
    if spec.nvidia or "nvidia" in spec.drivers_without_gpus:
        _nvidia(root, spec)
    if spec.amd or "amd" in spec.drivers_without_gpus:
        _amd(root, spec)
    for version in spec.host_rocm:
        _rocm_tree(root, version, spec.rocm_data_mb)
    if spec.host_rocm:
        os.symlink(f"rocm-{spec.host_rocm[-1]}", root + "/opt/rocm")
    if spec.amd and spec.amdsmi:
        _amdsmi(root, spec)
    with open(os.path.join(root, MARKER), "w") as f:
        f.write(f"nvidia={spec.nvidia} amd={spec.amd}\n")
    return root


def _prepare(root: str) -> None:
    if os.path.isdir(root) and os.listdir(root):
        if not os.path.exists(os.path.join(root, MARKER)):
            raise SimulatorError(f"{root} is not empty and was not made by gpuhook simulate: "
                                 "pick an empty or new directory")
        shutil.rmtree(root)
    os.makedirs(root, exist_ok=True)
    if os.geteuid() != 0:
        raise SimulatorError("simulate makes real device nodes (mknod) and must run as root")


def _write(root: str, path: str, text: str) -> None:
    full = root + path
    os.makedirs(os.path.dirname(full), exist_ok=True)
    with open(full, "w") as f:
        f.write(text)


def _node(root: str, path: str, major: int, minor: int, mode: int, gid: int) -> None:
    full = root + path
    os.makedirs(os.path.dirname(full), exist_ok=True)
    os.mknod(full, stat.S_IFCHR | mode, os.makedev(major, minor))
    os.chown(full, 0, gid)
    os.chmod(full, mode)


def _nvidia(root: str, spec: HostSpec) -> None:
    v = spec.nvidia_driver
    _write(root, "/proc/driver/nvidia/params",
           "ResmanDebugLevel: 4294967295\nRmLogonRC: 1\nModifyDeviceFiles: 1\nDeviceFileUID: 0\n"
           "DeviceFileGID: 0\nDeviceFileMode: 438\nInitializeSystemMemoryAllocations: 1\n")
    _write(root, "/proc/driver/nvidia/registry", "Binary: \"\"\n")
    _write(root, "/proc/driver/nvidia/version",
           f"NVRM version: NVIDIA UNIX x86_64 Kernel Module  {v}  Thu Jan  1 00:00:00 UTC 2026\n"
           "GCC version:  gcc version 12.2.0 (Debian 12.2.0-14)\n")
    for i in range(spec.nvidia):
        bdf = f"0000:{0x10 + i:02x}:00.0"
        _write(root, f"/proc/driver/nvidia/gpus/{bdf}/information",
               f"Model: \t\t NVIDIA H100 80GB HBM3\nIRQ:   \t\t {100 + i}\n"
               f"GPU UUID: \t GPU-{i:08x}-5a1e-4000-8000-{0xD00D0000 + i:012x}\n"
               f"Video BIOS: \t 96.00.99.00.01\nBus Type: \t PCIe\nDMA Size: \t 52 bits\n"
               f"Bus Location: \t {bdf}\nDevice Minor: \t {i}\nGPU Excluded:\t No\n")
        _node(root, f"/dev/nvidia{i}", NV_MAJOR, i, 0o666, 0)
    _node(root, "/dev/nvidiactl", NV_MAJOR, 255, 0o666, 0)
    _node(root, "/dev/nvidia-modeset", NV_MAJOR, 254, 0o666, 0)
    _node(root, "/dev/nvidia-uvm", UVM_MAJOR, 0, 0o666, 0)
    _node(root, "/dev/nvidia-uvm-tools", UVM_MAJOR, 1, 0o666, 0)
    cc_major, cc_minor = spec.nvidia_arch.split(".")
    os.makedirs(root + SIM_STATE, exist_ok=True)
    defines = {"STUB_DRIVER_VERSION": f'"{v}"', "STUB_CUDA_VERSION": str(spec.cuda_version),
               "STUB_CC_MAJOR": cc_major, "STUB_CC_MINOR": cc_minor, "STUB_BRAND": str(spec.nvidia_brand),
               "STUB_STATE": f'"{root}{SIM_STATE}/nvml"', "STUB_NV_GPUS": str(max(spec.nvidia, 1))}
    os.makedirs(root + LIB_DIR, exist_ok=True)
    for stem, (soname, source) in NVIDIA_LIBS.items():
        so = soname.format(v=v)
        built = stubs.build(source, f"{stem}.{v}", soname=so, defines={**defines, "STUB_NAME": f'"{so}"'})
        shutil.copy2(built, f"{root}{LIB_DIR}/{stem}.{v}")
    os.makedirs(root + "/usr/bin", exist_ok=True)
    for name, source in NVIDIA_TOOLS.items():
        shutil.copy2(stubs.build(source, name), f"{root}/usr/bin/{name}")
    _write(root, "/etc/ld.so.conf", f"{LIB_DIR}\n")
    run([LDCONFIG, "-r", root])  # the host's ldconfig, chrooted into the fake host: links + a real cache


def _amd(root: str, spec: HostSpec) -> None:
    topo = "/sys/class/kfd/kfd/topology/nodes"
    _write(root, f"{topo}/0/properties", "cpu_cores_count 64\nsimd_count 0\nmem_banks_count 1\n"
           "gfx_target_version 0\nvendor_id 0\ndevice_id 0\nlocation_id 0\ndomain 0\ndrm_render_minor 0\n")
    _write(root, f"{topo}/0/gpu_id", "0\n")
    _write(root, f"{topo}/0/name", "\n")
    first_card = 1 if spec.bmc_card else 0
    if spec.bmc_card:
        _drm(root, "0000:02:00.0", "card0")
        _node(root, "/dev/dri/card0", DRI_MAJOR, 0, 0o660, VIDEO_GID)
    for i in range(spec.amd):
        bus = 0x80 + i
        render_minor, card = 128 + i, first_card + i
        _write(root, f"{topo}/{i + 1}/properties",
               f"cpu_cores_count 0\nsimd_count 304\nmem_banks_count 1\n"
               f"gfx_target_version {spec.gfx_target_version}\nvendor_id 4098\ndevice_id 29857\n"
               f"location_id {bus << 8}\ndomain 0\ndrm_render_minor {render_minor}\n"
               f"unique_id {0x5A1E000000000000 + i}\n")
        _write(root, f"{topo}/{i + 1}/gpu_id", f"{1000 + i}\n")
        _write(root, f"{topo}/{i + 1}/name", "gfx942\n")
        pci = f"0000:{bus:02x}:00.0"
        _drm(root, pci, f"card{card}")
        _drm(root, pci, f"renderD{render_minor}")
        _node(root, f"/dev/dri/card{card}", DRI_MAJOR, card, 0o660, VIDEO_GID)
        _node(root, f"/dev/dri/renderD{render_minor}", DRI_MAJOR, render_minor, 0o660, RENDER_GID)
        _amdgpu_sysfs(root, f"/sys/devices/pci0000:00/{pci}")
    _node(root, "/dev/kfd", KFD_MAJOR, 0, 0o660, RENDER_GID)
    if spec.amd_driver:
        _write(root, "/sys/module/amdgpu/version", spec.amd_driver + "\n")


def _rocm_tree(root: str, version: str, data_mb: int) -> None:
    """/opt/rocm-<version>: .info/version, a stub libamdhip64 with its SONAME, a stub rocminfo, sparse data."""
    base = f"{root}/opt/rocm-{version}"
    _write(root, f"/opt/rocm-{version}/.info/version", f"{version}-66\n")
    os.makedirs(f"{base}/lib", exist_ok=True)
    major = version.split(".")[0]
    so = f"libamdhip64.so.{major}"
    lib = stubs.build("generic.c", f"libamdhip64.so.{version}", soname=so, defines={"STUB_NAME": f'"hip {version}"'})
    shutil.copy2(lib, f"{base}/lib/libamdhip64.so.{version}")
    os.symlink(f"libamdhip64.so.{version}", f"{base}/lib/{so}")
    os.makedirs(f"{base}/bin", exist_ok=True)
    shutil.copy2(stubs.build("tool.c", "rocminfo"), f"{base}/bin/rocminfo")
    if data_mb:
        os.makedirs(f"{base}/lib/rocblas/library", exist_ok=True)
        with open(f"{base}/lib/rocblas/library/TensileLibrary_gfx942.dat", "wb") as f:
            f.truncate(data_mb * 1024 * 1024)  # sparse: its size counts, its blocks cost nothing


def _amdgpu_sysfs(root: str, device: str) -> None:
    """amdgpu's tunables as plain files (writes replace the text: no kernel semantics behind them)."""
    _write(root, f"{device}/power_dpm_force_performance_level", "auto\n")
    _write(root, f"{device}/pp_dpm_sclk", "0: 500Mhz *\n1: 1200Mhz\n2: 1700Mhz\n3: 2100Mhz\n")
    _write(root, f"{device}/hwmon/hwmon0/power1_cap", "300000000\n")
    _write(root, f"{device}/hwmon/hwmon0/power1_cap_max", "750000000\n")


def _amdsmi(root: str, spec: HostSpec) -> None:
    """A stub libamd_smi.so with every symbol the amdsmi package binds, where amdsmi looks: /opt/rocm/lib."""
    implemented = {"amdsmi_init", "amdsmi_shut_down", "amdsmi_get_socket_handles", "amdsmi_get_processor_handles",
                   "amdsmi_get_gpu_device_bdf", "amdsmi_get_gpu_perf_level", "amdsmi_set_gpu_perf_level",
                   "amdsmi_get_power_cap_info", "amdsmi_set_power_cap", "amdsmi_set_gpu_clk_range"}
    rest = "".join(f"int {name}(void) {{ return 2; }}\n" for name in stubs.amdsmi_symbols() if name not in implemented)
    os.makedirs(root + SIM_STATE, exist_ok=True)
    lib = stubs.build("amd_smi.c", "libamd_smi.so", soname="libamd_smi.so",
                      defines={"STUB_STATE": f'"{root}{SIM_STATE}/amdsmi"', "STUB_AMD_GPUS": str(spec.amd)},
                      extra_code=rest)
    lib_dir = os.path.realpath(root + "/opt/rocm") + "/lib" if os.path.islink(root + "/opt/rocm") else \
        root + "/opt/rocm/lib"
    os.makedirs(lib_dir, exist_ok=True)
    shutil.copy2(lib, f"{lib_dir}/libamd_smi.so")


def _drm(root: str, pci: str, name: str) -> None:
    real = f"/sys/devices/pci0000:00/{pci}/drm/{name}"
    os.makedirs(root + real, exist_ok=True)
    _write(root, f"{real}/dev", "\n")
    os.makedirs(root + "/sys/class/drm", exist_ok=True)
    link = f"{root}/sys/class/drm/{name}"
    if not os.path.islink(link):
        os.symlink("../../devices/pci0000:00/" + pci + "/drm/" + name, link)
