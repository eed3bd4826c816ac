"""The GPU path's one transaction (gpu_path/transaction.py): the lock held for the block, let go on every way out
of it; the records read under it; the commit's order (record, the leases again, the count)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from contextlib import nullcontext
from pathlib import Path

import pytest

from gpuhook.apply import containers, counters, state_dir
from gpuhook.errors import PolicyError
from gpuhook.gpu_path.transaction import Transaction
from gpuhook.host.processes import start_time

_TRY = """
import fcntl, os, sys
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o600)
try:
    fcntl.flock(fd, (fcntl.LOCK_EX if sys.argv[2] == "ex" else fcntl.LOCK_SH) | fcntl.LOCK_NB)
except BlockingIOError:
    sys.exit(1)
"""
ME = {"pid": os.getpid(), "start": start_time(os.getpid())}  # a live holder or container: this process


def _other_takes(state: Path, how: str) -> bool:
    """Whether another process gets the GPU path's lock now, shared ("sh") or alone ("ex")."""
    return subprocess.run([sys.executable, "-c", _TRY, str(state / state_dir.LOCK), how], check=False).returncode == 0


def _record(cid: str, gpus: tuple[str, ...], pid: int = 0) -> containers.ContainerRecord:
    pid = pid or os.getpid()
    return containers.ContainerRecord(id=cid, drivers=(("nvidia", "550.54.15"),), pid=pid,
                                      start_time=start_time(pid), gpus=gpus)


def _lease(state: Path, gpu: str, holder: str) -> None:
    state.mkdir(mode=0o700, exist_ok=True)
    leases = {gpu: {"id": holder, **ME}}
    (state / "ledger.json").write_text(json.dumps({"version": 1, "seq": 1, "settings": {}, "leases": leases}))


def _files(state: Path) -> list[str]:
    directory = state / "containers"
    return sorted(p.name for p in directory.iterdir()) if directory.is_dir() else []


class _Stop(Exception):
    pass


# (exclusive, locked, how the block ends): who else gets the lock inside it
LOCKS = [
    (False, True, "normal", True, False),  # a start: other starts go on, a count or a layout change waits
    (True, True, "normal", False, False),  # a count: everyone waits
    (False, True, "error", True, False),
    (True, True, "error", False, False),
    (False, False, "normal", True, True),  # the hook following the shim's plan: no lock at all
]


@pytest.mark.parametrize(("exclusive", "locked", "ending", "shared_ok", "exclusive_ok"), LOCKS,
                         ids=["start", "count", "start-error", "count-error", "unlocked"])
def test_the_lock_is_held_for_the_block_and_let_go_on_every_way_out(tmp_path: Path, exclusive: bool, locked: bool,
                                                                     ending: str, shared_ok: bool,
                                                                     exclusive_ok: bool) -> None:
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    with pytest.raises(_Stop) if ending == "error" else nullcontext(), \
            Transaction(str(state), "c1", exclusive=exclusive, locked=locked):
        assert state_dir.holds_lock(exclusive=False) == locked
        assert state_dir.holds_lock(exclusive=True) == (locked and exclusive)
        assert _other_takes(state, "sh") == shared_ok and _other_takes(state, "ex") == exclusive_ok
        if ending == "error":
            raise _Stop
    assert not state_dir.holds_lock(exclusive=False)
    assert _other_takes(state, "ex")


def test_a_hold_the_process_had_is_kept(tmp_path: Path) -> None:
    """A lock held before the block (a second hold_lock keeps the first) is the holder's to let go."""
    state_dir.hold_lock(str(tmp_path), exclusive=True)
    try:
        with state_dir.Lock(str(tmp_path), exclusive=False):
            assert state_dir.holds_lock(exclusive=True)
        assert state_dir.holds_lock(exclusive=True) and not _other_takes(tmp_path, "sh")
    finally:
        state_dir.release_lock()
    assert _other_takes(tmp_path, "ex")


def test_the_records_are_read_for_this_container(tmp_path: Path) -> None:
    state = tmp_path / "state"
    containers.save(str(state), _record("c1", ("GPU-a",)))
    containers.save(str(state), _record("c2", ("GPU-b", "GPU-c")))
    with Transaction(str(state), "c1") as txn:
        assert txn.users() == (("GPU-b", "c2"), ("GPU-c", "c2"))
        assert txn.held() == ("GPU-a",) and txn.recorded()
    with Transaction(str(state), "c3") as txn:
        assert txn.held() is None and not txn.recorded()
    with Transaction(str(state), "") as txn:
        assert txn.held() is None and len(txn.users()) == 3


# (leased GPU, recheck, count): (record kept, error, counters)
COMMITS = [
    ("", True, (("nvidia", "550"), ("amd", ""), ("nvidia", "550")), True, "",
     {("prepared", "nvidia"): 1, ("prepared", "amd"): 1}),
    ("", True, (), True, "", {}),
    ("GPU-b", True, (("nvidia", "550"),), False, "GPU GPU-b is held exclusively by container holder: go away", {}),
    ("GPU-b", False, (("nvidia", "550"),), True, "", {("prepared", "nvidia"): 1}),
    ("GPU-z", True, (("nvidia", "550"),), True, "", {("prepared", "nvidia"): 1}),
]


@pytest.mark.parametrize(("leased", "recheck", "count", "kept", "error", "counted"), COMMITS,
                         ids=["counted-once-per-vendor", "not-counted", "leased-meanwhile", "leased-not-rechecked",
                              "other-gpu-leased"])
def test_commit_writes_the_record_then_rechecks_the_leases_then_counts(
        tmp_path: Path, leased: str, recheck: bool, count: tuple[tuple[str, str], ...], kept: bool, error: str,
        counted: dict[tuple[str, str], int]) -> None:
    state = tmp_path / "state"
    if leased:
        _lease(state, leased, "holder")
    record = _record("c1", ("GPU-a", "GPU-b"))
    with Transaction(str(state), "c1") as txn:
        if error:
            with pytest.raises(PolicyError) as info:
                txn.commit(record, recheck=recheck, count=count, way_out="go away")
            assert str(info.value) == error
        else:
            txn.commit(record, recheck=recheck, count=count, way_out="go away")
    assert _files(state) == ([record.file_name()] if kept else [])
    assert counters.totals(str(state)) == counted
    assert not state_dir.holds_lock(exclusive=False)


def test_a_lease_whose_holder_is_gone_refuses_nothing(tmp_path: Path) -> None:
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    gone = {"id": "old", "pid": os.getpid(), "start": "1"}  # not this process's start time
    (state / "ledger.json").write_text(json.dumps({"version": 1, "seq": 1, "settings": {},
                                                   "leases": {"GPU-a": gone}}))
    with Transaction(str(state), "c1") as txn:
        txn.commit(_record("c1", ("GPU-a",)))
    assert len(_files(state)) == 1

