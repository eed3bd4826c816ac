"""The one whole-file writer: temp (O_EXCL, never through a link) in the same directory, fsync, rename.

config.json, container records and procfs copies are written without the fsync (durable=False): the runtime
reads config.json a moment later and the engine writes the bundle anew after a crash; a record names a live
container and after a power loss none is; a copy is rebuilt whenever it does not match the host. On a disk (a
Podman bundle, a state_dir not on tmpfs) each fsync cost 1.7-4 ms of a GPU container's start.

Every whole file gpuhook writes goes through here: config.json, the ledger and its .prev, container
records, the config cache and the front end's fast file, engine configs, CDI specs, procfs copies and
feature files. A link at the target is refused (the rename would replace the link, but a reader that
follows it would have been reading somebody else's file): the caller gets an OSError naming the path.
"""

from __future__ import annotations

import errno
import os
import stat


def write_bytes(path: str, data: bytes, mode: int | None = None, make_dirs: bool = False, durable: bool = True) -> None:
    """Replace `path` with `data`, atomically; the file keeps its mode (else `mode`, else 0644). `durable=False`
    leaves out the fsync, for a file nobody needs after a crash (config.json: the engine makes the bundle anew).
    Writes a file."""
    directory = os.path.dirname(os.path.abspath(path))
    if make_dirs:
        os.makedirs(directory, exist_ok=True)
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        st = None
    if st is not None and stat.S_ISLNK(st.st_mode):
        raise OSError(errno.ELOOP, f"refusing to replace a symbolic link: {path}", path)
    keep = stat.S_IMODE(st.st_mode) if st is not None else (0o644 if mode is None else mode)
    tmp = os.path.join(directory, f".{os.path.basename(path)}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            if durable:
                os.fsync(fd)
            os.fchmod(fd, keep)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException:
        if os.path.lexists(tmp):
            os.unlink(tmp)
        raise


def write_text(path: str, text: str, mode: int | None = None, make_dirs: bool = False, durable: bool = True) -> None:
    """Replace `path` with `text` (UTF-8), atomically. Writes a file."""
    write_bytes(path, text.encode(), mode, make_dirs, durable)
