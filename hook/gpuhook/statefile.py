"""The one reader of gpuhook's own files (state_dir's records, allocations, ledger and procfs copies, a bundle's
config.json): opened non-blocking, never through a link, regular files only, and bounded, as image files are. A
FIFO, a device node or a link put where a record should be is an OSError naming the path, never a process that
waits or reads forever. (The reading itself is configfile.read_regular, which the pass-through path has loaded.)

And the one maker of directories gpuhook puts on the host for others to use (an MPS daemon's pipe and log
directories, which containers get read-write): made and opened one component at a time below the directory the
admin configured, never through a link, each root's and writable by root alone, so that nothing planted there
(a link to /etc, a directory of someone else's) is where gpuhook makes, or mounts, what it makes. An MPS daemon's
shared memory is such a directory with a tmpfs of its own on it (make_shared_memory): bounded, root's alone, and
in it the one directory, sticky and open to all as /dev/shm is, that the daemon and its clients see as /dev/shm."""

from __future__ import annotations

import os
import stat

from gpuhook.configfile import read_regular
from gpuhook.errors import UnsafePathError

SHM_SIZE = 1 << 30  # a sharing daemon's shared memory: at most 1 GiB, what its clients write charged to their own
SHM_INODES = 1 << 16  # memory cgroups; and at most this many files
SHARED = "shared"  # the directory of the tmpfs that is /dev/shm to the daemon and its clients


def read_bounded(path: str, limit: int) -> bytes:
    """The bytes of the regular file at `path`, at most `limit` of them; OSError (ELOOP for a link, EINVAL for
    anything but a regular file, EFBIG past `limit`) otherwise. Reads a file."""
    return read_regular(path, os.O_NOFOLLOW, limit)


def make_dirs(base: str, path: str, mode: int = 0o755) -> None:
    """Directory `path` (below directory `base`, the admin's: made where missing) made where missing, walked from
    `base` component by component without following a link; UnsafePathError naming the component when one is a
    link, no directory, not root's, or (but the last) writable by others than root. Writes directories."""
    rel = os.path.relpath(path, base)
    parts = rel.split("/")
    if os.path.isabs(rel) or rel == "." or ".." in parts or not os.path.isabs(base):
        raise UnsafePathError(f"{path} is not below {base}: gpuhook makes host directories only below the "
                              "configured one")
    try:
        os.makedirs(base, mode=0o755, exist_ok=True)
        fd = os.open(base, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as e:
        raise UnsafePathError(f"{base} cannot be made or opened as a directory ({e.strerror}): gpuhook makes "
                              f"{path} only in a real directory of root's") from e
    where = base.rstrip("/")
    try:
        _trusted(fd, where, inner=True)
        for i, part in enumerate(parts):
            where = f"{where}/{part}"
            try:  # noqa: SIM105 (no contextlib: see gpuhook.startup)
                os.mkdir(part, mode, dir_fd=fd)
            except FileExistsError:
                pass
            try:
                child = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd)
            except OSError as e:  # ELOOP: a link; ENOTDIR: a file
                raise UnsafePathError(f"{where} is a symbolic link or not a directory ({e.strerror}): gpuhook "
                                      "does not follow it; remove it (the next start makes the directory)") from e
            os.close(fd)
            fd = child
            _trusted(fd, where, inner=i < len(parts) - 1)
    finally:
        os.close(fd)


def _trusted(fd: int, where: str, inner: bool) -> None:
    """UnsafePathError unless the open directory is root's (when gpuhook runs as root) and, where gpuhook goes on
    below it (`inner`), writable by root alone."""
    st = os.fstat(fd)
    if (os.geteuid() == 0 and st.st_uid != 0) or (inner and st.st_mode & 0o022) or not stat.S_ISDIR(st.st_mode):
        raise UnsafePathError(f"{where} is owned by uid {st.st_uid} with mode {stat.S_IMODE(st.st_mode):o}: "
                              "gpuhook makes host directories only in directories root alone can write "
                              "(chown root, chmod go-w)")


def make_shared_memory(base: str, path: str, size: int = SHM_SIZE) -> str:
    """A tmpfs of its own at directory `path` (made below `base` as make_dirs makes it; mounted once, under a lock
    on its parent): at most `size` bytes and SHM_INODES files, nosuid, nodev, noexec, its root root's and 0700;
    in it the directory SHARED, 1777 as /dev/shm is, whose path is returned. UnsafePathError when a component is
    a link or not root's, or SHARED is not a directory. Mounts a filesystem; writes directories."""
    import fcntl

    from gpuhook import syscalls

    make_dirs(base, path, mode=0o700)
    parent = os.open(os.path.dirname(path), os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        fcntl.flock(parent, fcntl.LOCK_EX)  # two containers starting at once mount one tmpfs, not two
        fd = os.open(os.path.basename(path), os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC,
                     dir_fd=parent)
        try:
            if not _own_tmpfs(fd, parent):
                syscalls.mount("gpuhook-shm", f"/proc/self/fd/{fd}", "tmpfs",
                               syscalls.MS_NOSUID | syscalls.MS_NODEV | syscalls.MS_NOEXEC,
                               f"size={size},nr_inodes={SHM_INODES},mode=0700,uid=0,gid=0")
                os.close(fd)
                fd = os.open(os.path.basename(path), os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC,
                             dir_fd=parent)  # the new tmpfs's root
            if not _own_tmpfs(fd, parent):
                raise UnsafePathError(f"{path}: the tmpfs gpuhook mounted there is not what it finds there")
            try:  # noqa: SIM105 (no contextlib: see gpuhook.startup)
                os.mkdir(SHARED, 0o700, dir_fd=fd)
            except FileExistsError:
                pass
            shared = os.open(SHARED, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd)
            try:
                st = os.fstat(shared)
                if st.st_uid != 0 and os.geteuid() == 0:
                    raise UnsafePathError(f"{path}/{SHARED} is owned by uid {st.st_uid}: not what gpuhook made")
                if stat.S_IMODE(st.st_mode) != 0o1777:
                    os.fchmod(shared, 0o1777)
            finally:
                os.close(shared)
        finally:
            os.close(fd)
    except OSError as e:
        raise UnsafePathError(f"{path}: the shared memory cannot be made ({e.strerror or e})") from e
    finally:
        os.close(parent)
    return f"{path}/{SHARED}"


def remove_shared_memory(path: str) -> None:
    """The tmpfs make_shared_memory mounted at `path` unmounted (detached; never through a link); nothing when
    there is none. Unmounts a filesystem."""
    from gpuhook import syscalls

    try:
        syscalls.umount(path, syscalls.MNT_DETACH | syscalls.UMOUNT_NOFOLLOW)
    except OSError as e:
        if e.errno not in (2, 22):  # ENOENT: no such path; EINVAL: no mount there
            raise


def _own_tmpfs(fd: int, parent: int) -> bool:
    """Whether the open directory is the root of a tmpfs mounted on its parent (not /run's own tmpfs)."""
    from gpuhook import syscalls

    here, up = os.fstat(fd), os.fstat(parent)  # (a tmpfs root's inode is 1 only from Linux 5.9)
    return here.st_dev != up.st_dev and syscalls.statfs_type(f"/proc/self/fd/{fd}") == syscalls.TMPFS_MAGIC
