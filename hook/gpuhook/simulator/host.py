"""What every vendor's simulator shares: the simulated host's spec and the files, PCI devices and device nodes
they write under its root (the vendors' sim modules build their part; testing/simulate.py puts them together)."""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass

MARKER = ".gpuhook-simulated"
SIM_STATE = "/var/lib/gpuhook-sim"  # the stub NVML's and amd_smi's state, under the simulated root
@dataclass(frozen=True, slots=True)
class HostSpec:
    """What the simulated host has."""

    nvidia: int = 0
    amd: int = 0
    hygon: int = 0  # Hygon DCUs (a host has AMD GPUs or Hygon DCUs: each driver owns /dev/kfd)
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
    others: tuple[tuple[str, int], ...] = ()  # GPUs of vendors registered from outside: (name, count)
    numa_nodes: int = 1  # each vendor's GPUs spread evenly over this many NUMA nodes (sysfs numa_node)
    mig: tuple[str, ...] = ()  # NVIDIA MIG profiles (1g.10gb, 3g.40gb, ...) made on each MIG GPU, in order
    mig_capable: bool = False  # NVIDIA GPUs MIG capable (MIG mode off) though `mig` makes none
    mig_gpus: int | None = None  # how many NVIDIA GPUs (the first ones) are in MIG mode; None: all, when `mig`
    amd_partitions: str = "SPX"  # every AMD GPU's compute partition mode: SPX (whole), DPX, QPX, CPX (8 partitions)
    amd_memory_partition: str = "NPS1"  # and its memory partition mode (NPS1, NPS4)
    hygon_driver: str = "6.2.26"  # the DCU driver's version (the module is hydcu up to 6.2, hycu from 6.3)
    hyhal: bool = True  # the driver's HAL in /opt/hyhal (hy-smi, librocm_smi64)
    fans: int = 1  # fans on each GPU the stubs report (0: passively cooled, as SXM and OAM boards are)

    def gpus_of(self, vendor: str) -> int:
        """How many GPUs of `vendor` the host has."""
        return {"nvidia": self.nvidia, "amd": self.amd, "hygon": self.hygon, **dict(self.others)}.get(vendor, 0)


def write(root: str, path: str, text: str) -> None:
    """A text file at host path `path` under `root` (its directories made)."""
    full = root + path
    os.makedirs(os.path.dirname(full), exist_ok=True)
    with open(full, "w") as f:
        f.write(text)


def pci_device(root: str, pci: str, index: int, count: int, spec: HostSpec, vendor: str = "") -> str:
    """The PCI device's sysfs directory (host path) with its NUMA node and PCI vendor id (0x10de), linked from
    /sys/bus/pci/devices."""
    device = f"/sys/devices/pci0000:00/{pci}"
    if vendor:
        write(root, f"{device}/vendor", vendor + "\n")
    numa = index * spec.numa_nodes // max(count, 1) if spec.numa_nodes > 1 else -1
    write(root, f"{device}/numa_node", f"{numa}\n")
    link = f"{root}/sys/bus/pci/devices/{pci}"
    os.makedirs(os.path.dirname(link), exist_ok=True)
    if not os.path.lexists(link):
        os.symlink(f"../../../devices/pci0000:00/{pci}", link)
    return device


def node(root: str, path: str, major: int, minor: int, mode: int, gid: int) -> None:
    """A real character device node at host path `path` under `root`, owned by root:`gid`."""
    full = root + path
    os.makedirs(os.path.dirname(full), exist_ok=True)
    os.mknod(full, stat.S_IFCHR | mode, os.makedev(major, minor))
    os.chown(full, 0, gid)
    os.chmod(full, mode)


def react_command(root: str) -> str:
    """The command a stub driver library runs to play the driver's reaction to a change (a partition mode, MIG
    instances): the simulator, rebuilding what the change moves (testing/react.py)."""
    import sys

    return f"{sys.executable} -m gpuhook.testing.react {root}"
