"""state_dir: made root-only, and trusted only while it is root's alone. Everything gpuhook keeps there (the
ledger, container records, procfs copies, the linker-cache mount point) decides what root does next, so a
directory someone else owns or can write, or a link in its place, is refused before anything is read or
written in it."""

from __future__ import annotations

import os
import stat

from gpuhook.errors import StateError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import TypeVar

    T = TypeVar("T")

_checked: set[str] = set()  # per process: a directory found trusted once stays so for a short-lived process
LOCK = "count.lock"  # the GPU path's lock (its name from when count requests alone took it)
KEPT_CACHES = "ldcache"  # linker caches kept for read-only roots (apply/container_ldcache.py), swept here
_held = [-1, 0]  # the lock's fd while this process holds it, and how (fcntl.LOCK_SH or LOCK_EX)


def ensure(state_dir: str) -> str:
    """`state_dir`, created (0700) where missing; StateError when it is not a directory root alone can write."""
    if state_dir in _checked:
        return state_dir
    try:
        os.makedirs(state_dir, mode=0o700, exist_ok=True)
    except OSError as e:
        raise StateError(f"state_dir {state_dir} cannot be made: {e.strerror}: point state_dir at a root-owned "
                         "directory (default /run/gpuhook)") from e
    check(state_dir)
    _checked.add(state_dir)
    return state_dir


def hold_lock(state_dir: str, exclusive: bool) -> None:
    """Wait for the GPU path's lock (state_dir/count.lock) and hold it until release_lock: shared by a container's
    start from before discovery until its record is saved, exclusive for a count pick (the records it picks
    around) and for a layout change (`partition apply`: no start sees a GPU's devices while they change). A
    process holds it once (a second call keeps the first hold). `with Lock(...)` holds it for a block: the GPU
    path's transaction (gpu_path/transaction.py) takes it so. Opens and locks a file."""
    import fcntl

    if _held[0] >= 0:
        return
    fd = os.open(os.path.join(ensure(state_dir), LOCK), os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    how = fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH
    try:
        fcntl.flock(fd, how)
    except OSError:
        os.close(fd)
        raise
    _held[:] = [fd, how]


def holds_lock(exclusive: bool) -> bool:
    """Whether this process holds the GPU path's lock (exclusively, with `exclusive`)."""
    import fcntl

    return _held[0] >= 0 and (not exclusive or _held[1] == fcntl.LOCK_EX)


def release_lock() -> None:
    """Let the next start or layout change go on (closes the lock's file)."""
    if _held[0] >= 0:
        os.close(_held[0])
        _held[:] = [-1, 0]


class Lock:
    """The GPU path's lock for the body of a with-statement: hold_lock as it starts, release_lock on every way out
    of it (an error too). Where this process held the lock already, that hold stays and this one lets go of
    nothing."""

    __slots__ = ("_took", "exclusive", "state_dir")

    def __init__(self, state_dir: str, exclusive: bool) -> None:
        self.state_dir = state_dir
        self.exclusive = exclusive
        self._took = False

    def __enter__(self) -> Lock:
        """Wait for the lock. Opens and locks state_dir/count.lock."""
        self._took = _held[0] < 0
        hold_lock(self.state_dir, self.exclusive)
        return self

    def __exit__(self, *exc: object) -> None:
        """Let the next start, count pick or layout change go on. Closes the lock's file."""
        if self._took:
            self._took = False
            release_lock()


def check(state_dir: str) -> str:
    """`state_dir` as it is now, never made nor remembered (a long-running reader checks before each read);
    StateError when it is missing or not a directory root alone can write."""
    try:
        st = os.lstat(state_dir)
    except OSError as e:
        raise StateError(f"state_dir {state_dir} cannot be read: {e.strerror}") from e
    if stat.S_ISLNK(st.st_mode) or not stat.S_ISDIR(st.st_mode):
        raise StateError(f"state_dir {state_dir} is a symbolic link or not a directory: gpuhook keeps its state "
                         "only in a real directory of root's")
    if st.st_uid != os.geteuid() or st.st_mode & 0o022:
        raise StateError(f"state_dir {state_dir} is owned by uid {st.st_uid} with mode {stat.S_IMODE(st.st_mode):o}: "
                         "gpuhook trusts only state no one but root can write (chown root, chmod go-w) or set "
                         "state_dir elsewhere")
    return state_dir


def sweep(state_dir: str, copies_in_use: set[str], older_than: float = 5.0) -> list[str]:
    """What a killed writer left (temporary files and directories whose writer's pid is gone), and procfs copies
    and linker caches kept for read-only roots (ldcache/) that no live container's record names (older than
    `older_than` seconds: a copy is written, or a kept cache found again, moments before the record that names it).
    Returns what was removed. Deletes files."""
    import shutil
    import time

    removed = []
    now = time.time()
    for directory, dirs, files in os.walk(ensure(state_dir)):
        for name in [*files, *dirs]:
            path = os.path.join(directory, name)
            if _left_by_a_dead_writer(name):
                shutil.rmtree(path, ignore_errors=True) if os.path.isdir(path) else unlink(path)
                removed.append(path)
        if os.path.basename(directory).endswith("-procfs"):
            for name in list(dirs):
                path = os.path.join(directory, name)
                if not name.startswith(".") and path not in copies_in_use and _age(path, now) > older_than:
                    shutil.rmtree(path, ignore_errors=True)
                    unlink(path + ".content")
                    removed.append(path)
            dirs[:] = []  # a copy's own files are not state
        elif directory == os.path.join(state_dir, KEPT_CACHES):
            for name in files:
                path = os.path.join(directory, name)
                if name.endswith(".cache") and path not in copies_in_use and _age(path, now) > older_than:
                    unlink(path)
                    removed.append(path)
    return removed


def _left_by_a_dead_writer(name: str) -> bool:
    """`.<name>.<pid>.tmp` (the atomic writer), `.<digest>.<pid>` (a procfs copy being built)."""
    parts = name.split(".")
    if not name.startswith(".") or len(parts) < 3:
        return False
    pid = parts[-2] if parts[-1] == "tmp" else parts[-1]
    if not pid.isdigit():
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except OSError:
        return False
    return False


def _age(path: str, now: float) -> float:
    try:
        return now - os.lstat(path).st_mtime
    except OSError:
        return 0.0


def unlink(path: str) -> None:
    """Remove a file that another sweep may have removed first. Deletes a file."""
    try:  # noqa: SIM105 (no contextlib: see gpuhook.startup)
        os.unlink(path)
    except FileNotFoundError:
        pass


def records(directory: str, read: Callable[[str], T | None]) -> list[T]:
    """Every record file in `directory` (<name>.json, not a writer's hidden temporary) that `read` takes, in name
    order; one it cannot read is left out. Reads files."""
    out = []
    for name in sorted(os.listdir(directory)):
        if name.endswith(".json") and not name.startswith("."):
            rec = read(os.path.join(directory, name))
            if rec is not None:
                out.append(rec)
    return out
