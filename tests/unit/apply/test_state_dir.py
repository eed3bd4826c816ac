"""The GPU path's lock (state_dir/count.lock): starts share it, a count pick or a layout change holds it alone
(issue 43, 6). The sweep of what no container needs: linker caches kept for read-only roots."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gpuhook.apply import container_ldcache, state_dir

_TRY = """
import fcntl, os, sys
fd = os.open(sys.argv[1], os.O_RDWR)
try:
    fcntl.flock(fd, (fcntl.LOCK_EX if sys.argv[2] == "ex" else fcntl.LOCK_SH) | fcntl.LOCK_NB)
except BlockingIOError:
    sys.exit(1)
"""


def _other_takes(tmp_path: Path, how: str) -> bool:
    return subprocess.run([sys.executable, "-c", _TRY, str(tmp_path / state_dir.LOCK), how],
                          check=False).returncode == 0


@pytest.mark.parametrize(("exclusive", "shared_ok", "exclusive_ok"), [
    (False, True, False),  # a start: other starts go on, a layout change waits
    (True, False, False),  # a count pick or a layout change: everyone waits
], ids=["start", "layout-change"])
def test_who_waits_for_whom(tmp_path: Path, exclusive: bool, shared_ok: bool, exclusive_ok: bool) -> None:
    state_dir.hold_lock(str(tmp_path), exclusive)
    try:
        assert state_dir.holds_lock(exclusive=False) and state_dir.holds_lock(exclusive=True) == exclusive
        assert _other_takes(tmp_path, "sh") == shared_ok and _other_takes(tmp_path, "ex") == exclusive_ok
    finally:
        state_dir.release_lock()
    assert not state_dir.holds_lock(exclusive=False) and _other_takes(tmp_path, "ex")


def test_a_kept_linker_cache_is_swept_once_no_live_container_names_it(tmp_path: Path) -> None:
    """Kept for a live container (its record names it), or younger than the moment between keeping and the record:
    kept. Named by no one and older: removed. A writer that died left a hidden temporary: removed."""
    state = str(tmp_path)
    used = container_ldcache._keyed(state, b"in use")
    young = container_ldcache._keyed(state, b"just kept")
    old = container_ldcache._keyed(state, b"left")
    dead = tmp_path / state_dir.KEPT_CACHES / ".0123.cache.999999999"
    dead.write_bytes(b"half")
    long_ago = time.time() - 60
    for path in (used, old):
        os.utime(path, (long_ago, long_ago))
    removed = state_dir.sweep(state, {used})
    assert sorted(removed) == sorted([old, str(dead)])
    assert os.path.isfile(used) and os.path.isfile(young)


def test_finding_a_kept_cache_again_makes_it_young(tmp_path: Path) -> None:
    """The container about to mount a cache kept long ago (found by its content) is not swept from under it."""
    path = container_ldcache._keyed(str(tmp_path), b"same content")
    os.utime(path, (0, 0))
    assert container_ldcache._keyed(str(tmp_path), b"same content") == path
    assert state_dir.sweep(str(tmp_path), set()) == []
    assert Path(path).read_bytes() == b"same content"
