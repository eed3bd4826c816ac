"""The simulator's Hygon DCU driver: K100_AI DCUs (gfx928, 120 CUs, 64 GiB) in the KFD topology after any other
nodes, their DRM nodes and PCI devices (vendor 0x1d94) with the files hycu keeps from amdgpu, /dev/kfd and
/dev/mkfd, the driver's module (hydcu up to 6.2, hycu from 6.3) and the host's HAL under /opt/hyhal (a stub hy-smi
and librocm_smi64)."""

from __future__ import annotations

import os
import shutil

from gpuhook.errors import SimulatorError
from gpuhook.frozen import frozen
from gpuhook.simulator import stub_libs as stubs
from gpuhook.simulator import telemetry as sim_telemetry
from gpuhook.simulator.host import HostSpec, node, pci_device, settings_of, write
from gpuhook.vendors.amd import sim as amd_sim

TOPOLOGY = "/sys/class/kfd/kfd/topology/nodes"
MKFD_MAJOR = 510
K100_AI = 0x6210
VRAM = 65520 << 20  # 65520 MiB, as hy-smi reports a K100_AI's
GFX928 = 90208
IDLE = sim_telemetry.Telemetry(0, 268435456, VRAM, 60000, 36, 1500)  # an idle K100_AI, as its sysfs files say


STATE = ""  # no stub library of its own keeps state
REACTIONS: tuple[str, ...] = ()
DEMO = "ls -l /dev/kfd /dev/mkfd /dev/dri; ls /opt/hyhal; id"

@frozen
class Options:
    """The simulated Hygon driver's settings, by the names HostSpec takes them."""

    hygon_driver: str = "6.2.26"  # the DCU driver's version (the module is hydcu up to 6.2, hycu from 6.3)
    hyhal: bool = True  # the driver's HAL in /opt/hyhal (hy-smi, librocm_smi64)


OPTIONS: type = Options


def options(spec: HostSpec) -> Options:
    """This driver's settings in `spec`."""
    return settings_of(spec, Options)



def react(root: str, spec: HostSpec, what: str, index: int, value: str) -> HostSpec | None:
    """No reactions: DCU partitions are not simulated."""
    from gpuhook.errors import SimulatorError

    raise SimulatorError(f"the simulated Hygon driver does not react to {what!r}")


def settle(root: str) -> None:
    """Nothing to follow."""


def build(root: str, spec: HostSpec, count: int) -> None:
    """`count` DCUs, numbered after the KFD nodes, cards and render nodes already there (a BMC's card0 first)."""
    if spec.gpus_of("amd"):
        raise SimulatorError("a host runs amdgpu or Hygon's hycu, not both (each owns /dev/kfd): simulate AMD GPUs "
                             "or Hygon DCUs")
    if not os.path.exists(f"{root}{TOPOLOGY}/0"):
        write(root, f"{TOPOLOGY}/0/properties", "cpu_cores_count 64\nsimd_count 0\nmem_banks_count 1\n"
              "gfx_target_version 0\nvendor_id 0\ndevice_id 0\nlocation_id 0\ndomain 0\ndrm_render_minor 0\n")
    first_node = len([n for n in os.listdir(root + TOPOLOGY) if n.isdigit()])
    cards = _taken(root, "card")
    if amd_sim.options(spec).bmc_card and not cards:
        amd_sim.drm_minor(root, "0000:02:00.0", "card0")
        node(root, "/dev/dri/card0", amd_sim.DRI_MAJOR, 0, 0o660, amd_sim.VIDEO_GID)
        cards = 1
    renders = _taken(root, "renderD")
    for i in range(count):
        bus, k = 0x40 + i, first_node + i
        pci, card, render = f"0000:{bus:02x}:00.0", cards + i, 128 + renders + i
        write(root, f"{TOPOLOGY}/{k}/properties",
              f"cpu_cores_count 0\nsimd_count 480\nsimd_per_cu 4\nmem_banks_count 1\n"
              f"gfx_target_version {GFX928}\nvendor_id 7316\ndevice_id {K100_AI}\n"
              f"location_id {bus << 8}\ndomain 0\ndrm_render_minor {render}\nunique_id {0xDC0000000000 + i}\n")
        write(root, f"{TOPOLOGY}/{k}/mem_banks/0/properties", f"heap_type 1\nsize_in_bytes {VRAM}\nflags 0\n")
        write(root, f"{TOPOLOGY}/{k}/gpu_id", f"{2000 + i}\n")
        write(root, f"{TOPOLOGY}/{k}/name", "gfx928\n")
        amd_sim.drm_minor(root, pci, f"renderD{render}")
        node(root, f"/dev/dri/renderD{render}", amd_sim.DRI_MAJOR, render, 0o660, amd_sim.RENDER_GID)
        amd_sim.drm_minor(root, pci, f"card{card}")
        node(root, f"/dev/dri/card{card}", amd_sim.DRI_MAJOR, card, 0o660, amd_sim.VIDEO_GID)
        device = pci_device(root, pci, i, count, spec, "0x1d94")
        amd_sim.amdgpu_sysfs(root, device, spec.fans, product="", idle=IDLE)
    if not os.path.exists(root + "/dev/kfd"):
        node(root, "/dev/kfd", amd_sim.KFD_MAJOR, 0, 0o660, amd_sim.RENDER_GID)
    node(root, "/dev/mkfd", MKFD_MAJOR, 0, 0o660, amd_sim.RENDER_GID)
    module = "hycu" if tuple(int(x) for x in options(spec).hygon_driver.split(".")[:2]) >= (6, 3) else "hydcu"
    write(root, f"/sys/module/{module}/version", options(spec).hygon_driver + "\n")
    write(root, f"/sys/module/{module}/initstate", "live\n")
    if options(spec).hyhal:
        _hal(root)


def _taken(root: str, prefix: str) -> int:
    """How many DRM minors of this kind (card, renderD) the simulated host has already."""
    drm = root + "/sys/class/drm"
    return len([n for n in os.listdir(drm) if n.startswith(prefix)]) if os.path.isdir(drm) else 0


def _hal(root: str) -> None:
    """/opt/hyhal as the driver installs it: bin/hy-smi, lib/librocm_smi64.so.2 (stubs), env.sh."""
    os.makedirs(f"{root}/opt/hyhal/bin", exist_ok=True)
    shutil.copy2(stubs.build("tool.c", "hy-smi"), f"{root}/opt/hyhal/bin/hy-smi")
    os.makedirs(f"{root}/opt/hyhal/lib", exist_ok=True)
    lib = stubs.build("generic.c", "librocm_smi64.so.2.hyhal", soname="librocm_smi64.so.2",
                      defines={"STUB_NAME": '"hyhal rocm_smi"'})
    shutil.copy2(lib, f"{root}/opt/hyhal/lib/librocm_smi64.so.2")
    write(root, "/opt/hyhal/env.sh", "export PATH=/opt/hyhal/bin:$PATH\n"
          "export LD_LIBRARY_PATH=/opt/hyhal/lib:$LD_LIBRARY_PATH\n")
