"""Hook mode's reading of a container's user namespace: whether it has one, and whom it maps its root to."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from gpuhook.apply.live import in_user_namespace, root_ids


def _proc(tmp_path: Path, uid_map: str, gid_map: str, own_userns: bool) -> str:
    for pid in ("42", "self"):
        (tmp_path / pid / "ns").mkdir(parents=True)
    (tmp_path / "self/ns/user").write_text("host")
    if own_userns:
        (tmp_path / "42/ns/user").write_text("its own")
    else:
        os.link(tmp_path / "self/ns/user", tmp_path / "42/ns/user")  # the same inode: the same namespace
    (tmp_path / "42/uid_map").write_text(uid_map)
    (tmp_path / "42/gid_map").write_text(gid_map)
    return str(tmp_path)


@pytest.mark.parametrize(("uid_map", "gid_map", "ids"), [
    ("         0     100000      65536\n", "         0     200000      65536\n", (100000, 200000)),
    ("         0          0 4294967295\n", "         0          0 4294967295\n", (0, 0)),  # the host's own
    ("      1000       1000          1\n         0     300000       1000\n", "0 300000 1001\n", (300000, 300000)),
    ("      1000     501000        100\n", "      1000     501000        100\n", (501000, 501000)),  # root unmapped
], ids=["usual", "identity", "root-in-a-later-range", "root-unmapped"])
def test_root_ids(tmp_path: Path, uid_map: str, gid_map: str, ids: tuple[int, int]) -> None:
    assert root_ids(42, _proc(tmp_path, uid_map, gid_map, True)) == ids


def test_in_user_namespace(tmp_path: Path) -> None:
    assert in_user_namespace(42, _proc(tmp_path / "a", "", "", True))
    assert not in_user_namespace(42, _proc(tmp_path / "b", "", "", False))
