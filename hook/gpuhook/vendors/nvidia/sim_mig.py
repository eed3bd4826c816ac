"""The simulator's NVIDIA MIG devices: the driver's capabilities in procfs, /dev/nvidia-caps nodes, and the
table the stub NVML reads for MIG handles (stubs/nvml.c)."""

from __future__ import annotations

import os

from gpuhook.errors import SimulatorError
from gpuhook.simulator.host import SIM_STATE, HostSpec, node, write
from gpuhook.vendors.nvidia.sim_options import options

CAPS_MAJOR = 237
SLICES = 7  # an H100's compute slices
GPU_MINORS = 135  # mig-minors entries per GPU: 15 GPU instances, each with its access and 8 compute instances


def minor(gpu: int, gi: int, ci: int | None = None) -> int:
    """The nvidia-caps minor of GPU `gpu`'s GI `gi` (or its CI `ci`), as the driver's mig-minors numbers them."""
    return 3 + gpu * GPU_MINORS + gi * 9 + (0 if ci is None else 1 + ci)


def uuid(gpu: int, mig: int) -> str:
    """The simulated MIG device's UUID (its GPU's index and its own in the first groups)."""
    return f"MIG-{gpu:08x}-{mig:04x}-4000-8000-{0xC0FFEE000000 + gpu * 16 + mig:012x}"


def profile(name: str) -> tuple[int, int]:
    """(GI slices, memory MiB) of a profile name such as 3g.40gb; SimulatorError for another form."""
    g, dot, mem = name.partition(".")
    if not (dot and g.endswith("g") and g[:-1].isdigit() and mem.endswith("gb") and mem[:-2].isdigit()
            and 1 <= int(g[:-1]) <= SLICES):
        raise SimulatorError(f"--mig {name!r}: expected a profile such as 1g.10gb, 2g.20gb, 3g.40gb or 7g.80gb")
    return int(g[:-1]), int(mem[:-2]) * 1024 - 256


def build(root: str, spec: HostSpec, count: int) -> None:
    """MIG devices `mig` on each of the first `mig_gpus` GPUs (device minor = index): the driver's options."""
    o = options(spec)
    shapes = [profile(p) for p in o.mig]
    if sum(s for s, _ in shapes) > SLICES:
        raise SimulatorError(f"--mig {' '.join(o.mig)}: {sum(s for s, _ in shapes)} slices, a GPU has {SLICES}")
    write(root, "/proc/devices", f"Character devices:\n  1 mem\n195 nvidia\n{CAPS_MAJOR} nvidia-caps\n"
                                 "509 nvidia-uvm\n\nBlock devices:\n  8 sd\n")
    gpus = range(count if o.mig_gpus is None else min(o.mig_gpus, count)) if shapes else range(0)
    minors = ["config 1", "monitor 2"]
    for g in range(count):
        for gi in range(15):
            minors.append(f"gpu{g}/gi{gi}/access {minor(g, gi)}")
            minors += [f"gpu{g}/gi{gi}/ci{ci}/access {minor(g, gi, ci)}" for ci in range(8)]
    write(root, "/proc/driver/nvidia-caps/mig-minors", "\n".join(minors) + "\n")
    caps = "/proc/driver/nvidia/capabilities"
    write(root, f"{caps}/mig/config", "DeviceFileMinor: 1\nDeviceFileMode: 256\nDeviceFileModify: 1\n")
    write(root, f"{caps}/mig/monitor", "DeviceFileMinor: 2\nDeviceFileMode: 292\nDeviceFileModify: 1\n")
    node(root, "/dev/nvidia-caps/nvidia-cap1", CAPS_MAJOR, 1, 0o400, 0)
    node(root, "/dev/nvidia-caps/nvidia-cap2", CAPS_MAJOR, 2, 0o444, 0)
    table = []
    for g in gpus:
        for m, (slices, mib) in enumerate(shapes):
            gi, ci = m + 1, 0
            for rel, n in ((f"gi{gi}", minor(g, gi)), (f"gi{gi}/ci{ci}", minor(g, gi, ci))):
                write(root, f"{caps}/gpu{g}/mig/{rel}/access",
                      f"DeviceFileMinor: {n}\nDeviceFileMode: 292\nDeviceFileModify: 1\n")
                node(root, f"/dev/nvidia-caps/nvidia-cap{n}", CAPS_MAJOR, n, 0o444, 0)
            table.append(f"{g} {m} {gi} {ci} {slices} {slices} {mib} {uuid(g, m)}")
    write(root, f"{SIM_STATE}/nvml.mig", "".join(line + "\n" for line in table))
    write(root, f"{SIM_STATE}/nvml.migmode", "".join(f"{g} 1\n" for g in gpus))  # MIG mode stays on without devices


def sync(root: str, nodes: bool = False) -> None:
    """The driver's procfs capabilities of the MIG devices the stub NVML's table (SIM_STATE/nvml.mig) lists now,
    after it created or destroyed instances: each GPU's mig/gi<G>/access and gi<G>/ci<C>/access, as the driver
    keeps them. Device nodes are made only with `nodes` (a host rebuilt under them, as nvidia-modprobe would); on a
    running host nvidia-modprobe (or gpuhook partition apply) makes them."""
    import shutil

    caps = f"{root}/proc/driver/nvidia/capabilities"
    for entry in os.listdir(caps) if os.path.isdir(caps) else []:
        if entry.startswith("gpu") and os.path.isdir(f"{caps}/{entry}/mig"):
            shutil.rmtree(f"{caps}/{entry}/mig")
    with open(f"{root}{SIM_STATE}/nvml.mig") as f:
        rows = [line.split() for line in f if line.strip()]
    for g, _, gi, ci, *_ in rows:
        if int(ci) < 0:
            continue
        for rel, n in ((f"gi{gi}", minor(int(g), int(gi))), (f"gi{gi}/ci{ci}", minor(int(g), int(gi), int(ci)))):
            write(root, f"/proc/driver/nvidia/capabilities/gpu{g}/mig/{rel}/access",
                  f"DeviceFileMinor: {n}\nDeviceFileMode: 292\nDeviceFileModify: 1\n")
            if nodes and not os.path.lexists(f"{root}/dev/nvidia-caps/nvidia-cap{n}"):
                node(root, f"/dev/nvidia-caps/nvidia-cap{n}", CAPS_MAJOR, n, 0o444, 0)
