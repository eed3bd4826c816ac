"""Whether a container's init process is still the one gpuhook saw: its pid and its start time.

A pid can be reused; field 22 of /proc/<pid>/stat (start time in clock ticks since boot) tells the reuse
apart. Reads the real host's /proc (a container's pid is a host pid, whatever host_root says).
"""

from __future__ import annotations

import os


def start_time(pid: int) -> str:
    """A live process's start time; "" when it is gone or a zombie (a killed container's init may wait a
    while to be reaped). Reads /proc."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return ""
    return fields[19] if len(fields) > 19 and fields[0] not in ("Z", "X") else ""


def alive(pid: int, start: str) -> bool:
    """Whether process `pid` is alive and started at `start`."""
    return bool(start) and start_time(pid) == start


def holder_alive(holder: dict[str, object]) -> bool:
    """Whether a ledger holder's container ({"pid": ..., "start": ...}: its init) is still there; for one the shim
    recorded before runc made the container ({"root": runc's state directory}, "pid" the process that execs runc),
    that process, else runc's state.json there (runc removes it before it runs the poststop hooks). Reads /proc."""
    if alive(int(str(holder.get("pid", 0))), str(holder.get("start") or "")):
        return True
    root, cid = holder.get("root"), str(holder.get("id") or "")
    if not isinstance(root, str) or not root.startswith("/") or not cid or "/" in cid or cid in (".", ".."):
        return False
    return os.path.isfile(os.path.join(root, cid, "state.json"))
