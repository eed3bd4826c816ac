"""What gpuhook reads in an image: files resolved inside its root, never out of it."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from gpuhook.errors import UnsafePathError
from gpuhook.host.image import InRoot, rocm_version


def test_image_version_from_info_file_through_links(tmp_path: Path) -> None:
    (tmp_path / "opt/rocm-6.2.1/.info").mkdir(parents=True)
    (tmp_path / "opt/rocm-6.2.1/.info/version").write_text("6.2.1-112\n")
    os.symlink("/opt/rocm-6.2.1", tmp_path / "opt/rocm")  # absolute: resolved inside the image
    assert rocm_version(InRoot(str(tmp_path))) == "6.2.1"


def test_image_version_newest_versioned_dir_without_link(tmp_path: Path) -> None:
    for v in ("5.7.1", "6.1.0"):
        (tmp_path / f"opt/rocm-{v}/.info").mkdir(parents=True)
        (tmp_path / f"opt/rocm-{v}/.info/version").write_text(v)
    assert rocm_version(InRoot(str(tmp_path))) == "6.1.0"


def test_no_rocm_in_image(tmp_path: Path) -> None:
    assert rocm_version(InRoot(str(tmp_path))) is None


def test_link_out_of_the_image_is_not_followed(tmp_path: Path) -> None:
    image = tmp_path / "image"
    (image / "opt").mkdir(parents=True)
    (tmp_path / "host-secret/.info").mkdir(parents=True)
    (tmp_path / "host-secret/.info/version").write_text("9.9.9")
    os.symlink("../../host-secret", image / "opt/rocm")  # climbs out: clamped at the image root
    assert rocm_version(InRoot(str(image))) is None


def _hostile(tmp_path: Path, kind: str) -> Path:
    import stat

    path = tmp_path / "f"
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "device":
        os.mknod(path, stat.S_IFCHR | 0o644, os.makedev(1, 5))  # /dev/zero
    elif kind == "huge":
        with open(path, "wb") as f:
            f.truncate(1 << 40)  # sparse: a terabyte that costs nothing on disk
    elif kind == "socket":
        import socket

        s = socket.socket(socket.AF_UNIX)
        s.bind(str(path))
    elif kind == "directory":
        path.mkdir()
    return path


@pytest.mark.parametrize(("kind", "says"), [("fifo", "a FIFO"), ("device", "a character device"),
                                            ("huge", "1099511627776 bytes"), ("socket", "a socket"),
                                            ("directory", "a directory")])
def test_only_small_regular_files_are_read(tmp_path: Path, kind: str, says: str) -> None:
    _hostile(tmp_path, kind)
    for openat2 in (True, False):
        with pytest.raises(UnsafePathError, match=says):
            InRoot(str(tmp_path), use_openat2=openat2).read_text("/f")


def test_a_refused_version_file_is_a_note_not_a_hang(tmp_path: Path) -> None:
    (tmp_path / "opt/rocm/.info").mkdir(parents=True)
    os.mkfifo(tmp_path / "opt/rocm/.info/version")
    notes: list[str] = []
    assert rocm_version(InRoot(str(tmp_path)), notes) is None
    assert notes == ["the image's /opt/rocm/.info/version is a FIFO, not a regular file: its ROCm version was not read"]


def test_listing_is_bounded(tmp_path: Path) -> None:
    for i in range(30):
        (tmp_path / f"e{i:02d}").touch()
    assert len(InRoot(str(tmp_path)).listdir("/", limit=10)) == 10
