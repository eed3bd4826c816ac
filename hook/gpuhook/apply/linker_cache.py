"""The container's linker cache: written by gpuhook itself (apply/container_ldcache.py: `update` here for hook mode
and CDI's hook, gpu_path/inject.py for the shim), else, as the fallback for an image cache gpuhook will not read and
for specs older versions wrote, refreshed by the host's ldconfig, chrooted into the container root, where nothing
but the root filesystem itself and gpuhook's own library mounts are mounted.

The image controls its libraries' SONAMEs (one may hold `../`) and its ld.so.conf, and ldconfig makes a link
named by each SONAME. In the container's own mount namespace the root has the volumes and bind mounts under
it, so a crafted SONAME could make root write into a volume the container's user cannot write. So the
refresh runs in a private mount namespace of its own, on a non-recursive bind of the root (no volumes), with
gpuhook's own library mounts bound back read-only (each target resolved inside the root): whatever ldconfig
writes stays in the image's own filesystem. Shim mode gives the native createContainer hook
(cli/native/createhook.c) a refresh part, or writes `gpuhook hook update-ldcache` where it was not built; hook
mode and CDI's hook do the same from Python.
"""

from __future__ import annotations

import os

from gpuhook.proc import run

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable
    from typing import Any

    from gpuhook.edits import Mount

_PYTHON = ["gpuhook", "hook", "update-ldcache"]


def mountpoint(state_dir: str) -> str:
    """Where each refresh binds the root, in its own namespace (one directory serves them all)."""
    return os.path.join(state_dir, "ldcache-root")


def make_mountpoint(state_dir: str) -> str:
    """The mount point, created (root's, 0700) if missing. Writes a directory."""
    from gpuhook.apply.state_dir import ensure

    path = mountpoint(ensure(state_dir))
    os.makedirs(path, mode=0o700, exist_ok=True)
    return path


def library_mounts(mounts: Iterable[tuple[str, str]], dirs: tuple[str, ...]) -> list[tuple[str, str]]:
    """The (source, destination) mounts the cache must see: those inside a listed directory or holding one."""
    def relevant(dst: str) -> bool:
        return any(dst.startswith(d.rstrip("/") + "/") or d.startswith(dst.rstrip("/") + "/") or d == dst
                   for d in dirs)

    return [(src, dst) for src, dst in mounts if relevant(dst)]


def helper_part(ldconfig: str, dirs: tuple[str, ...], mounts: tuple[Mount, ...], state_dir: str) -> list[str]:
    """The refresh of `dirs` as the native createContainer hook's last part (apply/create_hook.py)."""
    from gpuhook.apply import create_hook

    pairs = library_mounts(((m.host_path, m.container_path) for m in mounts), dirs)
    return create_hook.ldcache_part(mountpoint(state_dir), ldconfig, pairs, dirs)


def python_args(dirs: tuple[str, ...], mounts: Iterable[tuple[str, str]]) -> list[str]:
    """`gpuhook hook update-ldcache` with the directories to list and the (source, destination) library mounts
    the refresh binds back, files and directories alike: what the native helper is given (helper_part)."""
    pairs = library_mounts(mounts, dirs)
    return [*_PYTHON, *(a for d in dirs for a in ("--folder", d)), *(a for p in pairs for a in ("--mount", *p))]


def python_hook(dirs: tuple[str, ...], mounts: tuple[Mount, ...], gpuhook_bin: str, config_path: str,
                timeout: int) -> dict[str, Any]:
    """The createContainer hook (shim mode) where the native helper was not built: the Python hook, the same
    refresh of the same mounts, slower to start."""
    return {"path": gpuhook_bin, "args": python_args(dirs, ((m.host_path, m.container_path) for m in mounts)),
            "env": [f"GPUHOOK_CONFIG={config_path}", "PATH=/usr/sbin:/usr/bin:/sbin:/bin"], "timeout": timeout}


def dirs_in(hook: dict[str, Any]) -> tuple[str, ...] | None:
    """The directories a refresh hook lists; None for any other hook."""
    from gpuhook.apply import create_hook

    args = hook.get("args") or []
    if args[:3] == _PYTHON:
        return tuple(args[i + 1] for i, a in enumerate(args[:-1]) if a == "--folder")
    return create_hook.ldcache_dirs(hook)


def update(root_path: str, ldconfig: str, dirs: tuple[str, ...], mounts: Iterable[tuple[str, str]],
           state_dir: str, timeout: float) -> str:
    """Hook mode and CDI: the cache written from this process on a detached, non-recursive clone of the root's mount
    (open_tree: the root's own file system, no volume, no mount of the container's; no mount point of gpuhook's, so a
    rootless engine's hook, which cannot write state_dir, works too, and a warm worker's namespace is left as it
    was); ldconfig's refresh where the image's cache cannot be used. What was done, for the log. Writes into the
    root; GpuhookError where the root's file system is read-only."""
    from gpuhook import syscalls
    from gpuhook.apply import container_ldcache as cache
    from gpuhook.errors import ConfigError

    pairs = list(mounts)
    try:
        tree = syscalls.open_tree(root_path)
    except OSError:  # before Linux 5.2: a bind in a mount namespace of this process's own (it stays there)
        tree = -1
        target = make_mountpoint(state_dir)
        syscalls.unshare(syscalls.CLONE_NEWNS)
        syscalls.mount(None, "/", None, syscalls.MS_REC | syscalls.MS_PRIVATE)
        syscalls.mount(root_path, target, None, syscalls.MS_BIND)
    try:
        view = f"/proc/self/fd/{tree}" if tree >= 0 else target
        kind, detail = cache.write(view, dirs, pairs, state_dir)
        if kind == cache.FALLBACK and not os.access(ldconfig, os.X_OK):
            kind, detail = cache.write(view, dirs, pairs, state_dir, image=False)
    finally:
        if tree >= 0:
            os.close(tree)
    if kind == cache.FALLBACK:
        refresh(root_path, ldconfig, dirs, pairs, state_dir, timeout)
        return f"{detail}; refreshed by {ldconfig}"
    if kind == cache.MOUNT:
        raise ConfigError(f"the container root {root_path} is on a read-only file system, so its linker cache cannot "
                          "list the injected libraries: run it with gpuhook-runtime (which bind-mounts the cache) or "
                          "give it a writable root")
    return f"{kind}: {detail}"


def refresh(root_path: str, ldconfig: str, dirs: tuple[str, ...], mounts: Iterable[tuple[str, str]],
            state_dir: str, timeout: float) -> None:
    """Hook mode and CDI: the same refresh from this process, which moves into a private mount namespace of its
    own first (it stays there: nothing it does afterwards needs the container's mounts). Mounts; runs ldconfig."""
    from gpuhook import syscalls  # ctypes: only the hook processes that mount pay for it
    from gpuhook.apply.container_root import WritableRoot

    target = make_mountpoint(state_dir)
    syscalls.unshare(syscalls.CLONE_NEWNS)
    syscalls.mount(None, "/", None, syscalls.MS_REC | syscalls.MS_PRIVATE)
    syscalls.mount(root_path, target, None, syscalls.MS_BIND)  # not MS_REC: the root's own filesystem only
    with WritableRoot(target) as view:
        for src, dst in library_mounts(mounts, dirs):
            try:
                to = view.open(dst)
            except FileNotFoundError:
                continue
            source = os.open(src, os.O_PATH | os.O_CLOEXEC)
            try:
                syscalls.mount(f"/proc/self/fd/{source}", f"/proc/self/fd/{to}", None,
                               syscalls.MS_BIND | syscalls.MS_REC)
            finally:
                os.close(source)
                os.close(to)
            top = view.open(dst)  # the new mount, on top of what `to` pointed at
            try:
                syscalls.mount(None, f"/proc/self/fd/{top}", None,
                               syscalls.MS_REMOUNT | syscalls.MS_BIND | syscalls.MS_RDONLY)
            finally:
                os.close(top)
    run([ldconfig, "-r", target, *dirs], timeout=timeout)
