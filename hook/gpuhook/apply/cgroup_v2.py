"""cgroup v2: put a new device filter in place of the one the runtime attached to a container's cgroup.

The swap is done the way runc and crun update a running container's filter, so that the cgroup is never without
one: with a single program attached with BPF_F_ALLOW_MULTI (what both attach), BPF_F_REPLACE swaps it atomically;
where the kernel lacks BPF_F_REPLACE (before 5.6) or more programs are attached, the new program is attached first
and the old ones detached after; a cgroup whose program was attached without BPF_F_ALLOW_MULTI gets the new one
with the same flags, which the kernel takes as an atomic replacement. The programs attached afterwards are queried:
only the new one may be there.
"""

from __future__ import annotations

import os

from gpuhook import syscalls
from gpuhook.apply.device_filter import LICENSE, NAME
from gpuhook.errors import CgroupError
from gpuhook.frozen import frozen

_EPERM, _ENOENT, _EINVAL = 1, 2, 22
_DEVICE = syscalls.BPF_CGROUP_DEVICE


@frozen
class Swap:
    """A device filter replaced: the cgroup, the programs attached before, the one attached now."""

    cgroup: str
    old: tuple[int, ...]
    new: int


def attached(cgroup_dir: str) -> tuple[int, list[int]]:
    """The attach flags and the ids of the device programs attached to the cgroup `cgroup_dir` itself."""
    fd = os.open(cgroup_dir, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        return syscalls.bpf_prog_query(fd, _DEVICE)
    finally:
        os.close(fd)


def replace_filter(cgroup_dir: str, program: bytes) -> Swap | None:
    """Load `program` and swap it in for the cgroup's device filter; None where the cgroup has no filter (every
    device is allowed: nothing to extend). Changes the cgroup's BPF programs."""
    try:
        dirfd = os.open(cgroup_dir, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError as e:
        raise CgroupError(f"cannot open the container's cgroup {cgroup_dir}: {e.strerror}") from e
    try:
        for _ in range(10):  # the old program can go between the query and opening it: another updater; again
            flags, old_ids = _query(dirfd, cgroup_dir)
            if not old_ids:
                return None
            try:
                olds = [syscalls.bpf_prog_get_fd_by_id(i) for i in old_ids]
            except OSError as e:
                if e.errno == _ENOENT:
                    continue
                raise CgroupError(f"cannot open the device filter of {cgroup_dir}: {e.strerror}") from e
            try:
                return Swap(cgroup_dir, tuple(old_ids), _swap(dirfd, cgroup_dir, program, flags, olds))
            finally:
                for fd in olds:
                    os.close(fd)
        raise CgroupError(f"the device filter of {cgroup_dir} kept changing while gpuhook replaced it")
    finally:
        os.close(dirfd)


def _query(dirfd: int, cgroup_dir: str) -> tuple[int, list[int]]:
    try:
        return syscalls.bpf_prog_query(dirfd, _DEVICE)
    except OSError as e:
        raise CgroupError(f"cannot list the device filter of {cgroup_dir} (bpf BPF_PROG_QUERY): {e.strerror}") from e


def _swap(dirfd: int, cgroup_dir: str, program: bytes, flags: int, olds: list[int]) -> int:
    new = _load(program, cgroup_dir)
    try:
        try:
            new_id = syscalls.bpf_prog_info(new)[1]
            _attach(dirfd, new, flags, olds)
        except OSError as e:
            raise CgroupError(f"cannot put gpuhook's device filter on {cgroup_dir}: {e.strerror}") from e
        _, now = _query(dirfd, cgroup_dir)
        if now != [new_id]:
            raise CgroupError(f"gpuhook's device filter (program {new_id}) did not replace the container's on "
                              f"{cgroup_dir}: attached now {now or 'none'}")
        return new_id
    finally:
        os.close(new)


def _load(program: bytes, cgroup_dir: str) -> int:
    """BPF_PROG_LOAD; once more with RLIMIT_MEMLOCK raised where the kernel (before 5.11) charges programs to it,
    as runc and crun raise it. Sets this process's limit."""
    try:
        return syscalls.bpf_prog_load(syscalls.BPF_PROG_TYPE_CGROUP_DEVICE, program, LICENSE, NAME)
    except OSError as e:
        refused = e
    if refused.errno == _EPERM and _raise_memlock():
        try:
            return syscalls.bpf_prog_load(syscalls.BPF_PROG_TYPE_CGROUP_DEVICE, program, LICENSE, NAME)
        except OSError as e:
            refused = e
    raise CgroupError(f"the kernel refused gpuhook's device filter for {cgroup_dir}: {refused.strerror}") from refused


def _raise_memlock() -> bool:
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_MEMLOCK)
    for limit in ((resource.RLIM_INFINITY, resource.RLIM_INFINITY), (hard, hard)):
        try:
            resource.setrlimit(resource.RLIMIT_MEMLOCK, limit)
            return limit[0] != soft
        except (OSError, ValueError):
            continue
    return False


def _attach(dirfd: int, new: int, flags: int, olds: list[int]) -> None:
    """The new program in, then the old ones out (or both at once), keeping the cgroup's attach flags."""
    if not flags & syscalls.BPF_F_ALLOW_MULTI:  # one program at most: attaching another replaces it
        syscalls.bpf_prog_attach(dirfd, new, _DEVICE, flags)
        return
    if len(olds) == 1:
        try:
            syscalls.bpf_prog_attach(dirfd, new, _DEVICE, flags | syscalls.BPF_F_REPLACE, olds[0])
            return
        except OSError as e:
            if e.errno != _EINVAL:  # EINVAL: a kernel without BPF_F_REPLACE
                raise
    syscalls.bpf_prog_attach(dirfd, new, _DEVICE, flags)
    for old in olds:
        try:
            syscalls.bpf_prog_detach(dirfd, old, _DEVICE)
        except OSError as e:
            if e.errno != _ENOENT:  # already gone
                raise
