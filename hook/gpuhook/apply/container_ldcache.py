"""The container's linker cache written by gpuhook, instead of ldconfig run per container: the image's own
/etc/ld.so.cache (read inside the root: never a link followed out of it, a FIFO or device opened, more than 16 MiB
read) merged with the injected libraries (each one's SONAME read from its ELF headers on the host), written back
into the root (a temporary file made with O_EXCL in the root's etc, renamed over: a link there is replaced, never
followed). Where the root's file system refuses writes, the cache is kept by key under state_dir for a read-only
bind mount instead. The image's later ldconfig (a package install in the container) finds the injected
directories through /etc/ld.so.conf.d/000-gpuhook.conf where its ld.so.conf does not list them, and the SONAME
links it expects (libcuda.so.1 -> libcuda.so.<version>) are made in a directory of the image's own where absent.

An image cache that cannot be read safely (a link, a FIFO, a directory, too large, malformed) is ignored with one
log line: the caller falls back to ldconfig's refresh (apply/linker_cache.py), which rebuilds it from the image's
own directories. An image without a cache and without glibc's loader (musl) gets nothing.
"""

from __future__ import annotations

import errno
import os
import stat

from gpuhook.apply.container_root import WritableRoot
from gpuhook.apply.ldcache_entries import injected
from gpuhook.errors import UnsafePathError
from gpuhook.host import ldcache_splice, ldcache_write
from gpuhook.host.image import PATH_FLAGS
from gpuhook.host.ldcache_write import CacheError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable

    from gpuhook.host.ldcache_write import Entry

CACHE = "/etc/ld.so.cache"
CONF = "/etc/ld.so.conf.d/000-gpuhook.conf"
WRITTEN, MOUNT, FALLBACK, NOTHING = "written", "mount", "fallback", "nothing"
_TRUSTED = ("/lib", "/usr/lib", "/lib64", "/usr/lib64")
_LOADERS = ("/lib64/ld-linux-x86-64.so.2", "/lib/ld-linux-aarch64.so.1", "/lib64/ld64.so.2",
            "/lib/ld-linux-riscv64-lp64d.so.1")
_MAX_CONF = 64 * 1024
_MEMO: dict[tuple[bytes, tuple[Entry, ...]], bytes] = {}  # (image cache, injected) -> the file: an image seen before


def write(root_path: str, dirs: tuple[str, ...], mounts: Iterable[tuple[str, str]], state_dir: str,
          image: bool = True, openat2: bool | None = None) -> tuple[str, str]:
    """The container's linker cache made to list the libraries of `dirs` (the host files of `mounts`, or the image's
    own): (WRITTEN, path in the root), (MOUNT, a state_dir file to bind read-only on /etc/ld.so.cache), (FALLBACK,
    why) where the image's cache cannot be used (`image` False: written without it), or (NOTHING, why) for an image
    without glibc. Reads the host's libraries and the image; writes into the root (the cache, SONAME links, a conf
    file) or under state_dir; OSError or UnsafePathError where the root cannot be written. `openat2` False: paths
    resolved by the component walk (gpuhook.host.image), as strict, without loading ctypes (3 ms) in the shim."""
    with WritableRoot(root_path, openat2) as root:
        try:
            cache = _image_cache(root) if image else None
        except (CacheError, OSError, UnsafePathError) as e:
            return FALLBACK, f"the image's {CACHE} is ignored: {e}"
        if cache is None and not any(_exists(root, p) for p in _LOADERS):
            return NOTHING, "the image has no linker cache and no glibc loader"
        entries, links = injected(root, dirs, list(mounts))
        try:
            data = _cache_file(cache or b"", entries)
        except CacheError as e:  # parsed whole before anything is written
            return FALLBACK, f"the image's {CACHE} is ignored: {e}"
        try:
            where = _replace(root, CACHE, data)
        except OSError as e:
            if e.errno not in (errno.EROFS, errno.EACCES, errno.EPERM):
                raise
            return MOUNT, _keyed(state_dir, data)
        _links(root, links)
        _conf(root, dirs)
    return WRITTEN, where


def _cache_file(image: bytes, entries: tuple[Entry, ...]) -> bytes:
    """The merged cache file (remembered by the image's cache and the injected entries)."""
    key = (image, entries)
    found = _MEMO.get(key)
    if found is None:
        found = ldcache_splice.splice(image, entries) if image else ldcache_write.build(
            ldcache_write.ordered(entries))
        if len(_MEMO) >= 8:
            _MEMO.clear()
        _MEMO[key] = found
    return found


def _image_cache(root: WritableRoot) -> bytes | None:
    """The image's cache file (None where it has none); CacheError or OSError where it is not a regular file of a
    readable size (a link is never followed: O_NOFOLLOW on the last part, in-root resolution above). Its form is
    checked where it is parsed (_cache_file), before anything is written."""
    try:
        fd = root.open(CACHE, PATH_FLAGS, follow_last=False)
    except FileNotFoundError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise CacheError(f"not a regular file (mode {stat.filemode(st.st_mode)})")
        if st.st_size > ldcache_write.MAX_SIZE:
            raise CacheError(f"{st.st_size} bytes, more than {ldcache_write.MAX_SIZE}")
        data = _read(os.open(f"/proc/self/fd/{fd}", os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC),
                     ldcache_write.MAX_SIZE)
    finally:
        os.close(fd)
    return data


def _read(fd: int, limit: int) -> bytes:
    """At most `limit` + 1 bytes of `fd`, which is closed."""
    try:
        chunks, total = [], 0
        while total <= limit:
            chunk = os.read(fd, min(1 << 20, limit + 1 - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
    finally:
        os.close(fd)
    data = b"".join(chunks)
    if len(data) > limit:
        raise CacheError(f"more than {limit} bytes")
    return data


def _exists(root: WritableRoot, path: str) -> bool:
    try:
        os.close(root.open(path, PATH_FLAGS))
    except OSError:
        return False
    return True


def _replace(root: WritableRoot, path: str, data: bytes) -> str:
    """`path` in the root replaced by a file holding `data` (0644, owned as its directory is): a temporary file made
    with O_EXCL beside it, renamed over it. Returns `path`; OSError (EROFS where the root is read-only)."""
    parent = root.open(os.path.dirname(path), os.O_RDONLY | os.O_DIRECTORY)
    try:
        owner = os.fstat(parent)
        tmp = f".{os.path.basename(path)}.gpuhook-{os.urandom(6).hex()}"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644, dir_fd=parent)
        try:
            try:
                os.write(fd, data)
                os.fchmod(fd, 0o644)
                if (owner.st_uid, owner.st_gid) != (0, 0):
                    os.fchown(fd, owner.st_uid, owner.st_gid)
            finally:
                os.close(fd)
            os.rename(tmp, os.path.basename(path), src_dir_fd=parent, dst_dir_fd=parent)
        except BaseException:
            try:  # noqa: SIM105 (no contextlib: see gpuhook.startup)
                os.unlink(tmp, dir_fd=parent)
            except OSError:
                pass
            raise
    finally:
        os.close(parent)
    return path


def _keyed(state_dir: str, data: bytes) -> str:
    """The cache file kept under state_dir/KEPT_CACHES by its content (written once, atomically, from a hidden
    temporary a sweep removes if its writer died; root's, 0644); its time set to now when found there already, so
    that a sweep (which keeps what a live container's record names, and what is younger than a few seconds) leaves
    it to the container about to mount it. Writes a file."""
    import hashlib

    from gpuhook.apply.state_dir import KEPT_CACHES, ensure

    folder = os.path.join(ensure(state_dir), KEPT_CACHES)
    os.makedirs(folder, mode=0o755, exist_ok=True)
    name = hashlib.sha256(data).hexdigest()[:32] + ".cache"
    path = os.path.join(folder, name)
    try:
        os.utime(path, follow_symlinks=False)
        if os.path.isfile(path) and not os.path.islink(path):
            return path
    except FileNotFoundError:
        pass
    tmp = os.path.join(folder, f".{name}.{os.getpid()}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
    finally:
        os.close(fd)
    os.rename(tmp, path)
    return path


def _links(root: WritableRoot, links: list[tuple[str, str, str]]) -> None:
    """Each SONAME link (directory, name, target) in the image's own directory, where it has none (the image's
    ldconfig would make it); nothing where the directory is missing (a mount's) or the name is taken."""
    by_dir: dict[str, list[tuple[str, str]]] = {}
    for directory, name, target in links:
        by_dir.setdefault(directory, []).append((name, target))
    for directory, pairs in by_dir.items():
        try:
            parent = root.open(directory, os.O_RDONLY | os.O_DIRECTORY)
        except OSError:
            continue
        try:
            for name, target in pairs:
                try:  # noqa: SIM105 (no contextlib: see gpuhook.startup)
                    os.symlink(target, name, dir_fd=parent)
                except OSError:
                    pass
        finally:
            os.close(parent)


def _conf(root: WritableRoot, dirs: tuple[str, ...]) -> None:
    """/etc/ld.so.conf.d/000-gpuhook.conf listing the directories neither the loader trusts nor the image's
    ld.so.conf lists, where that includes ld.so.conf.d (the image's own ldconfig then keeps listing them)."""
    conf = _read_text(root, "/etc/ld.so.conf")
    if "ld.so.conf.d" not in conf:
        return
    listed = {line.strip().rstrip("/") for line in conf.splitlines()}
    for name in root.listdir("/etc/ld.so.conf.d", 256):
        if name.endswith(".conf") and name != os.path.basename(CONF):
            listed |= {line.strip().rstrip("/") for line in _read_text(root, f"/etc/ld.so.conf.d/{name}").splitlines()}
    wanted = [d for d in dirs if d.rstrip("/") not in listed and d.rstrip("/") not in _TRUSTED]
    text = "".join(f"{d}\n" for d in wanted).encode()
    if not wanted or _read_text(root, CONF).encode() == text:
        return
    try:  # noqa: SIM105 (as above)
        _replace(root, CONF, text)
    except OSError:
        pass


def _read_text(root: WritableRoot, path: str) -> str:
    """A small regular file of the image ('' where absent or anything else)."""
    try:
        return root.read_text(path, _MAX_CONF)
    except (OSError, UnsafePathError):
        return ""
