"""Who this process is on the host: a rootless engine runs its runtime and hooks in a user namespace whose root
is an ordinary user of the host."""

from __future__ import annotations

import os

UID_MAP = "/proc/self/uid_map"
_MAX = 64 << 10  # the kernel allows 340 lines of three numbers


def host_uid(uid_map: str, uid: int) -> int | None:
    """The host uid that `uid` of the namespace a `uid_map` text describes is; None where the map does not hold it."""
    for line in uid_map.splitlines()[:340]:
        parts = line.split()
        if len(parts) == 3 and all(p.isdigit() for p in parts):
            inside, outside, count = (int(p) for p in parts)
            if inside <= uid < inside + count:
                return outside + uid - inside
    return None


def own_host_uid() -> int:
    """The host uid this process runs as (0: root on the host), read from /proc/self/uid_map; without the file (no
    user namespaces in the kernel) its own euid."""
    euid = os.geteuid()
    try:
        with open(UID_MAP, "rb") as f:
            text = f.read(_MAX).decode("ascii", "replace")
    except OSError:
        return euid
    found = host_uid(text, euid)
    return 65534 if found is None else found  # an unmapped uid is the overflow user, never the host's root
