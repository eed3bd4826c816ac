"""The simulator's amdgpu: KFD topology, DRM nodes and sysfs links, amdgpu tunables, ROCm trees, stub amd_smi."""

from __future__ import annotations

import os
import shutil

from gpuhook.errors import SimulatorError
from gpuhook.frozen import frozen
from gpuhook.simulator import stub_libs as stubs
from gpuhook.simulator import telemetry as sim_telemetry
from gpuhook.simulator.host import SIM_STATE, HostSpec, node, pci_device, react_command, settings_of, write

RENDER_GID = 109
VIDEO_GID = 44
KFD_MAJOR, DRI_MAJOR = 511, 226
MI300X_VRAM = 205822885888  # bytes in an MI300X's KFD memory bank (192G as the node labeller rounds it)
PRODUCT_NAME = "AMD Instinct MI300X OAM"  # amdgpu's product_name, from the board's FRU
# What the stub amd_smi and the sysfs files report for a GPU nobody set (stubs/amd_smi.c): an idle MI300X
IDLE = sim_telemetry.Telemetry(0, 296747008, MI300X_VRAM, 140000, 40, 2100)
PARTITIONS = {"SPX": 1, "DPX": 2, "QPX": 4, "CPX": 8}  # an MI300X's compute partition modes (8 XCDs)
MEMORY_PARTITIONS = ("NPS1", "NPS4")  # and its memory partition modes


STATE = "amdsmi"  # the stub amd-smi's settings: reset with the GPUs a partition change re-lays, as the driver's are
REACTIONS: tuple[str, ...] = ("compute-partition", "memory-partition")
DEMO = "ls -l /dev/kfd /dev/dri; id"

@frozen
class Options:
    """The simulated amdgpu's settings, by the names HostSpec takes them."""

    amd_driver: str | None = "6.7.0"  # None: the in-kernel amdgpu (no /sys/module/amdgpu/version)
    gfx_target_version: int = 90402  # gfx942
    bmc_card: bool = True  # a VGA card0 (a BMC) before the GPUs' card nodes, as on servers
    amdsmi: bool = True  # a stub libamd_smi.so in /opt/rocm/lib (else tuning falls back to amdgpu sysfs)
    host_rocm: tuple[str, ...] = ()  # ROCm user-space trees under /opt/rocm-<version>; /opt/rocm -> the last
    rocm_data_mb: int = 0  # a sparse data file of this size in each ROCm tree, like rocBLAS's kernel libraries
    amd_partitions: str = "SPX"  # every GPU's compute partition mode: SPX (whole), DPX, QPX, CPX (8 partitions)
    amd_memory_partition: str = "NPS1"  # and its memory partition mode (NPS1, NPS4)


OPTIONS: type = Options


def options(spec: HostSpec) -> Options:
    """This driver's settings in `spec`."""
    return settings_of(spec, Options)



def react(root: str, spec: HostSpec, what: str, index: int, value: str) -> HostSpec | None:
    """A GPU's compute or memory partition mode changed through the stub amd-smi: the host is rebuilt with that GPU
    in its new mode, as amdgpu re-lays its KFD and render nodes."""
    field = "amd_partitions" if what == "compute-partition" else "amd_memory_partition"
    modes = per_gpu(getattr(options(spec), field), spec.gpus_of("amd"))
    modes[index] = value
    return spec.replace(**{field: ",".join(modes)})


def settle(root: str) -> None:
    """Nothing: AMD's files are made whole by build."""


def per_gpu(modes: str, count: int) -> list[str]:
    """One mode for every GPU ("CPX"), or each GPU's in order ("SPX,CPX"; the last one for the rest)."""
    each = [m.strip().upper() for m in modes.split(",")] or ["SPX"]
    return [each[min(i, len(each) - 1)] for i in range(count)]


def build(root: str, spec: HostSpec, count: int) -> None:
    """KFD topology, DRM nodes and links, amdgpu sysfs, host ROCm trees and a stub libamd_smi."""
    o = options(spec)
    topo = "/sys/class/kfd/kfd/topology/nodes"
    write(root, f"{topo}/0/properties", "cpu_cores_count 64\nsimd_count 0\nmem_banks_count 1\n"
           "gfx_target_version 0\nvendor_id 0\ndevice_id 0\nlocation_id 0\ndomain 0\ndrm_render_minor 0\n")
    write(root, f"{topo}/0/gpu_id", "0\n")
    write(root, f"{topo}/0/name", "\n")
    first_card = 1 if o.bmc_card else 0
    if o.bmc_card:
        drm_minor(root, "0000:02:00.0", "card0")
        node(root, "/dev/dri/card0", DRI_MAJOR, 0, 0o660, VIDEO_GID)
    computes, memories = per_gpu(o.amd_partitions, count), per_gpu(o.amd_memory_partition, count)
    if any(m not in PARTITIONS for m in computes):
        raise SimulatorError(f"--partitions {o.amd_partitions!r}: expected one of {', '.join(PARTITIONS)} (or one "
                             "a GPU, comma-separated)")
    done, xcp = 0, 0  # KFD nodes (and render minors) and amdgpu_xcp platform devices of the GPUs before
    for i in range(count):
        per = PARTITIONS[computes[i]]
        bus = 0x80 + i
        card = first_card + i
        pci = f"0000:{bus:02x}:00.0"
        for p in range(per):  # partition p: KFD node, render node (partition 0's on the PCI device)
            k = done + p
            render_minor = 128 + k
            write(root, f"{topo}/{k + 1}/properties",
                  f"cpu_cores_count 0\nsimd_count {1216 // per}\nsimd_per_cu 4\nmem_banks_count 1\n"
                  f"gfx_target_version {o.gfx_target_version}\nvendor_id 4098\ndevice_id 29857\n"
                  f"location_id {bus << 8 | (p if per > 1 else 0)}\ndomain 0\ndrm_render_minor {render_minor}\n"
                  f"unique_id {0x5A1E000000000000 + i}\n")
            write(root, f"{topo}/{k + 1}/mem_banks/0/properties",
                  f"heap_type 1\nsize_in_bytes {MI300X_VRAM // per}\nflags 0\nwidth 8192\nmem_clk_max 1300\n")
            write(root, f"{topo}/{k + 1}/gpu_id", f"{1000 + k}\n")
            write(root, f"{topo}/{k + 1}/name", "gfx942\n")
            drm_minor(root, pci if p == 0 else f"amdgpu_xcp_{xcp + p - 1}", f"renderD{render_minor}")
            node(root, f"/dev/dri/renderD{render_minor}", DRI_MAJOR, render_minor, 0o660, RENDER_GID)
        done, xcp = done + per, xcp + per - 1
        drm_minor(root, pci, f"card{card}")
        node(root, f"/dev/dri/card{card}", DRI_MAJOR, card, 0o660, VIDEO_GID)
        device = pci_device(root, pci, i, count, spec, "0x1002")
        amdgpu_sysfs(root, device, spec.fans)
        write(root, f"{device}/current_compute_partition", computes[i] + "\n")
        write(root, f"{device}/available_compute_partition", ", ".join(PARTITIONS) + "\n")
        write(root, f"{device}/current_memory_partition", memories[i] + "\n")
        write(root, f"{device}/available_memory_partition", ", ".join(MEMORY_PARTITIONS) + "\n")
    node(root, "/dev/kfd", KFD_MAJOR, 0, 0o660, RENDER_GID)
    write(root, "/sys/module/amdgpu/initstate", "live\n")  # in-tree or DKMS, the module is there
    if o.amd_driver:
        write(root, "/sys/module/amdgpu/version", f"{o.amd_driver}\n")
    for version in o.host_rocm:
        _rocm_tree(root, version, o.rocm_data_mb)
    if o.host_rocm:
        os.symlink(f"rocm-{o.host_rocm[-1]}", root + "/opt/rocm")
    if count and o.amdsmi:
        _amdsmi(root, spec, count)


def amdgpu_sysfs(root: str, device: str, fans: int, product: str = PRODUCT_NAME,
                 idle: sim_telemetry.Telemetry = IDLE) -> None:
    """amdgpu's tunables as plain files (writes replace the text: no kernel semantics behind them); the fan's pwm
    files where the board has a fan (amdgpu drives one per GPU: pwm1)."""
    write(root, f"{device}/power_dpm_force_performance_level", "auto\n")
    write(root, f"{device}/pp_dpm_sclk", "0: 500Mhz *\n1: 1200Mhz\n2: 1700Mhz\n3: 2100Mhz\n")
    write(root, f"{device}/hwmon/hwmon0/power1_cap", "300000000\n")
    write(root, f"{device}/hwmon/hwmon0/power1_cap_min", "100000000\n")  # the range amd-smi's stub says too
    write(root, f"{device}/hwmon/hwmon0/power1_cap_max", "750000000\n")
    if product:
        write(root, f"{device}/product_name", product + "\n")
    for block in ("umc", "gfx", "sdma", "mmhub"):  # RAS counters, clear (testing/faults.py raises errors)
        write(root, f"{device}/ras/{block}_err_count", "ue: 0\nce: 0\n")
    if fans:
        for name, value in (("pwm1_enable", 2), ("pwm1", 89), ("pwm1_min", 51), ("pwm1_max", 255)):
            write(root, f"{device}/hwmon/hwmon0/{name}", f"{value}\n")
    telemetry_files(root, device, idle)


def telemetry_files(root: str, device: str, t: sim_telemetry.Telemetry) -> None:
    """amdgpu's telemetry files: busy percent, VRAM, and the hwmon's power, junction temperature and sclk."""
    write(root, f"{device}/gpu_busy_percent", f"{t.utilization}\n")
    write(root, f"{device}/mem_info_vram_used", f"{t.memory_used}\n")
    write(root, f"{device}/mem_info_vram_total", f"{t.memory_total}\n")
    hwmon = f"{device}/hwmon/hwmon0"
    write(root, f"{hwmon}/power1_average", f"{t.power_mw * 1000}\n")
    for i, label in ((1, "edge"), (2, "junction"), (3, "mem")):
        write(root, f"{hwmon}/temp{i}_label", f"{label}\n")
        write(root, f"{hwmon}/temp{i}_input", f"{t.temperature * 1000 - (5000 if i == 1 else 0)}\n")
    write(root, f"{hwmon}/freq1_label", "sclk\n")
    write(root, f"{hwmon}/freq1_input", f"{t.clock_mhz * 1_000_000}\n")


def set_telemetry(root: str, index: int, **values: int) -> sim_telemetry.Telemetry:
    """Change what AMD GPU `index` reports, through the stub amd_smi and amdgpu's sysfs files alike
    (utilization=%, memory_used=, memory_total= bytes, power_mw=, temperature= C, clock_mhz=)."""
    now = sim_telemetry.put(root, "amdsmi", index, IDLE, **values)
    telemetry_files(root, f"/sys/devices/pci0000:00/0000:{0x80 + index:02x}:00.0", now)
    return now


def _amdsmi(root: str, spec: HostSpec, count: int) -> None:
    """A stub libamd_smi.so with every symbol the amdsmi package binds, where amdsmi looks: /opt/rocm/lib."""
    implemented = {"amdsmi_set_gpu_compute_partition", "amdsmi_set_gpu_memory_partition", "amdsmi_init",
                   "amdsmi_shut_down", "amdsmi_get_socket_handles", "amdsmi_get_processor_handles",
                   "amdsmi_get_gpu_device_bdf", "amdsmi_get_gpu_perf_level", "amdsmi_set_gpu_perf_level",
                   "amdsmi_get_power_cap_info", "amdsmi_set_power_cap", "amdsmi_set_gpu_clk_range",
                   "amdsmi_get_gpu_activity", "amdsmi_get_gpu_memory_total", "amdsmi_get_gpu_memory_usage",
                   "amdsmi_get_power_info", "amdsmi_get_temp_metric", "amdsmi_get_clock_info"}
    rest = "".join(f"int {name}(void) {{ return 2; }}\n" for name in stubs.amdsmi_symbols() if name not in implemented)
    os.makedirs(root + SIM_STATE, exist_ok=True)
    lib = stubs.build("amd_smi.c", "libamd_smi.so", soname="libamd_smi.so",
                      defines={"STUB_STATE": f'"{root}{SIM_STATE}/amdsmi"', "STUB_AMD_GPUS": str(count),
                               "STUB_REACT": f'"{react_command(root)}"'},
                      extra_code=rest)
    lib_dir = os.path.realpath(root + "/opt/rocm") + "/lib" if os.path.islink(root + "/opt/rocm") else \
        root + "/opt/rocm/lib"
    os.makedirs(lib_dir, exist_ok=True)
    shutil.copy2(lib, f"{lib_dir}/libamd_smi.so")


def drm_minor(root: str, device: str, name: str) -> None:
    """A DRM minor in sysfs under its device: a PCI address, or a platform device (amdgpu_xcp_<N>)."""
    parent = f"pci0000:00/{device}" if ":" in device else f"platform/{device}"
    real = f"/sys/devices/{parent}/drm/{name}"
    os.makedirs(root + real, exist_ok=True)
    write(root, f"{real}/dev", "\n")
    os.makedirs(root + "/sys/class/drm", exist_ok=True)
    link = f"{root}/sys/class/drm/{name}"
    if not os.path.islink(link):
        os.symlink(f"../../devices/{parent}/drm/{name}", link)


def _rocm_tree(root: str, version: str, data_mb: int) -> None:
    """/opt/rocm-<version>: .info/version, a stub libamdhip64 with its SONAME, a stub rocminfo, sparse data."""
    base = f"{root}/opt/rocm-{version}"
    write(root, f"/opt/rocm-{version}/.info/version", f"{version}-66\n")
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
