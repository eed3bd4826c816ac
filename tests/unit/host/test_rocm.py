from __future__ import annotations

import pytest

from gpuhook.host import rocm

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
