"""The GPU path's lock (state_dir/count.lock): starts share it, a count pick or a layout change holds it alone
(issue 43, 6)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from gpuhook.apply import state_dir

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
