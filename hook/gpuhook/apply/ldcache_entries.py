"""The linker-cache entries of the directories gpuhook injects, as ldconfig would list them: a library mounted as a
file at its own path, a directory mounted whole (host ROCm) from the host, the image's own directory (CUDA's forward
compatibility) read inside the root. Each library's SONAME, flags and osversion come from its ELF headers
(host/elf_soname.py), read bounded from a regular file opened non-blocking."""

from __future__ import annotations

import os
import stat

from gpuhook.host import elf_soname, ldcache_write
from gpuhook.host.image import PATH_FLAGS

TYPE_CHECKING = False
if TYPE_CHECKING:
    from gpuhook.apply.container_root import WritableRoot
    from gpuhook.host.ldcache_write import Entry

_MAX_LIBS = 4096  # directory entries of one injected directory gpuhook reads
_IDENTITIES: dict[tuple[str, int, int, int, int], tuple[str | None, int, int] | None] = {}


def injected(root: WritableRoot, dirs: tuple[str, ...], mounts: list[tuple[str, str]]
             ) -> tuple[tuple[Entry, ...], list[tuple[str, str, str]]]:
    """The cache entries of `dirs` (a SONAME listed once, from the first directory that has it) and the SONAME links
    to make ((directory, SONAME, file name)): a library mounted as a file is listed at its own path (no link needed
    to find it); a directory mounted whole (host ROCm) is listed from the host; any other is the image's own
    (CUDA's forward compatibility), read inside the root."""
    entries: list[Entry] = []
    links: list[tuple[str, str, str]] = []
    seen: set[tuple[int, str]] = set()
    for d in dirs:
        d = "/" + d.strip("/")
        found: list[Entry] = []
        covering = None
        for src, dst in mounts:
            dst = "/" + dst.strip("/")
            ident = _host_identity(src) if os.path.dirname(dst) == d else None
            if ident is not None:
                name = ident[0] or os.path.basename(dst)
                found.append((ident[1], name, dst, ident[2], 0, ""))
                if name != os.path.basename(dst) and "/" not in name:
                    links.append((d, name, os.path.basename(dst)))
            elif (d == dst or d.startswith(dst + "/")) and os.path.isdir(src):
                covering = src.rstrip("/") + d[len(dst):]
        if covering is not None:
            found += host_dir_entries(covering, d)
        elif not found:
            found += _scan_image(root, d)
        for e in found:
            if (e[0], e[1]) not in seen:
                seen.add((e[0], e[1]))
                entries.append(e)
    return tuple(entries), links


def _host_identity(path: str) -> tuple[str | None, int, int] | None:
    """A host library's (SONAME, flags, osversion); None where it is no regular file or no library of this machine.
    Remembered by the file's identity (a long-lived process reads each driver library once per change)."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    if not stat.S_ISREG(st.st_mode):
        return None
    key = (path, st.st_dev, st.st_ino, st.st_mtime_ns, st.st_size)
    if key in _IDENTITIES:
        return _IDENTITIES[key]
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        now = os.fstat(fd)
        if not stat.S_ISREG(now.st_mode):
            return None
        found = elf_soname.identity(fd)
    finally:
        os.close(fd)
    if (now.st_dev, now.st_ino, now.st_mtime_ns, now.st_size) == key[1:]:
        if len(_IDENTITIES) >= 4096:
            _IDENTITIES.clear()
        _IDENTITIES[key] = found
    return found


def _pick(d: str, candidates: list[tuple[str, bool, tuple[str | None, int, int]]]) -> list[Entry]:
    """ldconfig's entries for one directory: per SONAME one, at the file or link named by it, else at its highest
    version; a development link (libfoo.so -> a libfoo.so.N) listed under its own name, as ldconfig lists it."""
    best: dict[tuple[int, str], tuple[str, int]] = {}
    for name, is_link, (soname, flags, osversion) in candidates:
        key = soname or name
        if is_link and key != name and name.endswith(".so") and key.startswith(name):
            key = name
        have = best.get((flags, key))
        if have is None or name == key or (have[0] != key and ldcache_write.lib_key(name) > ldcache_write.lib_key(
                have[0])):
            best[(flags, key)] = (name, osversion)
    return [(flags, key, f"{d}/{name}", osversion, 0, "") for (flags, key), (name, osversion) in best.items()]


def host_dir_entries(host_dir: str, d: str) -> list[Entry]:
    """The libraries of a host directory mounted at `d`, as ldconfig lists them."""
    try:
        names = sorted(os.listdir(host_dir))[:_MAX_LIBS]
    except OSError:
        return []
    candidates = []
    for name in names:
        if ".so" not in name:
            continue
        path = os.path.join(host_dir, name)
        ident = _host_identity(path)
        if ident is not None:
            candidates.append((name, os.path.islink(path), ident))
    return _pick(d, candidates)


def _scan_image(root: WritableRoot, d: str) -> list[Entry]:
    """The libraries of the image's own directory `d`, each read inside the root (links resolved there), regular
    files only."""
    candidates = []
    for name in root.listdir(d, _MAX_LIBS):
        if ".so" not in name:
            continue
        try:
            link = root.open(f"{d}/{name}", PATH_FLAGS, follow_last=False)
        except OSError:
            continue
        try:
            is_link = stat.S_ISLNK(os.fstat(link).st_mode)
        finally:
            os.close(link)
        try:
            fd = root.open(f"{d}/{name}", PATH_FLAGS)
        except OSError:
            continue
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                continue
            data = os.open(f"/proc/self/fd/{fd}", os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
            try:
                ident = elf_soname.identity(data)
            finally:
                os.close(data)
        finally:
            os.close(fd)
        if ident is not None:
            candidates.append((name, is_link, ident))
    return _pick(d, candidates)
