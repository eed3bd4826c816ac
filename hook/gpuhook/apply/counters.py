"""Counters of what the short-lived shim and hooks did (containers prepared per vendor, refused per reason), kept
in state_dir for the exporter: one file per counter and label, state_dir/counters/<name>.<label>, and one byte
appended to it per event. O_APPEND makes each append atomic against every other writer, so the hot path takes
no lock, reads nothing and never rewrites a file: the count is the file's size, read with one stat.

A million events cost a MiB of state_dir (a tmpfs, emptied at boot: Prometheus reads the reset as a counter
reset). Counting is best effort: a full, missing or untrusted state_dir never turns a container's start or
refusal into another error.
"""

from __future__ import annotations

import os

from gpuhook.apply.state_dir import ensure
from gpuhook.errors import GpuhookError, StateError

DIR = "counters"
PREPARED = "prepared"
REFUSED = "refused"
_SAFE = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-")


def bump(state_dir: str, name: str, label: str) -> None:
    """Count one event of counter `name` with `label` (a vendor, an error class). Appends a byte; never raises."""
    label = label if label and len(label) <= 64 and set(label) <= _SAFE else "other"
    try:
        directory = os.path.join(ensure(state_dir), DIR)
        path = os.path.join(directory, f"{name}.{label}")
        try:
            fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
        except FileNotFoundError:
            os.makedirs(directory, mode=0o700, exist_ok=True)
            fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
        try:
            os.write(fd, b"\n")
        finally:
            os.close(fd)
    except (OSError, StateError):
        pass


def reason(error: BaseException) -> str:
    """The refusal reason counted for an error: its class within gpuhook's hierarchy, else OSError or
    InternalError."""
    if isinstance(error, GpuhookError):
        return type(error).__name__
    return "OSError" if isinstance(error, OSError) else "InternalError"


def totals(state_dir: str) -> dict[tuple[str, str], int]:
    """{(name, label): count} of every counter in state_dir (the caller has checked that it is trusted). Reads a
    directory and stats its files."""
    directory = os.path.join(state_dir, DIR)
    out: dict[tuple[str, str], int] = {}
    try:
        entries = os.scandir(directory)
    except (FileNotFoundError, NotADirectoryError):
        return out
    with entries:
        for entry in entries:
            name, dot, label = entry.name.partition(".")
            if entry.name.startswith(".") or not dot or not label or not entry.is_file(follow_symlinks=False):
                continue
            try:
                out[(name, label)] = entry.stat(follow_symlinks=False).st_size
            except FileNotFoundError:
                continue
    return out
