"""Prepared DRA claim records, which are also the driver's checkpoint: one nested 2,000 deep, of other shapes, or
a FIFO in their place is no record (issue 43, 7: the driver crash-looped restoring one), never a RecursionError."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from gpuhook.apply import claims
from gpuhook.plan.authority import ClaimedDevice, PreparedClaim

GOOD = PreparedClaim(uid="uid-1", namespace="ns", name="claim", devices=(ClaimedDevice(request="gpu", device="gpu-0",
                                                                                       vendor="nvidia", gpu="GPU-1"),),
                     pods=("pod",), prepared=1.0)


@pytest.mark.parametrize("text", [
    '{"uid": "uid-2", "devices": ' + "[" * 2000 + "]" * 2000 + "}",
    '{"uid": "uid-2", "namespace": "ns", "name": "c", "devices": [{"request": "r", "device": "d", "vendor": "v", '
    '"gpu": "g", "tuning": [[' + "[" * 900 + "]" * 900 + "]]}]}",
    '{"uid": "uid-2", "namespace": "ns", "name": "c", "devices": [["a list"]]}',
    '{"uid": "uid-2", "namespace": "ns", "name": "c", "devices": [{"request": "r", "device": "d", "vendor": "v", '
    '"gpu": "g", "tuning": [1, 2]}]}',
    "[" * 100_000,
], ids=["devices-2000-deep", "tuning-900-deep", "device-a-list", "tuning-numbers", "unclosed"])
def test_a_hostile_record_is_no_record_and_the_rest_restore(tmp_path: Path, text: str) -> None:
    state = str(tmp_path / "state")
    claims.save(state, GOOD)
    Path(claims.directory(state), "uid-2.json").write_text(text)
    assert claims.load(state, "uid-2") is None
    assert claims.all_records(state) == [GOOD]


def test_a_fifo_in_a_records_place_is_no_record(tmp_path: Path) -> None:
    state = str(tmp_path / "state")
    os.mkfifo(os.path.join(claims.directory(state), "uid-3.json"))
    assert claims.load(state, "uid-3") is None
    assert claims.all_records(state) == []
