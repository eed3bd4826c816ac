"""Hook mode: apply Edits to a container being created, inside its mount namespace, without leaving its root.

The device cgroup is extended from the host's namespaces; then the process enters the container's mount
namespace (before pivot_root it still shows the host's paths; a bind mount's source must be in the caller's
namespace, so sources are opened there), creates nodes, mounts files read-only and refreshes the linker
cache with the host's ldconfig chrooted into the container root.
"""

from __future__ import annotations

import errno
import os

from gpuhook import cgroups, syscalls
from gpuhook.edits import Edits
from gpuhook.inventory import DeviceNode
from gpuhook.proc import run
from gpuhook.safepath import InRoot, bind_mount

TYPE_CHECKING = False
if TYPE_CHECKING:
    from gpuhook.spec import Spec


def remaining(edits: Edits, spec: Spec) -> Edits:
    """The part of `edits` the spec does not already carry (what gpuhook-runtime left for the hook)."""
    linux = spec.get("linux") or {}
    have_nodes = {d.get("path") for d in linux.get("devices") or []}
    have_rules = [r for r in (linux.get("resources") or {}).get("devices") or [] if r.get("allow")]
    have_mounts = {m.get("destination") for m in spec.get("mounts") or []}
    hooks = (spec.get("hooks") or {}).get("createContainer") or []
    ldconfig_done = any((h.get("args") or [""])[0] == "ldconfig" for h in hooks)
    overlays_done = {(h.get("args") or [""] * 7)[6] for h in hooks if "gpuhook-procfs" in (h.get("args") or [])}
    masked = set(linux.get("maskedPaths") or [])
    ro_done = {m.get("destination") for m in spec.get("mounts") or [] if "ro" in (m.get("options") or [])}
    return Edits(
        device_nodes=tuple(n for n in edits.device_nodes if n.path not in have_nodes),
        device_rules=tuple(r for r in edits.device_rules
                           if {"allow": True, "type": r.kind, "major": r.major, "minor": r.minor,
                               "access": r.access} not in have_rules),
        mounts=tuple(m for m in edits.mounts if m.container_path not in have_mounts),
        env=(),
        additional_gids=(),
        ldcache_dirs=() if ldconfig_done else edits.ldcache_dirs,
        masked_paths=tuple(p for p in edits.masked_paths if p not in masked),
        readonly_mounts=tuple(p for p in edits.readonly_mounts if p not in ro_done),
        proc_overlays=tuple(o for o in edits.proc_overlays if o.target not in overlays_done),
    )


def node_group(node: DeviceNode, uid: int, gids: set[int]) -> int:
    """The group a node gets in the container: its host group, or the process's own group when the process
    lacks the host group (supplementary groups cannot change after create) and needs it to open the node."""
    if uid == 0 or not node.needs_group() or node.gid in gids:
        return node.gid
    return min(gids) if gids else node.gid


def apply(edits: Edits, pid: int, root_path: str, host_base: str, ldconfig: str, uid: int, gids: set[int]) -> None:
    """Apply `edits` to the container whose init process is `pid`. Mounts, creates nodes, writes cgroupfs."""
    cgroups.allow(pid, edits.device_rules)
    ns = os.open(f"/proc/{pid}/ns/mnt", os.O_RDONLY | os.O_CLOEXEC)
    try:
        syscalls.setns(ns, syscalls.CLONE_NEWNS)
    finally:
        os.close(ns)
    sources = {m.container_path: os.open(m.host_path, os.O_PATH | os.O_CLOEXEC) for m in edits.mounts}
    node_sources = {n.path: _host_node(host_base, n.path) for n in edits.device_nodes}
    try:
        with InRoot(root_path) as root:
            for n in edits.device_nodes:
                _node(root, n, node_group(n, uid, gids), node_sources[n.path])
            for target, fd in sources.items():
                bind_mount(fd, root, target)
            _harden(root, edits)
        if edits.ldcache_dirs:
            run([ldconfig, "-r", root_path, *edits.ldcache_dirs], timeout=30)
    finally:
        for fd in (*sources.values(), *node_sources.values()):
            os.close(fd)


def _harden(root: InRoot, edits: Edits) -> None:
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


def _mount_over(root: InRoot, path: str, source: str | None, fstype: str | None, flags: int) -> None:
    """mount(2) onto `path` in the root, through its descriptor, where it exists; nothing where it does not."""
    fd = _open_if_there(root, path)
    if fd is None:
        return
    try:
        syscalls.mount(source, f"/proc/self/fd/{fd}", fstype, flags)
    finally:
        os.close(fd)


def _open_if_there(root: InRoot, path: str) -> int | None:
    """An O_PATH descriptor of `path` in the root (the caller closes it), or None where it does not exist."""
    try:
        return root.open(path)
    except FileNotFoundError:
        return None


def _host_node(host_base: str, path: str) -> int:
    return os.open(host_base.rstrip("/") + path, os.O_PATH | os.O_CLOEXEC)


def _node(root: InRoot, n: DeviceNode, gid: int, host_fd: int) -> None:
    """mknod the node; where the kernel refuses (a user namespace), bind-mount the host's node instead."""
    try:
        root.mknod(n.path, n.kind, n.major, n.minor, n.mode, n.uid, gid)
    except PermissionError as e:
        if e.errno != errno.EPERM:
            raise
        bind_mount(host_fd, root, n.path, readonly=False)
