"""Paths inside a container root, resolved without ever leaving it.

Every lookup goes through `openat2(RESOLVE_IN_ROOT)` where the kernel has it, else a component-by-component
walk with O_NOFOLLOW that treats absolute and `..` links as relative to the root. Files and nodes are
created with O_EXCL/mknod in a directory held open, and mounts go onto /proc/self/fd/N of an opened
target, so an image that swaps a directory for a symlink mid-way still cannot redirect gpuhook outside.
"""

from __future__ import annotations

import errno
import os
import stat

from gpuhook.errors import GpuhookError

_MAX_LINKS = 40
_PATH = os.O_PATH | os.O_CLOEXEC


class UnsafePathError(GpuhookError):
    """A path in the container root is not what gpuhook may touch (a symlink where a file must be, ...)."""


def _parts(path: str) -> list[str]:
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

    def read_text(self, path: str) -> str:
        """A small file's text, read inside the root."""
        fd = self.open(path, os.O_RDONLY)
        with os.fdopen(fd, "r", errors="replace") as f:
            return f.read()

    def listdir(self, path: str) -> list[str]:
        """Entries of a directory inside the root ([] when absent)."""
        try:
            fd = self.open(path, os.O_RDONLY | os.O_DIRECTORY)
        except OSError:
            return []
        try:
            return sorted(os.listdir(fd))
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

    def make_dirs(self, path: str) -> int:
        """Open directory `path` (a descriptor), creating missing components (0755) inside the root."""
        parts = _parts(path)
        if ".." in parts:
            raise UnsafePathError(f"refusing '..' in {path!r}")
        fd = os.dup(self.fd)
        try:
            for i, part in enumerate(parts):
                sub = "/".join(parts[: i + 1])
                try:
                    child = self.open(sub, _PATH | os.O_DIRECTORY)
                except FileNotFoundError:
                    try:  # noqa: SIM105 (contextlib.suppress costs a millisecond to import on the GPU path)
                        os.mkdir(part, 0o755, dir_fd=fd)  # in the parent already resolved inside the root
                    except FileExistsError:
                        pass
                    try:
                        child = self.open(sub, _PATH | os.O_DIRECTORY)
                    except FileNotFoundError as e:
                        raise UnsafePathError(f"cannot create /{sub} in the container (a dangling symlink?)") from e
                except NotADirectoryError as e:
                    raise UnsafePathError(f"/{sub} in the container is not a directory") from e
                os.close(fd)
                fd = child
        except BaseException:
            os.close(fd)
            raise
        return fd

    def create_file(self, path: str) -> int:
        """An O_PATH descriptor of regular file `path`, created empty (O_EXCL) if missing; never a symlink."""
        parent = self.make_dirs(os.path.dirname(path))
        name = os.path.basename(path)
        try:
            try:  # noqa: SIM105 (as above)
                os.close(os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                                 0o644, dir_fd=parent))
            except FileExistsError:
                pass
            fd = os.open(name, _PATH | os.O_NOFOLLOW, dir_fd=parent)
        finally:
            os.close(parent)
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            os.close(fd)
            raise UnsafePathError(f"{path} in the container is not a regular file (a symlink or other): "
                                  "refusing to mount over it")
        return fd

    def mknod(self, path: str, kind: str, major: int, minor: int, mode: int, uid: int, gid: int) -> None:
        """Create device node `path` inside the root (an identical existing node is accepted)."""
        parent = self.make_dirs(os.path.dirname(path))
        name = os.path.basename(path)
        fmt = stat.S_IFCHR if kind == "c" else stat.S_IFBLK
        try:
            old = os.umask(0)
            try:
                os.mknod(name, fmt | mode, os.makedev(major, minor), dir_fd=parent)
            finally:
                os.umask(old)
        except FileExistsError:
            st = os.stat(name, dir_fd=parent, follow_symlinks=False)
            if stat.S_IFMT(st.st_mode) != fmt or st.st_rdev != os.makedev(major, minor):
                os.close(parent)
                raise UnsafePathError(f"{path} exists in the container and is not device {major}:{minor}") from None
        try:
            os.chown(name, uid, gid, dir_fd=parent, follow_symlinks=False)
        finally:
            os.close(parent)

    def _walk(self, path: str, flags: int, follow_last: bool) -> int:
        """Resolve component by component, symlinks read and re-resolved from the root, never above it."""
        todo = _parts(path)
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
                    todo = _parts(target) + todo
                    continue
                if last:
                    os.close(fd)
                    return os.open(part, flags | os.O_NOFOLLOW, dir_fd=stack[-1])
                stack.append(fd)
            return os.open(".", flags, dir_fd=stack[-1])
        finally:
            for f in stack:
                os.close(f)


def _has_openat2() -> bool:
    from gpuhook import syscalls

    try:
        os.close(syscalls.openat2(syscalls.AT_FDCWD, "/", _PATH, 0, 0))
    except OSError:
        return False
    return True


def bind_mount(source_fd: int, root: InRoot, target: str, readonly: bool = True, noexec: bool = False) -> None:
    """Bind-mount the open source onto `target` in the root (created if missing), then remount
    read-only, nosuid, nodev (and noexec if asked). Both sides are descriptors: no path is resolved twice."""
    from gpuhook import syscalls

    dst = root.create_file(target) if not stat.S_ISDIR(os.fstat(source_fd).st_mode) else root.make_dirs(target)
    try:
        syscalls.mount(f"/proc/self/fd/{source_fd}", f"/proc/self/fd/{dst}", None, syscalls.MS_BIND)
    finally:
        os.close(dst)
    if readonly:
        top = root.open(target, _PATH, follow_last=False)  # the new mount, on top of what dst pointed at
        try:
            syscalls.mount(None, f"/proc/self/fd/{top}", None, syscalls.MS_BIND | syscalls.MS_REMOUNT
                           | syscalls.MS_RDONLY | syscalls.MS_NOSUID | syscalls.MS_NODEV
                           | (syscalls.MS_NOEXEC if noexec else 0))
        finally:
            os.close(top)
