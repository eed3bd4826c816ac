"""Whole-file replacement that never leaves a half-written file: temp (O_EXCL, no symlink) in the same
directory, fsync, rename; the file's mode is kept. The one such writer for config.json, engine configs,
CDI specs and feature files."""

from __future__ import annotations

import os


def write_text(path: str, text: str, make_dirs: bool = False) -> None:
    """Replace `path` with `text`, atomically. Writes a file (and its directory when `make_dirs`)."""
    directory = os.path.dirname(os.path.abspath(path))
    if make_dirs:
        os.makedirs(directory, exist_ok=True)
    mode = os.stat(path).st_mode & 0o7777 if os.path.exists(path) else 0o644
    tmp = os.path.join(directory, f".{os.path.basename(path)}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
