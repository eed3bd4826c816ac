"""The one reader of gpuhook's own files (state_dir's records, allocations, ledger and procfs copies, a bundle's
config.json): opened non-blocking, never through a link, regular files only, and bounded, as image files are. A
FIFO, a device node or a link put where a record should be is an OSError naming the path, never a process that
waits or reads forever. (The reading itself is configfile.read_regular, which the pass-through path has loaded.)

And the one maker of directories gpuhook puts on the host for others to use (an MPS daemon's pipe and log
directories, which containers get read-write): made and opened one component at a time below the directory the
admin configured, never through a link, each root's and writable by root alone, so that nothing planted there
(a link to /etc, a directory of someone else's) is where gpuhook makes, or mounts, what it makes."""

from __future__ import annotations

import os
import stat

from gpuhook.configfile import read_regular
from gpuhook.errors import UnsafePathError


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
