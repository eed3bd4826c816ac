"""Paths inside a container root (an image), resolved without ever leaving it: the reading side.

Every lookup goes through `openat2(RESOLVE_IN_ROOT)` where the kernel has it, else a component-by-component
walk with O_NOFOLLOW that treats absolute and `..` links as relative to the root. Files and nodes are
created (gpuhook.apply.container_root) with O_EXCL/mknod in a directory held open, and mounts go onto
/proc/self/fd/N of an opened target, so an image that swaps a directory for a symlink mid-way still cannot
redirect gpuhook outside.
"""

from __future__ import annotations

import errno
import os
import stat

from gpuhook.errors import UnsafePathError
from gpuhook.request.requirements import is_version, version_tuple

_MAX_LINKS = 40
PATH_FLAGS = os.O_PATH | os.O_CLOEXEC
MAX_READ = 64 * 1024  # bytes of an image file gpuhook reads: version files are a few bytes
MAX_ENTRIES = 4096  # directory entries of an image directory gpuhook lists
_PATH = PATH_FLAGS



def split_path(path: str) -> list[str]:
    """The components of a path, without empty ones and '.'."""
    return [p for p in path.split("/") if p not in ("", ".")]


class InRoot:
    """A container root held open as a directory; every path below is resolved inside it."""

    def __init__(self, path: str, use_openat2: bool | None = None) -> None:
        self.path = path
        self.fd = os.open(path, _PATH | os.O_DIRECTORY)
        self.use_openat2 = _has_openat2() if use_openat2 is None else use_openat2

    def close(self) -> None:
        """Close the root's descriptor."""
        os.close(self.fd)

    def __enter__(self) -> InRoot:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def open(self, path: str, flags: int = _PATH, follow_last: bool = True) -> int:
        """A descriptor for `path` resolved inside the root (the last component followed only if asked)."""
        flags |= os.O_CLOEXEC | (0 if follow_last else os.O_NOFOLLOW)
        if self.use_openat2:
            from gpuhook import syscalls

            return syscalls.openat2(self.fd, path, flags, 0,
                                    syscalls.RESOLVE_IN_ROOT | syscalls.RESOLVE_NO_MAGICLINKS)
        return self._walk(path, flags, follow_last)

    def read_text(self, path: str, limit: int = MAX_READ) -> str:
        """A small regular file's text, read inside the root: never a FIFO, device or socket (opened first as a
        path, which never blocks nor reaches a driver), never more than `limit` bytes. UnsafePathError else."""
        fd = self.open(path, _PATH)
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                raise UnsafePathError(f"the image's {path} is {_kind(st.st_mode)}, not a regular file")
            if st.st_size > limit:
                raise UnsafePathError(f"the image's {path} is {st.st_size} bytes: more than the {limit} gpuhook reads")
            data = _read_at_most(os.open(f"/proc/self/fd/{fd}", os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC), limit)
        finally:
            os.close(fd)
        if len(data) > limit:  # it grew since fstat
            raise UnsafePathError(f"the image's {path} is more than the {limit} bytes gpuhook reads")
        return data.decode("utf-8", "replace")

    def listdir(self, path: str, limit: int = MAX_ENTRIES) -> list[str]:
        """Entries of a directory inside the root ([] when absent), sorted; at most `limit` of them are read."""
        try:
            fd = self.open(path, os.O_RDONLY | os.O_DIRECTORY)
        except OSError:
            return []
        try:
            with os.scandir(fd) as entries:
                names: list[str] = []
                for entry in entries:
                    if len(names) >= limit:
                        break
                    names.append(entry.name)
            return sorted(names)
        finally:
            os.close(fd)

    def real_path(self, path: str) -> str:
        """Where `path` really is, as a path inside the container (links resolved inside the root)."""
        fd = self.open(path, _PATH)
        try:
            real = os.readlink(f"/proc/self/fd/{fd}")
        finally:
            os.close(fd)
        rel = os.path.relpath(real, os.path.realpath(self.path))
        return "/" if rel == "." else "/" + rel

    def _walk(self, path: str, flags: int, follow_last: bool) -> int:
        """Resolve component by component, symlinks read and re-resolved from the root, never above it."""
        todo = split_path(path)
        stack = [os.dup(self.fd)]
        links = 0
        try:
            while todo:
                part = todo.pop(0)
                if part == "..":
                    if len(stack) > 1:
                        os.close(stack.pop())
                    continue
                last = not todo
                try:
                    fd = os.open(part, _PATH | os.O_NOFOLLOW, dir_fd=stack[-1])
                except OSError:
                    if last:
                        return os.open(part, flags | os.O_NOFOLLOW, dir_fd=stack[-1])
                    raise
                if stat.S_ISLNK(os.fstat(fd).st_mode) and (not last or follow_last):
                    target = os.readlink(part, dir_fd=stack[-1])
                    os.close(fd)
                    links += 1
                    if links > _MAX_LINKS:
                        raise OSError(errno.ELOOP, f"too many symlinks resolving {path}")
                    if target.startswith("/"):
                        for f in stack[1:]:
                            os.close(f)
                        del stack[1:]
                    todo = split_path(target) + todo
                    continue
                if last:
                    os.close(fd)
                    return os.open(part, flags | os.O_NOFOLLOW, dir_fd=stack[-1])
                stack.append(fd)
            return os.open(".", flags, dir_fd=stack[-1])
        finally:
            for f in stack:
                os.close(f)


def _read_at_most(fd: int, limit: int) -> bytes:
    """Up to limit + 1 bytes of an open file (one more, to tell a file that grew); closes it."""
    try:
        chunks, size = [], 0
        while size <= limit:
            chunk = os.read(fd, limit + 1 - size)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"), (stat.S_ISDIR, "a directory"),
                       (stat.S_ISLNK, "a symbolic link")):
        if test(mode):
            return name
    return "not a file"


def _has_openat2() -> bool:
    from gpuhook import syscalls

    try:
        os.close(syscalls.openat2(syscalls.AT_FDCWD, "/", _PATH, 0, 0))
    except OSError:
        return False
    return True


COMPAT_DIR = "/usr/local/cuda/compat"


def rocm_version(image: InRoot, notes: list[str] | None = None) -> str | None:
    """The ROCm version an image ships (/opt/rocm/.info/version, else the newest /opt/rocm-*/), or None.
    Reads files inside the image root only (links resolved inside it, never out of it); a file gpuhook refuses
    to read (a FIFO, a device, too large) is said in `notes`."""
    candidates = ["/opt/rocm/.info/version"]
    candidates += [f"/opt/{d}/.info/version" for d in image.listdir("/opt") if d.startswith("rocm-")]
    versions = []
    for path in candidates:
        try:
            text = image.read_text(path).strip().split("-")[0]
        except UnsafePathError as e:
            if notes is not None:
                notes.append(f"{e}: its ROCm version was not read")
            continue
        except OSError:
            continue
        if text and is_version(text):
            if path == candidates[0]:
                return text
            versions.append(text)
    return max(versions, key=version_tuple) if versions else None


def compat_libcuda(image: InRoot) -> tuple[str, tuple[str, ...]]:
    """(where the image's CUDA forward-compatibility directory really is, the versions of the libcuda files
    in it): read from file names, never loaded."""
    names = image.listdir(COMPAT_DIR)
    versions = tuple(n[len("libcuda.so."):] for n in names if n.startswith("libcuda.so.") and n.count(".") >= 4)
    return (image.real_path(COMPAT_DIR) if versions else COMPAT_DIR), versions
