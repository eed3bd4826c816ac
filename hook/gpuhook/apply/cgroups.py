"""The device cgroup of a running container: allow more devices. cgroup v1: rules written to `devices.allow`;
cgroup v2 (unified): the runtime's eBPF device filter replaced by one compiled from the spec's rules, the runtime's
own and gpuhook's (device_filter.py compiles, cgroup_v2.py swaps). The only cgroup writers."""

from __future__ import annotations

import os
import sys

from gpuhook.edits import DeviceRule
from gpuhook.errors import CgroupError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Any

    from gpuhook.apply.cgroup_v2 import Swap

CGROUP_ROOT = "/sys/fs/cgroup"


def allow(pid: int, rules: Sequence[DeviceRule], spec: dict[str, Any] | None = None, proc: str = "/proc",
          cgroup_root: str = CGROUP_ROOT) -> Swap | None:
    """Allow `rules` in the device cgroup of process `pid`, whose config.json is `spec` (v2 keeps what it allows);
    on cgroup v2 the device filter swapped. Writes cgroupfs files (v1) or replaces the cgroup's BPF device program
    (v2)."""
    if not rules:
        return None
    with open(f"{proc}/{pid}/cgroup") as f:
        lines = f.read().splitlines()
    if unified(cgroup_root):  # what runc and crun check to choose: cgroup2 mounted at /sys/fs/cgroup
        path = next((ln[3:] for ln in lines if ln.startswith("0::")), None)
        if path is None:
            raise CgroupError(f"process {pid} has no cgroup v2 entry in {proc}/{pid}/cgroup")
        return _replace_filter(f"{cgroup_root}{path.rstrip('/')}", spec or {}, rules, runtime_of(proc))
    path = next((ln.split(":", 2)[2] for ln in lines if "devices" in ln.split(":", 2)[1].split(",")), None)
    if path is None:
        raise CgroupError(f"the container's cgroup has no devices controller ({cgroup_root} is not cgroup2 and no "
                          "cgroup v1 devices hierarchy holds the container)")
    base = _devices_mount(f"{proc}/self/mountinfo")
    allow_file = f"{base}{path.rstrip('/')}/devices.allow"
    try:
        for r in rules:
            with open(allow_file, "w") as f:  # one rule per write, as the kernel reads them
                f.write(f"{r.kind} {r.major}:{r.minor} {r.access}")
    except OSError as e:
        raise CgroupError(f"cannot allow the GPU devices in {allow_file}: {e.strerror}") from e
    return None


def _devices_mount(mountinfo: str) -> str:
    with open(mountinfo) as f:
        for line in f:
            left, _, right = line.partition(" - ")
            fields, super_fields = left.split(), right.split()
            if super_fields and super_fields[0] == "cgroup" and "devices" in super_fields[-1].split(","):
                return fields[4]
    raise CgroupError("no cgroup v1 devices hierarchy is mounted on this host")


def unified(cgroup_root: str = CGROUP_ROOT) -> bool:
    """Whether `cgroup_root` is a cgroup2 mount: the host (or this mount namespace) is cgroup v2 only."""
    from gpuhook import syscalls

    try:
        return syscalls.statfs_type(cgroup_root) == syscalls.CGROUP2_SUPER_MAGIC
    except OSError:
        return False


def runtime_of(proc: str = "/proc") -> str:
    """The runtime running this hook, by its parent's name: "crun", else "runc" (whose implicit rules other
    runtimes copy). The name, not the executable's path: the crun process running the hooks has an exe link
    that reads "/" (crun 1.8)."""
    try:
        with open(f"{proc}/{os.getppid()}/comm") as f:
            name = f.read().strip()
    except OSError:
        return "runc"
    return "crun" if name.startswith("crun") else "runc"


def _replace_filter(cgroup_dir: str, spec: dict[str, Any], rules: Sequence[DeviceRule], runtime: str) -> Swap | None:
    from gpuhook.apply import cgroup_v2, runtime_filter

    program = runtime_filter.compile_for(spec, runtime, rules, sys.byteorder)
    return cgroup_v2.replace_filter(cgroup_dir, program)
