"""statefile: gpuhook's own files read bounded, and the host directories it makes walked without following links
(issue 43, 8: a link planted at <mps_dir>/<UUID> made gpuhook put pipe/ where it pointed)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from gpuhook.errors import UnsafePathError
from gpuhook.statefile import make_dirs

UUID = "GPU-00000000-0000-0000-0000-000000000001"


def test_makes_the_directories_below_the_base(tmp_path: Path) -> None:
    base = tmp_path / "mps"
    make_dirs(str(base), f"{base}/{UUID}/pipe")
    make_dirs(str(base), f"{base}/{UUID}/pipe")  # again: already there is fine
    assert (base / UUID / "pipe").is_dir() and not (base / UUID).is_symlink()
    assert (base / UUID / "pipe").stat().st_mode & 0o777 == 0o755 & ~_umask()


@pytest.mark.parametrize("where", [UUID, f"{UUID}/pipe"], ids=["home", "pipe"])
def test_a_planted_link_is_not_followed_and_its_target_stays_empty(tmp_path: Path, where: str) -> None:
    base, target = tmp_path / "mps", tmp_path / "etc"
    target.mkdir()
    (base / UUID).mkdir(parents=True) if where != UUID else base.mkdir()
    (base / where).symlink_to(target)
    with pytest.raises(UnsafePathError, match=f"{base}/{where} is a symbolic link or not a directory"):
        make_dirs(str(base), f"{base}/{UUID}/pipe")
    assert list(target.iterdir()) == []


def test_a_file_in_the_way_is_refused(tmp_path: Path) -> None:
    (tmp_path / "mps").mkdir()
    (tmp_path / "mps" / UUID).write_text("")
    with pytest.raises(UnsafePathError, match="not a directory"):
        make_dirs(str(tmp_path / "mps"), f"{tmp_path}/mps/{UUID}/log")


@pytest.mark.skipif(os.geteuid() != 0, reason="ownership checks are root's")
def test_a_directory_others_own_or_can_write_is_refused(tmp_path: Path) -> None:
    base = tmp_path / "mps"
    (base / UUID).mkdir(parents=True)
    os.chown(base / UUID, 1000, 1000)
    with pytest.raises(UnsafePathError, match="owned by uid 1000"):
        make_dirs(str(base), f"{base}/{UUID}/pipe")
    os.chown(base / UUID, 0, 0)
    os.chmod(base / UUID, 0o777)
    with pytest.raises(UnsafePathError, match="mode 777"):
        make_dirs(str(base), f"{base}/{UUID}/pipe")
    assert not (base / UUID / "pipe").exists()


@pytest.mark.parametrize("path", ["/etc/x", "{base}/../x", "{base}"], ids=["outside", "dotdot", "the-base"])
def test_only_paths_below_the_base(tmp_path: Path, path: str) -> None:
    with pytest.raises(UnsafePathError, match="is not below"):
        make_dirs(str(tmp_path), path.format(base=tmp_path))


def test_a_base_that_is_a_link_is_refused(tmp_path: Path) -> None:
    (tmp_path / "real").mkdir()
    (tmp_path / "mps").symlink_to(tmp_path / "real")
    with pytest.raises(UnsafePathError, match="cannot be made or opened as a directory"):
        make_dirs(str(tmp_path / "mps"), f"{tmp_path}/mps/{UUID}")
    assert list((tmp_path / "real").iterdir()) == []


def _umask() -> int:
    old = os.umask(0)
    os.umask(old)
    return old
