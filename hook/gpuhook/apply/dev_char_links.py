"""`/dev/char/<major>:<minor>` links to the GPUs' device nodes (`gpuhook system create-dev-char-links`).

udev makes such a link for every device it manages; the nodes nvidia-modprobe makes have none. With the systemd
cgroup driver runc hands a container's device rules to systemd as `DeviceAllow=/dev/char/195:0 rw`, and systemd
before 240 (like runc 1.1.3 to 1.1.6 itself) drops a rule whose path does not exist; on the next `systemctl
daemon-reload` systemd rewrites the container's device filter from those rules, and the GPU is gone from a running
container ("Failed to initialize NVML: Unknown Error"). NVIDIA's toolkit makes the links for its nodes
(`nvidia-ctk system create-dev-char-symlinks`); this does the same for every GPU node gpuhook knows.
"""

from __future__ import annotations

import contextlib
import os
import stat

from gpuhook.errors import GpuhookError
from gpuhook.frozen import frozen

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable

    from gpuhook.edits import DeviceNode
    from gpuhook.host.root import Root


@frozen
class Link:
    """One link: its host path (e.g. /dev/char/195:0), its target relative to /dev/char, the node, its numbers."""

    path: str
    target: str
    node: str
    kind: str
    major: int
    minor: int


def wanted(nodes: Iterable[DeviceNode]) -> list[Link]:
    """The links `nodes` (host paths under /dev) should have, one per device number, in a fixed order. Pure."""
    out: dict[str, Link] = {}
    for n in sorted(nodes, key=lambda n: (n.kind, n.major, n.minor, n.path)):
        if not n.path.startswith("/dev/"):
            continue
        folder = "/dev/char" if n.kind == "c" else "/dev/block"
        path = f"{folder}/{n.major}:{n.minor}"
        out.setdefault(path, Link(path=path, target=os.path.relpath(n.path, folder), node=n.path, kind=n.kind,
                                  major=n.major, minor=n.minor))
    return list(out.values())


def state(root: Root, link: Link) -> str:
    """"ok" where the link (any link there) leads to the device; else "missing", "wrong" (a link elsewhere) or
    "blocked" (something not a link is in the way)."""
    real = root.lexical(link.path)
    try:
        st = os.lstat(real)
    except FileNotFoundError:
        return "missing"
    if not stat.S_ISLNK(st.st_mode):
        return "blocked"
    try:
        dev = os.stat(root.resolve(link.path))
    except (OSError, GpuhookError):  # dangling, or a loop
        return "wrong"
    fmt = stat.S_IFCHR if link.kind == "c" else stat.S_IFBLK
    same = stat.S_IFMT(dev.st_mode) == fmt and dev.st_rdev == os.makedev(link.major, link.minor)
    return "ok" if same else "wrong"


def create(root: Root, links: Iterable[Link], dry_run: bool = False) -> list[tuple[Link, str]]:
    """Make the links that are missing or wrong (a wrong one replaced by rename: never absent meanwhile); each link
    with what was done: "ok", "created", "replaced" or "blocked". Writes symlinks under the host's /dev."""
    done = []
    for link in links:
        now = state(root, link)
        if now in ("ok", "blocked"):
            done.append((link, now))
            continue
        if not dry_run:
            real = root.lexical(link.path)
            os.makedirs(os.path.dirname(real), mode=0o755, exist_ok=True)
            tmp = f"{real}.gpuhook-{os.getpid()}"
            with contextlib.suppress(FileNotFoundError):  # a crashed run's
                os.unlink(tmp)
            os.symlink(link.target, tmp)
            os.replace(tmp, real)
        done.append((link, "created" if now == "missing" else "replaced"))
    return done
