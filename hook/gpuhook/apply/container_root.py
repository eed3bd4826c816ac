"""A container root being created, written without ever leaving it: directories, empty files, device nodes
and bind mounts, each made through a descriptor of a parent resolved inside the root (gpuhook.host.image)."""

from __future__ import annotations

import os
import stat

from gpuhook.errors import UnsafePathError
from gpuhook.host.image import PATH_FLAGS as _PATH
from gpuhook.host.image import InRoot, split_path

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Self


class WritableRoot(InRoot):
    """A container root that gpuhook may add to: every path is resolved inside it, every creation exclusive."""

    def __enter__(self) -> Self:
        return self

    def make_dirs(self, path: str) -> int:
        """Open directory `path` (a descriptor), creating missing components (0755) inside the root."""
        parts = split_path(path)
        if ".." in parts:
            raise UnsafePathError(f"refusing '..' in {path!r}")
        fd = os.dup(self.fd)
        try:
            for i, part in enumerate(parts):
                sub = "/".join(parts[: i + 1])
                try:
                    child = self.open(sub, _PATH | os.O_DIRECTORY)
                except FileNotFoundError:
                    try:  # noqa: SIM105 (no contextlib: see gpuhook.startup)
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
        made = False
        try:
            old = os.umask(0)
            try:
                os.mknod(name, fmt | mode, os.makedev(major, minor), dir_fd=parent)
                made = True
            finally:
                os.umask(old)
        except FileExistsError:
            st = os.stat(name, dir_fd=parent, follow_symlinks=False)
            if stat.S_IFMT(st.st_mode) != fmt or st.st_rdev != os.makedev(major, minor):
                os.close(parent)
                raise UnsafePathError(f"{path} exists in the container and is not device {major}:{minor}") from None
        except BaseException:
            os.close(parent)
            raise
        try:
            os.chown(name, uid, gid, dir_fd=parent, follow_symlinks=False)
        except OSError:
            if made:  # ids a user namespace cannot map: no half-made node, the caller binds the host's instead
                os.unlink(name, dir_fd=parent)
            raise
        finally:
            os.close(parent)



def bind_mount(source_fd: int, root: WritableRoot, target: str, readonly: bool = True, noexec: bool = False) -> None:
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
