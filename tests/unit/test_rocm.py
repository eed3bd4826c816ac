from __future__ import annotations

import os
from pathlib import Path

import pytest

from gpuhook import rocm
from gpuhook.safepath import InRoot

DRIVERS = [("6.3.6", "6.0"), ("6.7.0", "6.1"), ("6.8.5", "6.2"), ("6.10.5", "6.3"), ("6.12.12", "6.4"),
           ("6.14.14", "7.0"), ("6.16.6", "7.1"), ("6.16.13", "7.2"), ("6.9.1", None), ("5.18.13", None)]


@pytest.mark.parametrize(("dkms", "release"), DRIVERS, ids=[d[0] for d in DRIVERS])
def test_driver_release(dkms: str, release: str | None) -> None:
    assert rocm.release_of_driver(dkms) == release


WINDOWS = [
    ("same release", "6.2.1", "6.2", True), ("two older", "6.0.2", "6.2", True), ("three older", "5.7.1", "6.2", False),
    ("two newer", "6.4.0", "6.2", True), ("6.1 KMD runs 6.4", "6.4.3", "6.1", True),
    ("6.0 KMD not 6.3", "6.3.0", "6.0", False),
    ("7.2 driver runs 6.3", "6.3.4", "7.2", True), ("7.2 driver not 6.2", "6.2.4", "7.2", False),
    ("unknown release", "6.2.0", "4.5", None),
]


@pytest.mark.parametrize(("user", "release", "ok"), [w[1:] for w in WINDOWS], ids=[w[0] for w in WINDOWS])
def test_support_window(user: str, release: str, ok: bool | None) -> None:
    assert rocm.supported(user, release) is ok


def test_image_version_from_info_file_through_links(tmp_path: Path) -> None:
    (tmp_path / "opt/rocm-6.2.1/.info").mkdir(parents=True)
    (tmp_path / "opt/rocm-6.2.1/.info/version").write_text("6.2.1-112\n")
    os.symlink("/opt/rocm-6.2.1", tmp_path / "opt/rocm")  # absolute: resolved inside the image
    assert rocm.image_version(InRoot(str(tmp_path))) == "6.2.1"


def test_image_version_newest_versioned_dir_without_link(tmp_path: Path) -> None:
    for v in ("5.7.1", "6.1.0"):
        (tmp_path / f"opt/rocm-{v}/.info").mkdir(parents=True)
        (tmp_path / f"opt/rocm-{v}/.info/version").write_text(v)
    assert rocm.image_version(InRoot(str(tmp_path))) == "6.1.0"


def test_no_rocm_in_image(tmp_path: Path) -> None:
    assert rocm.image_version(InRoot(str(tmp_path))) is None


def test_link_out_of_the_image_is_not_followed(tmp_path: Path) -> None:
    image = tmp_path / "image"
    (image / "opt").mkdir(parents=True)
    (tmp_path / "host-secret/.info").mkdir(parents=True)
    (tmp_path / "host-secret/.info/version").write_text("9.9.9")
    os.symlink("../../host-secret", image / "opt/rocm")  # climbs out: clamped at the image root
    assert rocm.image_version(InRoot(str(image))) is None
