"""The device cgroup of a running container: add allow rules (cgroup v1). The only cgroup writer."""

from __future__ import annotations

from gpuhook.edits import DeviceRule
from gpuhook.errors import CgroupError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence



def allow(pid: int, rules: Sequence[DeviceRule], proc: str = "/proc") -> None:
    """Allow `rules` in the device cgroup of process `pid`. Writes cgroupfs files."""
    if not rules:
        return
    with open(f"{proc}/{pid}/cgroup") as f:
        lines = f.read().splitlines()
    path = next((ln.split(":", 2)[2] for ln in lines if "devices" in ln.split(":", 2)[1].split(",")), None)
    if path is None:
        raise CgroupError("the container's cgroup is cgroup v2, whose device filter (eBPF) this gpuhook cannot "
                          "extend from a hook: use gpuhook-runtime (the shim), which lets runc build the filter")
    base = _devices_mount(f"{proc}/self/mountinfo")
    allow_file = f"{base}{path.rstrip('/')}/devices.allow"
    try:
        for r in rules:
            with open(allow_file, "w") as f:  # one rule per write, as the kernel reads them
                f.write(f"{r.kind} {r.major}:{r.minor} {r.access}")
    except OSError as e:
        raise CgroupError(f"cannot allow the GPU devices in {allow_file}: {e.strerror}") from e


def _devices_mount(mountinfo: str) -> str:
    with open(mountinfo) as f:
        for line in f:
            left, _, right = line.partition(" - ")
            fields, super_fields = left.split(), right.split()
            if super_fields and super_fields[0] == "cgroup" and "devices" in super_fields[-1].split(","):
                return fields[4]
    raise CgroupError("no cgroup v1 devices hierarchy is mounted on this host")
