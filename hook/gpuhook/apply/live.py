"""Hook mode: apply Edits to a container being created, inside its mount namespace, without leaving its root.

The device cgroup is extended from the host's namespaces; then the process enters the container's mount
namespace (before pivot_root it still shows the host's paths; a bind mount's source must be in the caller's
namespace, so sources are opened there), creates nodes, mounts files read-only and refreshes the linker
cache with the host's ldconfig chrooted into the container root.
"""

from __future__ import annotations

import os

from gpuhook import syscalls
from gpuhook.apply import cgroups, linker_cache
from gpuhook.apply.container_root import WritableRoot, bind_mount
from gpuhook.edits import DeviceNode, Edits, Mount

# What a hook can do with each kind of edit once runc has created the container. Every field of Edits is
# here (tests/unit/test_edits.py checks): a hook that ignored one would drop it silently in hook mode.
LIVE = {
    "device_nodes": "created in the container root (mknod, else a bind mount of the host node)",
    "device_rules": "allowed in the container's device cgroup",
    "mounts": "bind-mounted read-only",
    "env": "cannot be changed after create: the hook warns",
    "additional_gids": "cannot be changed after create: nodes get a group the process already has",
    "hooks": "not added: in hook mode gpuhook's own hooks.d entry runs every stage",
    "masked_paths": "a read-only empty tmpfs over each",
    "readonly_mounts": "remounted read-only",
    "proc_overlays": "the procfs copy bind-mounted over the container's own",
    "ldcache_dirs": "the host's ldconfig, chrooted into the root alone (apply/linker_cache.py)",
}
UNAPPLIED = ("env", "additional_gids", "hooks")  # what `apply` leaves to its caller, as LIVE says

TYPE_CHECKING = False
if TYPE_CHECKING:
    pass


def node_group(node: DeviceNode, uid: int, gids: set[int]) -> int:
    """The group a node gets in the container: its host group, or the process's own group when the process
    lacks the host group (supplementary groups cannot change after create) and needs it to open the node."""
    if uid == 0 or not node.needs_group() or node.gid in gids:
        return node.gid
    return min(gids) if gids else node.gid


def apply(edits: Edits, pid: int, root_path: str, host_base: str, ldconfig: str, uid: int, gids: set[int],
          timeout: float = 30, state_dir: str = "/run/gpuhook", libraries: tuple[Mount, ...] = ()) -> None:
    """Apply `edits` to the container whose init process is `pid` (all but UNAPPLIED); `libraries` are gpuhook's
    mounts the spec already has (the linker cache must see them). Mounts, creates nodes, writes cgroupfs."""
    cgroups.allow(pid, edits.device_rules)
    ns = os.open(f"/proc/{pid}/ns/mnt", os.O_RDONLY | os.O_CLOEXEC)
    try:
        syscalls.setns(ns, syscalls.CLONE_NEWNS)
    finally:
        os.close(ns)
    sources = {m.container_path: os.open(m.host_path, os.O_PATH | os.O_CLOEXEC) for m in edits.mounts}
    node_sources = {n.path: _host_node(host_base, n.path) for n in edits.device_nodes}
    try:
        with WritableRoot(root_path) as root:
            for n in edits.device_nodes:
                _node(root, n, node_group(n, uid, gids), node_sources[n.path])
            for target, fd in sources.items():
                bind_mount(fd, root, target)
            _harden(root, edits)
        if edits.ldcache_dirs:  # last: it leaves this process in a mount namespace of its own
            mounts = ((m.host_path, m.container_path) for m in (*libraries, *edits.mounts))
            linker_cache.refresh(root_path, ldconfig, edits.ldcache_dirs, mounts, state_dir, timeout)
    finally:
        for fd in (*sources.values(), *node_sources.values()):
            os.close(fd)


def _harden(root: WritableRoot, edits: Edits) -> None:
    """Masks (a read-only empty tmpfs over each existing directory), read-only remounts, procfs overlays."""
    for path in edits.masked_paths:
        _mount_over(root, path, "tmpfs", "tmpfs", syscalls.MS_RDONLY | syscalls.MS_NOSUID | syscalls.MS_NODEV)
    for path in edits.readonly_mounts:
        _mount_over(root, path, None, None, syscalls.MS_REMOUNT | syscalls.MS_BIND | syscalls.MS_RDONLY)
    for o in edits.proc_overlays:
        fd = _open_if_there(root, o.target)
        if fd is not None:
            os.close(fd)
        target, source = (o.target, f"{o.source}/{os.path.basename(o.target)}") if fd is not None else \
            (os.path.dirname(o.target), o.source)
        src = os.open(source, os.O_PATH | os.O_CLOEXEC | os.O_DIRECTORY)
        try:
            bind_mount(src, root, target, noexec=True)
        finally:
            os.close(src)


def _mount_over(root: WritableRoot, path: str, source: str | None, fstype: str | None, flags: int) -> None:
    """mount(2) onto `path` in the root, through its descriptor, where it exists; nothing where it does not."""
    fd = _open_if_there(root, path)
    if fd is None:
        return
    try:
        syscalls.mount(source, f"/proc/self/fd/{fd}", fstype, flags)
    finally:
        os.close(fd)


def _open_if_there(root: WritableRoot, path: str) -> int | None:
    """An O_PATH descriptor of `path` in the root (the caller closes it), or None where it does not exist."""
    try:
        return root.open(path)
    except FileNotFoundError:
        return None


def _host_node(host_base: str, path: str) -> int:
    return os.open(host_base.rstrip("/") + path, os.O_PATH | os.O_CLOEXEC)


def _node(root: WritableRoot, n: DeviceNode, gid: int, host_fd: int) -> None:
    """mknod the node; where the kernel refuses for any reason (a user namespace: EPERM, EOVERFLOW for ids it
    cannot map, ...), bind-mount the host's node instead. A wrong node already there stays an error."""
    try:
        root.mknod(n.path, n.kind, n.major, n.minor, n.mode, n.uid, gid)
    except OSError:
        bind_mount(host_fd, root, n.path, readonly=False)
