"""The one whole-file writer: whole or not at all, mode kept, never through a link."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from gpuhook.atomic import write_bytes, write_text


def test_replaces_whole_keeps_the_mode_and_leaves_no_temp(tmp_path: Path) -> None:
    path = tmp_path / "f"
    path.write_text("old")
    os.chmod(path, 0o640)
    write_text(str(path), "new")
    assert path.read_text() == "new" and stat.S_IMODE(path.stat().st_mode) == 0o640
    write_bytes(str(tmp_path / "g"), b"\x00\x01", mode=0o600)
    assert stat.S_IMODE((tmp_path / "g").stat().st_mode) == 0o600
    assert sorted(os.listdir(tmp_path)) == ["f", "g"]


def test_refuses_a_link_at_the_target(tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.write_text("keep")
    os.symlink(victim, tmp_path / "link")
    with pytest.raises(OSError, match="symbolic link"):
        write_text(str(tmp_path / "link"), "evil")
    assert victim.read_text() == "keep" and os.path.islink(tmp_path / "link")
    assert sorted(os.listdir(tmp_path)) == ["link", "victim"]


def test_a_failed_write_leaves_the_old_file_and_no_temp(tmp_path: Path) -> None:
    path = tmp_path / "f"
    path.write_text("old")
    with pytest.raises(TypeError):
        write_bytes(str(path), "not bytes")  # type: ignore[arg-type]
    assert path.read_text() == "old" and os.listdir(tmp_path) == ["f"]


def test_makes_directories_when_asked(tmp_path: Path) -> None:
    write_text(str(tmp_path / "a/b/c"), "x", make_dirs=True)
    assert (tmp_path / "a/b/c").read_text() == "x"
