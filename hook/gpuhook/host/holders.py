"""Which processes hold a GPU's device nodes open, wherever they run (a container, the host, a daemon): what must
end before a driver can be unloaded. Each process's open files are stat'ed through /proc/<pid>/fd (the kernel's
links, never a path in a container), at most MAX_FDS a process, and its cgroup read bounded. Reads /proc."""

from __future__ import annotations

import os
import stat

from gpuhook.frozen import frozen
from gpuhook.statefile import read_bounded

MAX_FDS = 65536  # a process's file table scanned at most this far
_MAX_CGROUP = 16384


@frozen
class Holder:
    """A process with GPU device nodes open."""

    pid: int
    command: str
    nodes: tuple[tuple[int, int], ...]  # (major, minor) of the nodes it holds
    cgroup: str  # its cgroup (v2's, else the devices controller's): which container it is in


def holders(numbers: frozenset[tuple[int, int]], proc: str = "/proc") -> list[Holder]:
    """The processes with one of `numbers` (character devices, (major, minor)) open, by pid."""
    out = []
    for entry in os.listdir(proc):
        if not entry.isdigit():
            continue
        held = _held(f"{proc}/{entry}/fd", numbers)
        if held:
            out.append(Holder(int(entry), _text(f"{proc}/{entry}/comm", 64), tuple(sorted(held)),
                              _cgroup(f"{proc}/{entry}/cgroup")))
    return sorted(out, key=lambda h: h.pid)


def _held(fd_dir: str, numbers: frozenset[tuple[int, int]]) -> set[tuple[int, int]]:
    found: set[tuple[int, int]] = set()
    try:
        fds = os.listdir(fd_dir)
    except OSError:  # gone, or not ours to read
        return found
    for fd in fds[:MAX_FDS]:
        try:
            st = os.stat(f"{fd_dir}/{fd}")
        except OSError:
            continue
        if stat.S_ISCHR(st.st_mode) and (n := (os.major(st.st_rdev), os.minor(st.st_rdev))) in numbers:
            found.add(n)
    return found


def _text(path: str, limit: int) -> str:
    """A procfs file's text ("" when it cannot be read, or is longer than `limit`)."""
    try:
        return read_bounded(path, limit).decode(errors="replace").strip()
    except OSError:
        return ""


def _cgroup(path: str) -> str:
    lines = _text(path, _MAX_CGROUP).splitlines()
    unified = next((ln.split(":", 2)[2] for ln in lines if ln.startswith("0::")), "")
    devices = next((ln.split(":", 2)[2] for ln in lines if ":devices:" in ln), "")
    return devices if unified in ("", "/") and devices else unified
