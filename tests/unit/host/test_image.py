"""What gpuhook reads in an image: files resolved inside its root, never out of it."""

from __future__ import annotations

import os
from pathlib import Path

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
