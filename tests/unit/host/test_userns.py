from __future__ import annotations

import os

import pytest

from gpuhook.host import userns

HOST = "         0          0 4294967295\n"
ROOTLESS = "         0       1000          1\n         1     100000      65536\n"


@pytest.mark.parametrize(("uid_map", "uid", "host"), [
    (HOST, 0, 0),
    (HOST, 1000, 1000),
    (ROOTLESS, 0, 1000),  # a rootless engine's root: the user
    (ROOTLESS, 1, 100000),
    (ROOTLESS, 65536, 165535),
    (ROOTLESS, 65537, None),  # not mapped
    ("0 0 1\n", 0, 0),
    ("garbage\n1 2\n", 0, None),
    ("", 0, None),
], ids=["host-root", "host-user", "rootless-root", "rootless-sub", "rootless-last", "unmapped", "one", "bad",
        "empty"])
def test_host_uid(uid_map: str, uid: int, host: int | None) -> None:
    assert userns.host_uid(uid_map, uid) == host


def test_own_host_uid_reads_the_map(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "uid_map"
    monkeypatch.setattr(userns, "UID_MAP", str(path))
    assert userns.own_host_uid() == os.geteuid()  # no file: no user namespaces
    path.write_text(f"{os.geteuid()} 47000 1\n")
    assert userns.own_host_uid() == 47000
    path.write_text("5000000 0 1\n")  # this process's uid unmapped: the overflow user, never root
    assert userns.own_host_uid() == 65534
