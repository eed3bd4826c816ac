"""state_dir: made root-only, and trusted only while it is root's alone. Everything gpuhook keeps there (the
ledger, container records, procfs copies, the linker-cache mount point) decides what root does next, so a
directory someone else owns or can write, or a link in its place, is refused before anything is read or
written in it."""

from __future__ import annotations

import os
import stat

from gpuhook.errors import StateError

_checked: set[str] = set()  # per process: a directory found trusted once stays so for a short-lived process


def ensure(state_dir: str) -> str:
    """`state_dir`, created (0700) where missing; StateError when it is not a directory root alone can write."""
    if state_dir in _checked:
        return state_dir
    try:
        os.makedirs(state_dir, mode=0o700, exist_ok=True)
        st = os.lstat(state_dir)
    except OSError as e:
        raise StateError(f"state_dir {state_dir} cannot be made: {e.strerror}: point state_dir at a root-owned "
                         "directory (default /run/gpuhook)") from e
    if stat.S_ISLNK(st.st_mode) or not stat.S_ISDIR(st.st_mode):
        raise StateError(f"state_dir {state_dir} is a symbolic link or not a directory: gpuhook keeps its state "
                         "only in a real directory of root's")
    if st.st_uid != os.geteuid() or st.st_mode & 0o022:
        raise StateError(f"state_dir {state_dir} is owned by uid {st.st_uid} with mode {stat.S_IMODE(st.st_mode):o}: "
                         "gpuhook trusts only state no one but root can write (chown root, chmod go-w) or set "
                         "state_dir elsewhere")
    _checked.add(state_dir)
    return state_dir
