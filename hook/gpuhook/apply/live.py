"""Hook mode: apply Edits to a container being created, inside its mount namespace, without leaving its root.

The device cgroup is extended from the host's namespaces (cgroup v1 rules, or cgroup v2's device filter replaced:
apply/cgroups.py); then the process enters the container's mount namespace (before pivot_root it still shows the
host's paths; a bind mount's source must be in the caller's namespace, so sources are opened there), creates
nodes (bind mounts of the host's in a container with a user namespace, as runc does there), mounts files read-only
and writes the container's linker cache (apply/linker_cache.py `update`: the host's ldconfig only where the image's
own cache cannot be used).
"""

from __future__ import annotations

import os

from gpuhook import syscalls
from gpuhook.apply import cgroups, linker_cache
from gpuhook.apply.container_root import WritableRoot, bind_mount
from gpuhook.edits import SHARED_MEMORY, DeviceNode, Edits, Mount

# What a hook can do with each kind of edit once runc has created the container. Every field of Edits is
# here (tests/unit/test_edits.py checks): a hook that ignored one would drop it silently in hook mode.
LIVE = {
    "device_nodes": "created in the container root (mknod; a bind mount of the host node in a user namespace, or "
                    "where mknod fails)",
    "device_rules": "allowed in the container's device cgroup (v1 devices.allow; v2 device filter replaced)",
    "mounts": "bind-mounted, read-only unless rw (an MPS daemon's pipes; its shared memory a copy of its mount)",
    "env": "cannot be changed after create: the hook warns",
    "additional_gids": "cannot be changed after create: nodes get a group the process already has",
    "hooks": "not added: in hook mode gpuhook's own hooks.d entry runs every stage",
    "masked_paths": "a read-only empty tmpfs over each",
    "readonly_mounts": "remounted read-only",
    "proc_overlays": "the procfs copy bind-mounted over the container's own",
    "ldcache_dirs": "the root's linker cache written by gpuhook (the host's ldconfig, chrooted into the root alone, "
                    "where the image's cache cannot be used: apply/linker_cache.py)",
}
UNAPPLIED = ("env", "additional_gids", "hooks")  # what `apply` leaves to its caller, as LIVE says

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from gpuhook.apply.cgroup_v2 import Swap


def node_group(node: DeviceNode, uid: int, gids: set[int]) -> int:
    """The group a node gets in the container: its host group, or the process's own group when the process
    lacks the host group (supplementary groups cannot change after create) and needs it to open the node."""
    if uid == 0 or not node.needs_group() or node.gid in gids:
        return node.gid
    return min(gids) if gids else node.gid


def apply(edits: Edits, pid: int, root_path: str, host_base: str, ldconfig: str, uid: int, gids: set[int],
          timeout: float = 30, state_dir: str = "/run/gpuhook", libraries: tuple[Mount, ...] = (),
          spec: dict[str, Any] | None = None) -> Swap | None:
    """Apply `edits` to the container whose init process is `pid` (all but UNAPPLIED); `libraries` are gpuhook's
    mounts the spec already has (the linker cache must see them), `spec` its config.json (the rules a cgroup v2
    filter keeps). The cgroup v2 device filter swapped, if one was. Mounts, creates nodes, writes cgroupfs or
    replaces the device filter. Back in this process's own mount namespace on the way out, whatever happened:
    what the caller does next (records, tuning, a refusal's count) reads and writes the host, never paths the
    container's namespace would resolve."""
    swap = cgroups.allow(pid, edits.device_rules, spec)
    owner = root_ids(pid) if in_user_namespace(pid) else None
    home = os.open("/proc/self/ns/mnt", os.O_RDONLY | os.O_CLOEXEC)
    held: list[int] = []
    try:
        # a sharing daemon's shared memory, a tmpfs the runtime mounted after the container's namespace was made
        # (so not in it): a copy of the mount, taken here, attached there
        trees = {m.container_path: _cloned(held, m.host_path) for m in edits.mounts
                 if m.container_path == SHARED_MEMORY}
        _enter(f"/proc/{pid}/ns/mnt")
        sources = {m.container_path: _opened(held, m.host_path) for m in edits.mounts if m.container_path not in trees}
        writable = {m.container_path for m in edits.mounts if "rw" in m.options}
        node_sources = {n.path: _opened(held, host_base.rstrip("/") + n.path) for n in edits.device_nodes}
        with WritableRoot(root_path) as root:
            if owner is None:
                for n in edits.device_nodes:
                    _node(root, n, node_group(n, uid, gids), node_sources[n.path])
            else:
                _bind_nodes(root, edits.device_nodes, node_sources, owner)
            for target, fd in sources.items():
                bind_mount(fd, root, target, readonly=target not in writable)
            for target, tree in trees.items():
                dst = root.make_dirs(target)
                try:
                    syscalls.move_mount(tree, dst)
                finally:
                    os.close(dst)
            _harden(root, edits)
        if edits.ldcache_dirs:  # last: it leaves this process in a mount namespace of its own
            if owner is not None:  # a copy of the container's namespace locks its mounts: the refresh starts
                syscalls.setns(home, syscalls.CLONE_NEWNS)  # from the host's, where the root has none on it
            mounts = ((m.host_path, m.container_path) for m in (*libraries, *edits.mounts))
            linker_cache.update(root_path, ldconfig, edits.ldcache_dirs, mounts, state_dir, timeout)
    finally:
        for fd in held:
            os.close(fd)
        try:
            syscalls.setns(home, syscalls.CLONE_NEWNS)
        finally:
            os.close(home)
    return swap


def _cloned(held: list[int], path: str) -> int:
    """A detached copy of the mount at `path` (syscalls.open_tree), kept in `held` to be closed."""
    fd = syscalls.open_tree(path)
    held.append(fd)
    return fd


def _opened(held: list[int], path: str) -> int:
    """`path` opened O_PATH, kept in `held` to be closed."""
    fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    held.append(fd)
    return fd


def _enter(ns_path: str) -> None:
    ns = os.open(ns_path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        syscalls.setns(ns, syscalls.CLONE_NEWNS)
    finally:
        os.close(ns)


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


def in_user_namespace(pid: int, proc: str = "/proc") -> bool:
    """Whether process `pid` has a user namespace other than this process's."""
    return os.stat(f"{proc}/{pid}/ns/user").st_ino != os.stat(f"{proc}/self/ns/user").st_ino


def root_ids(pid: int, proc: str = "/proc") -> tuple[int, int]:
    """The host uid and gid that process `pid`'s user namespace maps its root to (else its lowest ids)."""
    return _mapped(f"{proc}/{pid}/uid_map"), _mapped(f"{proc}/{pid}/gid_map")


def _mapped(map_file: str) -> int:
    with open(map_file) as f:
        ranges = [tuple(int(x) for x in line.split()) for line in f if line.strip()]
    for inside, outside, count in ranges:
        if inside <= 0 < inside + count:
            return outside - inside
    if not ranges:
        raise OSError(22, f"{map_file} maps no ids")
    return min(ranges)[1]


def _node(root: WritableRoot, n: DeviceNode, gid: int, host_fd: int) -> None:
    """mknod the node; where the kernel refuses for any reason (EPERM, EOVERFLOW for ids it cannot map, ...),
    bind-mount the host's node instead. A wrong node already there stays an error."""
    try:
        root.mknod(n.path, n.kind, n.major, n.minor, n.mode, n.uid, gid)
    except OSError:
        bind_mount(host_fd, root, n.path, readonly=False)


def _bind_nodes(root: WritableRoot, nodes: tuple[DeviceNode, ...], sources: dict[str, int],
                owner: tuple[int, int]) -> None:
    """A container with a user namespace: the host's nodes bind-mounted, as runc does there (its /dev is a tmpfs of
    that namespace, where the kernel opens no device node), their mount points made as the container's root (host
    root is not mapped there: what it creates fails with EOVERFLOW)."""
    before = syscalls.set_fs_ids(*owner)
    try:
        for n in nodes:
            bind_mount(sources[n.path], root, n.path, readonly=False)
    finally:
        syscalls.set_fs_ids(*before)
